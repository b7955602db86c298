"""training/skating_breakdown.py: the foot skating split into planted paws that slide and
swinging paws carried low, per paw."""

import numpy as np
import pytest
from canis.runtime.motion_metrics import foot_skating_cm
from canis.training.skating_breakdown import paw_breakdown, summarise


def test_a_sliding_planted_paw_and_a_low_swing_are_told_apart():
    frames, fps = 120, 60.0
    t = np.arange(frames) / fps
    paws = np.zeros((frames, 4, 3))
    paws[:, 0, 0] = 0.06 * t  # paw 0 planted on the ground, sliding at 6 cm/s
    paws[:, 1, 0] = 1.2 * t  # paw 1 swings forward at 1.2 m/s, 1.5 cm up
    paws[:, 1, 1] = 0.015
    paws[:, 2, 1] = 0.10  # paw 2 held 10 cm up: not counted at all
    # paw 3 stands still on the ground
    body = np.full(frames, 0.6)
    parts = paw_breakdown(paws, 0.0, body)
    s = summarise([parts])
    steps = frames - 1
    assert parts["steps"] == steps
    assert s["planted"][0] == pytest.approx(6.0 / fps)  # 0.1 cm a frame at height 0: weight 1
    assert s["swinging"][0] == 0.0
    assert s["planted"][1] == 0.0  # 2 cm a frame at 1.5 cm up, weighted 2 - 2^0.6:
    assert s["swinging"][1] == pytest.approx(2.0 * (2 - 2**0.6))
    assert s["all"][2] == 0.0 and s["all"][3] == 0.0
    # the two parts add up to the evaluation's own measure, paw by paw
    whole = foot_skating_cm(paws[..., [0, 2]], paws[..., 1]).mean(0)
    np.testing.assert_allclose(s["all"], whole)
    np.testing.assert_allclose(s["lift_cm"][[0, 1, 2]], [0.0, 1.5, 10.0])
    # under 2.5 cm: all but the paw held 10 cm up
    np.testing.assert_allclose(s["down"], [1.0, 1.0, 0.0, 1.0])


def test_only_the_counted_steps_and_a_ground_under_the_paws():
    frames = 60
    paws = np.zeros((frames, 4, 3))
    paws[:, 0, 0] = np.arange(frames) * 0.01  # 1 cm a frame
    paws[..., 1] = 0.30  # on a platform 30 cm up
    counted = np.zeros(frames, bool)
    counted[:31] = True  # 30 steps counted
    parts = paw_breakdown(paws, 0.30, np.full(frames, 0.6), counted)
    assert parts["steps"] == 30
    s = summarise([parts, parts])
    assert s["all"][0] == pytest.approx(1.0)
    assert s["all"][1:].tolist() == [0.0, 0.0, 0.0]


def test_a_missing_mocap_folder_is_named(tmp_path, capsys):
    """The studies' shared command line (evaluation/study_arguments.py)."""
    from canis.training.skating_breakdown import main

    with pytest.raises(SystemExit):
        main(["--mocap", str(tmp_path / "nowhere"), "--models", "MANN8"])
    assert f"--mocap: no mocap folder at {tmp_path / 'nowhere'}" in capsys.readouterr().err

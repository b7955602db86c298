"""The demo's speed: what the HUD shows (the dog's speed over the last 2 s) against what the
player asks, with the shipped MANN-8 driven through the demo's own input path."""

import numpy as np
import pytest
from canis.demo.input import InputFrame, PlayerControl
from canis.demo.status import SHOWN_SPEED_WINDOW_FRAMES, shown_speed_mps
from canis.runtime.assets import shipped_model_path
from canis.runtime.control import SpeedCalibration, load_speed_calibration
from canis.runtime.controller import Controller
from canis.runtime.inference import MotionModel

MANN8 = shipped_model_path()  # the default the demo drives (int8)


def test_calibration_inverts_the_network_curve_and_reads_the_card(tmp_path):
    curve = SpeedCalibration(np.array([0.0, 1.0, 2.0]), np.array([0.0, 1.5, 2.5]))
    assert curve.command_for(np.array([1.5, 2.0, 5.0])) == pytest.approx([1.0, 1.5, 4.0])
    model = tmp_path / "m.onnx"
    assert load_speed_calibration(model) is None  # no card: integral tracking alone
    model.with_suffix(".closed_loop.json").write_text("{not json")
    with pytest.raises(ValueError, match="m.closed_loop.json: not a readable"):
        load_speed_calibration(model)


def hold(controller, frame: InputFrame, seconds: float) -> np.ndarray:
    player, xz = PlayerControl(), []
    for _ in range(round(seconds * 60)):
        controller.step(player.update(frame, 0.0, 1 / 60))
        xz.append(controller.root_xz_m[0].copy())
    return np.array(xz)


@pytest.mark.skipif(not MANN8.exists(), reason="no shipped MANN-8")
@pytest.mark.parametrize(
    "frame, asked_mps",
    [
        (InputFrame(move=(0.0, 1.0)), 1.1),  # W
        (InputFrame(move=(0.0, 1.0), boost=1.0), 3.3),  # Shift+W
        (InputFrame(move=(0.0, 0.6)), 1.1 * 0.45 / 0.85),  # the stick part-way
    ],
)
def test_shown_speed_is_the_asked_speed_within_ten_percent(frame, asked_mps):
    model = MotionModel(MANN8)
    controller = Controller(model, speed_calibration=load_speed_calibration(MANN8))
    xz = hold(controller, frame, 8.0)
    # Every 0.25 s once the HUD's 2 s window starts after a 2 s settle (issue 23's rule): the
    # dog overshoots while it gets going, so a window reaching back to 1 s read 1.21 m/s for
    # 1.1 asked on a Zen 4 EPYC (10.004% over; the CI machine passed it).
    settled = round(2.0 * 60) + SHOWN_SPEED_WINDOW_FRAMES - 1
    shown = [shown_speed_mps(xz[: end + 1]) for end in range(settled, len(xz), 15)]
    assert np.allclose(shown, asked_mps, rtol=0.1), np.round(np.array(shown) / asked_mps, 2)
    assert SHOWN_SPEED_WINDOW_FRAMES == 120


PFNN = MANN8.parent / "pfnn.onnx"


@pytest.mark.skipif(not (MANN8.exists() and PFNN.exists()), reason="no shipped networks")
@pytest.mark.parametrize("path", [MANN8, PFNN], ids=lambda p: p.name)
def test_default_tracking_holds_each_shipped_network_steady(path):
    """Without the card's curve (`Controller(model)`, what scripted dogs and the card's check
    use) the integral tracking alone: once settled, every 2 s window within 12% of the asked
    speed. At P 2 and I 2 (runtime/control.py) the PFNN surged between 0.5 and 2 m/s every 2 s
    asked 1.1 (windows 0.64x to 1.36x), and MANN-8 ran 1.28x asked 0.5 m/s 6-8 s in. At the
    gains shipped, MANN-8's walk at 0.5 m/s sniffs, stop-and-go with its head down, for 8 s;
    the gain wound up for it carries the 2 s as it lifts its head 1.11x fast."""
    from canis.evaluation.speed_tracking import measure

    for run in measure(path, "flat", asked_mps=(0.5, 1.1, 1.9), seconds=20.0):
        for start in run.window_mps:  # three starts (evaluation/speed_tracking.py)
            settled = np.array(start[2:]) / run.asked_mps  # the windows from 6 s on
            assert np.abs(settled - 1.0).max() < 0.12, (run.asked_mps, np.round(settled, 2))


@pytest.mark.skipif(not MANN8.exists(), reason="no shipped MANN-8")
def test_default_tracking_brings_mann8_into_a_canter_on_all_four_paws():
    """Asked the canter scenario's 2.57 m/s from a stand, MANN-8 settles into one of two
    canters depending on how the tracking gets it there: at P 0.75 one that drags its right
    front paw (0.43 cm/frame of skating, the others 0.02-0.15). No paw skates past 0.3."""
    from canis.export.closed_loop import Steering, record
    from canis.runtime.motion_metrics import foot_skating_cm

    controller = Controller(MotionModel(MANN8))
    run = record(controller, Steering(2.57), round(23 * 60))
    paws = run.positions_m[3 * 60 :, controller.skeleton.group("paws")]
    skating = foot_skating_cm(paws[..., [0, 2]], paws[..., 1]).mean(axis=0)
    assert skating.max() < 0.3, np.round(skating, 3)

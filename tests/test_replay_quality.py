"""evaluation/replay.py: a network driven with a clip's own commands, taken from where
the dog is, measured on the clip's own scenario frames."""

from types import SimpleNamespace

import numpy as np
import pytest
from canis.evaluation.replay import (
    SCENARIOS,
    SETTLE_FRAMES,
    ClipCommands,
    measured_frames,
    replay,
)
from canis.runtime.features import FUTURE_OFFSETS_FRAMES
from canis.runtime.root import yaw_from_direction


@pytest.fixture(scope="module")
def clip():
    from canis.training.clips import process_clip
    from synthetic_dog import concatenate, gait, to_motion

    # a trot whose root path bends (the body keeps facing +z), so a turned command differs
    # from the clip's; it starts away from the origin, where a dog not placed would stand
    roots, rotations, _ = gait("trot", 1.5, 4.0)
    angle = np.linspace(0.0, 1.2, len(roots))
    x, z = roots[:, 0].copy(), roots[:, 2].copy()
    roots[:, 0] = np.cos(angle) * x + np.sin(angle) * z + 3.0
    roots[:, 2] = np.cos(angle) * z - np.sin(angle) * x - 2.0
    return process_clip(to_motion(*concatenate((roots, rotations)), "trot"))


def test_at_the_clips_own_root_the_command_is_the_clips_own(clip):
    f = 90
    yaw = yaw_from_direction(clip.facing[[f]])
    dog = SimpleNamespace(root_xz_m=clip.root_positions_m[[f]][:, [0, 2]], root_yaw_rad=yaw)
    control = ClipCommands(clip, dog)(f)
    ahead = f + np.array(FUTURE_OFFSETS_FRAMES)
    np.testing.assert_allclose(control.future_xz_m[0], clip.root_positions_m[ahead][:, [0, 2]])
    # the mean speed over the next second, toward where the root is a second ahead
    chord = clip.root_positions_m[ahead[-1], [0, 2]] - clip.root_positions_m[f, [0, 2]]
    expected = clip.desired_speeds_mps[f] * chord / np.linalg.norm(chord)
    np.testing.assert_allclose(control.velocity_mps[0], expected)
    assert np.linalg.norm(expected) > 1.0  # the trot moves: the test can fail
    np.testing.assert_allclose(control.facing_yaw_rad, yaw_from_direction(clip.facing[[ahead[-1]]]))
    assert control.action.tolist() == [clip.labels.action_index[f]]


def test_a_dog_elsewhere_is_asked_for_the_clips_motion_from_where_it_is(clip):
    f, turn = 90, np.pi / 2
    yaw = yaw_from_direction(clip.facing[[f]])
    dog = SimpleNamespace(root_xz_m=np.array([[5.0, -3.0]]), root_yaw_rad=yaw + turn)
    control = ClipCommands(clip, dog)(f)
    ahead = f + np.array(FUTURE_OFFSETS_FRAMES)
    clip_path = clip.root_positions_m[ahead][:, [0, 2]] - clip.root_positions_m[f, [0, 2]]
    dog_path = control.future_xz_m[0] - dog.root_xz_m[0]
    # the same path, as long, turned a quarter turn (yaw 0 faces +z: x' = z, z' = -x)
    np.testing.assert_allclose(np.linalg.norm(dog_path, axis=1), np.linalg.norm(clip_path, axis=1))
    np.testing.assert_allclose(
        dog_path, np.stack([clip_path[:, 1], -clip_path[:, 0]], 1), atol=1e-9
    )
    assert np.abs(dog_path).max() > 0.5  # the clip moves: the test can fail
    np.testing.assert_allclose(
        control.facing_yaw_rad, yaw_from_direction(clip.facing[[ahead[-1]]]) + turn
    )


def test_parts_of_the_command_can_be_left_out(clip):
    from canis.runtime.features import ACTIONS

    f = 90
    yaw = yaw_from_direction(clip.facing[[f]])
    dog = SimpleNamespace(root_xz_m=clip.root_positions_m[[f]][:, [0, 2]], root_yaw_rad=yaw)
    whole = ClipCommands(clip, dog)(f)
    bare = ClipCommands(clip, dog, path=False, actions=False)(f)
    assert whole.future_xz_m is not None and bare.future_xz_m is None
    assert bare.action.tolist() == [ACTIONS.index("move")]
    np.testing.assert_allclose(bare.velocity_mps, whole.velocity_mps)


def test_frames_measured_leave_out_the_settling_and_the_cut_path(clip):
    frames = measured_frames(clip)
    everything = np.any(list(frames.values()), axis=0)
    assert everything.any()
    assert not everything[:SETTLE_FRAMES].any()
    assert not everything[clip.frame_count - max(FUTURE_OFFSETS_FRAMES) :].any()
    assert set(frames) == {"walk", "pace", "trot", "canter", "turn", "moving"}
    gaits = [frames[g] for g in ("walk", "pace", "trot", "canter", "turn")]
    assert (frames["moving"] >= np.logical_or.reduce(gaits)).all()  # every gait's frames


def test_a_replay_follows_the_clip(tiny_model, clip):
    from canis.runtime.inference import MotionModel

    run = replay(MotionModel(tiny_model, threads=1), clip)
    assert run.positions_m.shape[0] == clip.frame_count and run.finite
    hips = clip.skeleton.index("Hips")
    start = clip.root_positions_m[0, [0, 2]]
    assert np.linalg.norm(start) > 3.0  # a dog left at the origin would fail the next line
    assert np.linalg.norm(run.positions_m[0, hips, [0, 2]] - start) < 0.3  # placed at its start


def test_the_replay_measures_the_network_beside_the_mocap_and_names_missing_gaits(tiny_model, clip):
    from canis.evaluation.replay import evaluate_replay, markdown

    results = evaluate_replay({"tiny": tiny_model}, [clip])
    assert results["models"] == ["tiny"] and results["clips"] == [clip.name]
    # The bent synthetic trot is labelled one gait throughout: that gait, and moving.
    (measured,) = set(results["GT"]) - {"moving"}
    assert results["GT"]["moving"]["steps"] >= results["GT"][measured]["steps"]
    assert results["missing"] == [s for s in SCENARIOS if s not in (measured, "moving")]
    row, truth = results["tiny"][measured], results["GT"][measured]
    assert row["steps"] == truth["steps"] > 0  # the same frames
    assert row["speed_reached"] == pytest.approx(row["mean_speed_mps"] / truth["mean_speed_mps"])
    assert len(row["contact_share"]) == 4 and all(0 <= c <= 1 for c in row["contact_share"])
    low, mid, high = truth["pose_p10_p50_p90"]["paw_height_m"]
    assert low <= mid <= high
    text = markdown(results, "canis evaluate replay", "a CPU")
    assert f"No held-out frames of: {', '.join(results['missing'])}." in text
    assert f"| tiny | {measured} |" in text


def test_pose_measures_read_pitches_and_heights_off_the_skeleton(clip):
    from canis.evaluation.replay import pose_measures

    skeleton = clip.skeleton
    positions = np.zeros((1, skeleton.joint_count, 3))
    positions[0, skeleton.index("Head")] = [0, 1.0, 0]
    positions[0, skeleton.index("HeadSite")] = [0, 1.1, 0.1]  # the muzzle 45 deg up
    positions[0, skeleton.index("Tail1Site")] = [0, 0.3, -0.5]
    measures = pose_measures(skeleton, positions, np.array([0.1]))
    assert measures["head_pitch_deg"][0] == pytest.approx(45.0)
    assert measures["tail_height_m"][0] == pytest.approx(0.2)
    assert measures["paw_height_m"][0] == pytest.approx(-0.1)


def test_after_actions_read_the_pose_a_second_after(tiny_model, clip):
    from canis.evaluation.after_actions import after_actions, markdown
    from canis.runtime.inference import MotionModel

    rows = after_actions(MotionModel(tiny_model, threads=1), clip.skeleton)
    assert set(rows) == {"jump from a stand", "stop from a walk"}
    for row in rows.values():
        assert row["hips_share"] > 0 and row["root_speed_mps"] >= 0
        assert row["settled_speed_mps"] >= 0
        assert isinstance(row["passed"], bool)
    assert "| tiny | jump from a stand |" in markdown({"tiny": rows})


def test_a_dog_still_a_second_after_that_creeps_on_fails():
    """The root's speed is read at one moment and over the SETTLED_S after it: a dog that is
    still at the moment, in a lull, and then creeps at 0.13 m/s (as the int8 MANN-8 alone
    does after a stop) fails; one that stays still passes."""
    from canis.evaluation.after_actions import AFTER_S, SETTLED_S, after_row
    from canis.runtime.controller import DT_S

    frames = int(round((2.0 + AFTER_S + SETTLED_S) / DT_S)) + 8
    ended = int(round(1.0 / DT_S))
    heights = np.full(frames, 0.45)
    standing = slice(0, ended)
    still = np.full(frames, 0.02)
    row = after_row(heights, heights, still, standing, ended)
    assert row["passed"] and row["settled_speed_mps"] == pytest.approx(0.02)
    creeping = still.copy()
    creeping[ended + int(round(AFTER_S / DT_S)) + 4 :] = 0.13
    row = after_row(heights, heights, creeping, standing, ended)
    assert row["root_speed_mps"] < 0.05 and row["settled_speed_mps"] > 0.05
    assert not row["passed"]


def test_the_head_sweep_sets_the_network_beside_the_mocap_at_each_speed(tiny_model, clip):
    """evaluation/head_sweep.py: the synthetic trot moves at about 1.5 m/s, so the mocap has
    head pitches there and says "no frames" far from it instead of NaN; the network's median
    at every speed is the pitch of its shown Head -> HeadSite."""
    from canis.evaluation import head_sweep
    from canis.evaluation.replay import pose_measures
    from canis.runtime.inference import MotionModel

    truth = head_sweep.mocap_head_pitch([clip], speeds_mps=(0.3, 1.6))
    assert truth[0.3] is None
    low, mid, high = truth[1.6]
    labels = clip.labels
    near = (np.abs(labels.root_speed_mps - 1.6) <= head_sweep.BAND_MPS) & (labels.gait_index >= 0)
    pitch = pose_measures(clip.skeleton, clip.positions_m, labels.ground_m)["head_pitch_deg"]
    assert low <= mid <= high and mid == pytest.approx(np.median(pitch[near]))

    model = MotionModel(tiny_model, threads=1)
    sweep = {
        "mocap": truth,
        "tiny": head_sweep.network_head_pitch(model, clip.skeleton, (0.3, 1.6)),
    }
    assert all(-90 <= p <= 90 for p in sweep["tiny"].values())
    text = head_sweep.markdown(sweep)
    assert "| 0.3 | no frames |" in text and "| 1.6 | " in text


def test_evaluate_replay_says_when_no_clip_is_there(tmp_path, capsys):
    from canis.cli import main

    assert main(["evaluate", "replay", "--bvh", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err
    assert "no mocap folder at" in err and len(err.splitlines()) == 1

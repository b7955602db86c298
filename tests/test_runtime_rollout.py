"""Rollouts through the runtime for closed-loop fine-tuning (training/runtime_rollout.py): a
dog placed in the mocap's state sees the mocap's own x, the commands are the replay's, and a
fine-tune with --feedback runtime runs, resumes and refuses another feedback by name."""

import numpy as np
import pytest
from canis.runtime.controller import Controller
from canis.runtime.features import CURRENT_SAMPLE, INPUT
from canis.runtime.inference import MotionModel
from canis.training.clips import clip_commands
from canis.training.closed_loop_training import successors
from canis.training.dataset import load
from canis.training.runtime_rollout import (
    BACK_FRAMES,
    MocapRun,
    nearest_frames,
    roll_out,
    rollout_starts,
)

FRAMES = 6


@pytest.fixture(scope="module")
def mocap(tiny_dataset):
    data = load(tiny_dataset)
    after = successors(data["clip"], data["frame"])
    return data["X"], data["Y"], after, data["action"].astype(np.int64)


def test_a_placed_dog_first_sees_the_mocaps_own_input(mocap, tiny_model):
    """Its history, pose, current sample and action are the mocap's at the start frame, to
    float32 rounding: the root path integrated from the mocap's root updates is the one the
    dataset's trajectories were taken on. The future is the runtime's own (the clip's path
    blended with the mocap's future as the last prediction), so it is not compared."""
    x_raw, y_raw, after, action = mocap
    starts = rollout_starts(after, FRAMES)
    assert len(starts) > 10
    picked = starts[:: max(1, len(starts) // 8)]
    run = MocapRun.of(y_raw, after, picked, FRAMES)
    xs, rows, _ = roll_out(
        MotionModel(tiny_model), run, x_raw, action, FRAMES, np.ones(len(picked), bool)
    )
    assert rows[:, 0].tolist() == picked.tolist()
    assert (rows[:, 1:] == after[rows[:, :-1]]).all()  # each step's target: the next frame
    first, mocap_x = xs[:, 0], x_raw[picked]
    past = slice(0, CURRENT_SAMPLE + 1)
    trajectory = lambda x: INPUT.rows(x, "trajectory")  # noqa: E731
    moved = np.abs(trajectory(mocap_x)[:, :CURRENT_SAMPLE, :2]).max()
    assert moved > 0.05  # the dogs have a past to get wrong
    # Current velocity aside: the runtime's is the last frame's step, the dataset's smoother.
    same = [0, 1, 2, 3, 6, *range(7, 13)]
    np.testing.assert_allclose(
        trajectory(first)[:, past][..., same], trajectory(mocap_x)[:, past][..., same], atol=1e-4
    )
    np.testing.assert_allclose(
        trajectory(first)[:, :CURRENT_SAMPLE], trajectory(mocap_x)[:, :CURRENT_SAMPLE], atol=1e-4
    )
    joints = INPUT.block_slice("joints")
    np.testing.assert_allclose(first[:, joints], mocap_x[:, joints], atol=1e-5)
    # Later steps are the network's: its pose, not the mocap's.
    assert np.abs(xs[:, -1, joints] - x_raw[rows[:, -1]][:, joints]).max() > 1e-3


def test_matched_targets_are_the_clips_frames_nearest_the_dogs_pose(mocap, tiny_model):
    """A placed dog's first pose is its start frame's; a dog given the pose of the frame two
    ahead is matched to that frame; every match lies within the window of its step."""
    x_raw, y_raw, after, action = mocap
    picked = rollout_starts(after, FRAMES)[::7][:8]
    run = MocapRun.of(y_raw, after, picked, FRAMES)
    xs, rows, _ = roll_out(MotionModel(tiny_model), run, x_raw, action, FRAMES, False)
    x_std = load_std(mocap)
    joints = INPUT.block_slice("joints")
    ahead = run.rows[:, BACK_FRAMES + 3 + 2]
    xs[:, 3, joints] = x_raw[ahead][:, joints]
    matched = nearest_frames(xs, run, x_raw, x_std, window=4)
    assert matched[:, 0].tolist() == picked.tolist()
    assert matched[:, 3].tolist() == ahead.tolist()
    for k in range(FRAMES):
        window = run.rows[:, BACK_FRAMES + k - 4 : BACK_FRAMES + k + 5]
        assert all(m in w for m, w in zip(matched[:, k], window, strict=True))


def load_std(mocap):
    return mocap[0].std(axis=0) + 1e-3


def test_a_start_needs_its_history_and_the_path_ahead(mocap):
    _, y_raw, after, _ = mocap
    starts = rollout_starts(after, FRAMES)
    first_frames = np.flatnonzero(after >= 0)  # any row with a successor
    too_early = np.setdiff1d(first_frames, starts)[:1]
    with pytest.raises(ValueError, match="frames before it|past its clip's last frame"):
        MocapRun.of(y_raw, after, too_early, FRAMES)
    assert BACK_FRAMES == 51


def test_clip_commands_give_each_dog_its_own_clips_command():
    """N dogs in one call get what each would get alone; dogs without the path get NaN rows
    (the runtime then extrapolates from the speed, heading and facing)."""
    rng = np.random.default_rng(3)
    frames = 150
    root = np.cumsum(rng.normal(0, 0.02, (3, frames, 2)), axis=1)
    yaw = np.cumsum(rng.normal(0, 0.02, (3, frames)), axis=1)
    speed = rng.uniform(0.2, 2.0, (3, frames))
    action = rng.integers(0, 6, (3, frames))
    frame = np.array([10, 40, 149])
    dog_xz, dog_yaw = rng.normal(0, 3, (3, 2)), rng.normal(0, 1, 3)
    together = clip_commands(root, yaw, speed, action, frame, dog_xz, dog_yaw, [True, False, True])
    for i in range(3):
        one = [i]
        alone = clip_commands(
            root[one],
            yaw[one],
            speed[one],
            action[one],
            frame[one],
            dog_xz[one],
            dog_yaw[one],
            True,
        )
        np.testing.assert_allclose(together.velocity_mps[i], alone.velocity_mps[0])
        assert together.facing_yaw_rad[i] == alone.facing_yaw_rad[0]
        assert together.action[i] == alone.action[0] == action[i, min(frame[i], frames - 1)]
        if i == 1:
            assert np.isnan(together.future_xz_m[i]).all()
        else:
            np.testing.assert_allclose(together.future_xz_m[i], alone.future_xz_m[0])
    stick = clip_commands(root, yaw, speed, action, frame, dog_xz, dog_yaw, False)
    assert stick.future_xz_m is None


def test_place_refuses_a_state_of_another_dog_count(tiny_model):
    controller = Controller(MotionModel(tiny_model), count=2)
    before = controller.state.copy()
    other = Controller(MotionModel(tiny_model), count=3).state
    with pytest.raises(ValueError, match="do not fit"):
        controller.place(other)
    np.testing.assert_array_equal(controller.state.root_xz_m, before.root_xz_m)
    assert controller.predicted_future is None  # still the fresh controller's


def test_finetune_with_runtime_feedback_runs_and_resumes(tiny_dataset, tmp_path, capsys):
    from canis.training.train import LAST, train
    from conftest import tiny_config
    from test_closed_loop_training import finetune

    start = tmp_path / "one_step"
    train(tiny_config(tiny_dataset), start, progress=False)
    out = tmp_path / "run"
    runtime = ("--feedback", "runtime", "--rollout-dogs", "8")
    assert finetune(tiny_dataset, start / LAST, out, *runtime) == 0
    log = (out / "log.csv").read_text().splitlines()
    rows = [dict(zip(log[0].split(","), line.split(","), strict=True)) for line in log[1:]]
    assert len(rows) == 2 and all(float(r["rollout_seconds"]) > 0 for r in rows)
    assert (out / "rollout.onnx").is_file()
    from canis.cli import main  # the card's reproduce line names the feedback

    tuned = tmp_path / "tuned.onnx"
    export = ["export", str(out / LAST), "--out", str(tuned), "--dataset", str(tiny_dataset)]
    assert main([*export, "--card", "--card-seconds", "1"]) == 0
    card = tuned.with_suffix(".md").read_text()
    assert "--feedback runtime --rollout-dogs 8 --rollout-path-share 0.5 --precision" in card
    assert "feedback runtime (rollouts through the runtime" in card
    assert finetune(tiny_dataset, start / LAST, out, *runtime, "--resume") == 0
    capsys.readouterr()
    assert finetune(tiny_dataset, start / LAST, out, "--resume", "--rollout-dogs", "8") == 2
    assert "feedback 'runtime' (now 'pose')" in capsys.readouterr().err
    refused = tmp_path / "refused"
    assert finetune(tiny_dataset, start / LAST, refused, *runtime, "--own-frames", "0") == 2
    assert "--feedback runtime: needs --own-frames" in capsys.readouterr().err
    assert not refused.exists()


def test_leg_motion_on_rollouts_is_logged_and_named_in_the_card(tiny_dataset, tmp_path, capsys):
    """--leg-motion-on rollouts: the term is taken one step from the runtime's rollouts (the
    trajectory the dog's own), logged, and part of the configuration; without rollouts it is
    refused, naming the option."""
    from canis.training.train import LAST, train
    from conftest import tiny_config
    from test_closed_loop_training import finetune

    start = tmp_path / "one_step"
    train(tiny_config(tiny_dataset), start, progress=False)
    out = tmp_path / "run"
    legs = ("--leg-motion-weight", "0.5", "--leg-motion-on", "rollouts")
    both = ("--feedback", "both", "--rollout-dogs", "8")
    assert finetune(tiny_dataset, start / LAST, out, *both, *legs) == 0
    log = (out / "log.csv").read_text().splitlines()
    rows = [dict(zip(log[0].split(","), line.split(","), strict=True)) for line in log[1:]]
    assert all(float(r["leg_motion_term"]) > 0 for r in rows)
    from canis.cli import main

    tuned = tmp_path / "tuned.onnx"
    export = ["export", str(out / LAST), "--out", str(tuned), "--dataset", str(tiny_dataset)]
    assert main([*export, "--card", "--card-seconds", "1"]) == 0
    assert (
        "--leg-motion-weight 0.5 --leg-motion-on rollouts" in tuned.with_suffix(".md").read_text()
    )
    capsys.readouterr()
    refused = tmp_path / "refused"
    assert finetune(tiny_dataset, start / LAST, refused, *legs) == 2
    assert "--leg-motion-on rollouts: needs the runtime's rollouts" in capsys.readouterr().err
    assert not refused.exists()

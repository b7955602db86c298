"""The mocap's state as the runtime holds it (training/torch_runtime.py): a dog placed there
first sees the mocap's own input; a start needs its history and the path ahead."""

import numpy as np
import pytest
from canis.runtime.controller import Controller
from canis.runtime.features import CURRENT_SAMPLE, INPUT
from canis.runtime.inference import MotionModel
from canis.runtime.trajectory import ControlState
from canis.training.dataset import load
from canis.training.finetune_stretches import successors
from canis.training.torch_runtime import BACK_FRAMES, MocapRun, mocap_state, rollout_starts

FRAMES = 6


@pytest.fixture(scope="module")
def mocap(tiny_dataset):
    data = load(tiny_dataset)
    after = successors(data["clip"], data["frame"])
    return data["X"], data["Y"], after, data["action"].astype(np.int64)


def test_a_placed_dog_first_sees_the_mocaps_own_input(mocap, tiny_model):
    """Placed at the mocap's state (mocap_state, as the placed-stillness term places its dogs)
    and asked to go on as the clip did, its history, pose and current sample's place and
    direction are the mocap's at the start frame, to float32 rounding: the root path
    integrated from the mocap's root updates is the one the dataset's trajectories were taken
    on. The future is the runtime's own, so it is not compared."""
    x_raw, y_raw, after, action = mocap
    starts = rollout_starts(after, FRAMES)
    assert len(starts) > 10
    picked = starts[:: max(1, len(starts) // 8)]
    run = MocapRun.of(y_raw, after, picked, FRAMES)
    controller = Controller(MotionModel(tiny_model), count=len(picked), speed_tracking=False)
    state = mocap_state(controller.state, run, x_raw, None)
    controller.place(state)
    command = ControlState(
        state.root_velocity_xz_mps.copy(), state.root_yaw_rad.copy(), action[picked]
    )
    first, mocap_x = controller.step(command), x_raw[picked]
    controller.close()
    trajectory = lambda x: INPUT.rows(x, "trajectory")  # noqa: E731
    moved = np.abs(trajectory(mocap_x)[:, :CURRENT_SAMPLE, :2]).max()
    assert moved > 0.05  # the dogs have a past to get wrong
    np.testing.assert_allclose(
        trajectory(first)[:, :CURRENT_SAMPLE], trajectory(mocap_x)[:, :CURRENT_SAMPLE], atol=1e-4
    )
    np.testing.assert_allclose(
        trajectory(first)[:, CURRENT_SAMPLE, :4], trajectory(mocap_x)[:, CURRENT_SAMPLE, :4],
        atol=1e-4,
    )  # fmt: skip
    joints = INPUT.block_slice("joints")
    np.testing.assert_allclose(first[:, joints], mocap_x[:, joints], atol=1e-5)


def test_a_start_needs_its_history_and_the_path_ahead(mocap):
    _, y_raw, after, _ = mocap
    starts = rollout_starts(after, FRAMES)
    first_frames = np.flatnonzero(after >= 0)  # any row with a successor
    too_early = np.setdiff1d(first_frames, starts)[:1]
    with pytest.raises(ValueError, match="frames before it|past its clip's last frame"):
        MocapRun.of(y_raw, after, too_early, FRAMES)
    assert BACK_FRAMES == 51


def test_place_refuses_a_state_of_another_dog_count(tiny_model):
    controller = Controller(MotionModel(tiny_model), count=2)
    before = controller.state.copy()
    other = Controller(MotionModel(tiny_model), count=3).state
    with pytest.raises(ValueError, match="do not fit"):
        controller.place(other)
    np.testing.assert_array_equal(controller.state.root_xz_m, before.root_xz_m)
    assert controller.predicted_future is None  # still the fresh controller's

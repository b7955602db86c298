"""The controller stepping a (barely trained) exported model: mechanics, not motion quality."""

import numpy as np
import pytest

from runtime.closed_loop import drive
from runtime.controller import Controller
from runtime.inference import MotionModel
from runtime.trajectory import ControlState


@pytest.fixture(scope="module")
def model(tiny_model):
    return MotionModel(tiny_model)


def test_steps_stay_finite_and_keep_bone_lengths(model):
    controller = Controller(model, count=3)
    control = ControlState(
        np.array([[0, 1.0], [1.0, 0], [0, 0]]), np.array([0, 1.5, 0]), np.array([1, 1, 0])
    )
    for _ in range(30):
        x = controller.step(control)
    assert x.shape == (3, 480) and np.all(np.isfinite(x))
    positions, _ = controller.display_pose()
    bones = np.linalg.norm(
        positions[:, 1:] - positions[:, controller.skeleton.parents[1:]], axis=-1
    )
    assert np.allclose(bones, controller.skeleton.bone_lengths_m()[1:], atol=1e-5)
    assert controller.expert_weights.shape == (3, 4)


def test_characters_in_a_batch_do_not_affect_each_other(model):
    alone, batch = Controller(model, count=1), Controller(model, count=2)
    for _ in range(20):
        alone.step(ControlState.single((0.0, 1.0), 0.0, "move"))
        batch.step(
            ControlState(np.array([[0, 1.0], [2.0, 0]]), np.array([0.0, 1.0]), np.array([1, 1]))
        )
    assert np.allclose(alone.pose.positions_m[0], batch.pose.positions_m[0], atol=1e-4)


def test_non_finite_control_is_refused_and_the_state_kept(model):
    controller = Controller(model)
    controller.step(ControlState.single((0.0, 1.0), 0.0, "move"))
    before = controller.pose.positions_m.copy()
    with pytest.raises(ValueError, match="non-finite"):
        controller.step(ControlState.single((np.inf, 1.0), 0.0, "move"))
    assert np.array_equal(controller.pose.positions_m, before) and controller.frame == 1


def test_closed_loop_drive_reports(model):
    report = drive(model, speed_mps=1.1, turn_rate_radps=0.5, seconds=4.0)
    assert set(report) >= {"finite", "min_hips_height_m", "mean_speed_mps", "speed_error"}
    assert report["finite"]

"""The moving-course term: each moving dog's mean predicted turn against the asked turn plus what
closes its offset from the asked facing; the headings moving_inputs records are the runtime's,
and the predicted turn is the one the runtime applies to the root."""

import numpy as np
import pytest
import torch
from canis.runtime.features import OUTPUT
from canis.training.finetune_moving import (
    COURSE_ALLOWANCE_RADPS,
    COURSE_TAU_S,
    moving_course_loss,
    wrapped_rad,
)
from test_placed_speed import _reproduce_line

YAW_VELOCITY = OUTPUT.field(np.arange(OUTPUT.size), "root_update", "yaw_velocity")[0][0]


def _turning(radps: list[float]) -> torch.Tensor:
    y = torch.zeros(len(radps), OUTPUT.size)
    y[:, YAW_VELOCITY] = torch.as_tensor(radps)
    return y


def test_a_dog_pays_for_not_turning_toward_the_facing_it_was_asked():
    # Two dogs of two steps: the first asked straight ahead and on course, the second 20
    # degrees to the right of the facing asked (the offset +20 degrees: it should turn left).
    offset = np.radians(20.0)
    headings = np.array([[0.0, 0.0], [0.0, 0.0], [offset, 0.0], [offset, 0.0]])
    on_course = _turning([0.0, 0.0, offset / COURSE_TAU_S, offset / COURSE_TAU_S])
    assert moving_course_loss(on_course, headings, 2).item() == pytest.approx(0.0, abs=1e-9)
    # The second dog goes on straight: it misses the wanted turn by the offset over tau.
    straight = _turning([0.0] * 4)
    missed = offset / COURSE_TAU_S - COURSE_ALLOWANCE_RADPS
    assert moving_course_loss(straight, headings, 2).item() == pytest.approx(missed**2 / 2)
    # A stride's sway within the allowance is free; the mean over a dog's steps is what counts.
    sway = _turning([0.5 * COURSE_ALLOWANCE_RADPS, -0.5 * COURSE_ALLOWANCE_RADPS, 0.3, 0.4])
    assert moving_course_loss(sway, headings, 2).item() == pytest.approx(0.0, abs=1e-9)
    # A turning dog is left out (asked beyond what a cantering dog turns, held to it the dogs
    # turned with their legs still); the dogs asked straight ahead are what counts.
    turning = np.array([[0.0, 0.5], [0.0, 0.5]])
    assert moving_course_loss(_turning([0.0, 0.0]), turning, 1).item() == 0.0
    both = np.concatenate([turning, headings[2:]])
    alone = moving_course_loss(straight[2:], headings[2:], 1).item()
    assert moving_course_loss(_turning([0.0] * 4), both, 2).item() == pytest.approx(alone)
    y = straight.clone().requires_grad_()
    moving_course_loss(y, headings, 2).backward()
    assert y.grad[2:, YAW_VELOCITY].lt(0).all()  # descending it turns the second dog left
    assert wrapped_rad(np.array([2 * np.pi + 0.1, -np.pi - 0.1])) == pytest.approx(
        [0.1, np.pi - 0.1]
    )


def test_the_headings_are_the_runtimes_and_its_turn_the_predicted_one(tiny_model):
    """moving_inputs records each kept step's asked facing minus the root's yaw before it and
    the asked turn rate; one step of the runtime turns the root by the predicted yaw velocity
    over a frame (the sign the term's wanted rate assumes)."""
    from canis.runtime.controller import DT_S, Controller
    from canis.runtime.inference import MotionModel
    from canis.runtime.trajectory import ControlState
    from canis.training.placed_speed import MOVE, asked_commands, moving_inputs

    headings = np.zeros((3, 4, 2))
    moving_inputs(tiny_model, 3, np.random.default_rng(1), kept_frames=4, headings_out=headings)
    _, turn_radps, _ = asked_commands(3, np.random.default_rng(1))
    np.testing.assert_allclose(headings[..., 1], np.repeat(turn_radps[:, None], 4, 1))
    assert np.isfinite(headings).all() and np.abs(headings[..., 0]).max() > 0

    model = MotionModel(tiny_model, threads=1)
    controller = Controller(model, speed_tracking=False)
    control = ControlState(np.array([[0.0, 1.0]]), np.array([0.4]), np.array([MOVE]))
    for _ in range(5):
        before = controller.root_yaw_rad.copy()
        controller.step(control)
        y = controller._buffers.outputs["y"]
        turned = wrapped_rad(controller.root_yaw_rad - before)
        np.testing.assert_allclose(turned, y[:, YAW_VELOCITY] * DT_S, atol=1e-5)


def test_the_moving_course_weight_is_checked_and_named():
    from canis.training.finetune_config import ClosedLoopConfig

    loop = ClosedLoopConfig(moving_course_weight=2.0)
    assert loop.moves_dogs() and loop.identity()["moving_course_weight"] == 2.0
    assert "--moving-course-weight 2" in _reproduce_line(loop)
    assert "--moving-course-weight" not in _reproduce_line(ClosedLoopConfig())

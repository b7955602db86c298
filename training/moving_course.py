"""The moving-course term (issue 17): the runtime's moving dogs turn toward the facing they are
asked, so that a dog asked straight ahead goes straight ahead.

The moving dogs' other terms hold their speed, legs and paws to the mocap's and say nothing of
where the dog goes. The runs that met those bars veered: asked straight ahead, (G7) of
2026-11-29 walked 10 degrees off the asked direction at 0.5 m/s and cantered 20 off at 3.3
(its body yawed 22 degrees off the facing asked), where the network shipped then stayed within
1 (docs/EVALUATION.md, the gait table's course). In the game the trajectory's future
directions bend toward the asked facing over its second ahead; such a network settles where
its own lean balances that pull.

So for each moving dog's kept steps (placed_speed.MovingDogs with headings): the facing it was
asked and the root's yaw before the step (their difference, the offset, in radians) and the
turn rate asked. The root should turn at the asked rate plus what closes the offset over the
trajectory's second ahead (COURSE_TAU_S, as the mocap's dogs reach the trajectory's facing in
it). The term is each dog's mean predicted yaw rate over its steps against the mean of that
wanted rate, beyond COURSE_ALLOWANCE_RADPS (a stride's own sway is left free), squared: the
mean over the dogs asked straight ahead. The turning dogs are left out: they are asked up to
--moving-max-turn-degps at any speed, beyond what a cantering dog turns, and held to it the
first runs turned in the controllers evaluation's turn with their legs nearly still (leg
stiffness 0.37x the mocap's where it had been 0.90x: (C1), docs/EVALUATION.md).
"""

from __future__ import annotations

import numpy as np
import torch
from canis.runtime.features import FPS
from canis.training.finetune_losses import yaw_step_rad

COURSE_TAU_S = 1.0  # the trajectory's future reaches 1 s ahead
COURSE_ALLOWANCE_RADPS = np.radians(3.0)


def wrapped_rad(angle_rad: np.ndarray) -> np.ndarray:
    """Angles wrapped to [-pi, pi)."""
    return (angle_rad + np.pi) % (2 * np.pi) - np.pi


def moving_course_loss(y_raw: torch.Tensor, headings: np.ndarray, dogs: int) -> torch.Tensor:
    """y_raw (dogs * frames, ...) grouped by dog, headings (dogs * frames, 2) each step's
    (offset of the asked facing from the root's yaw, rad; asked turn rate, rad/s), as
    moving_inputs records them: the mean over the dogs asked straight ahead of the squared
    excess of |mean predicted yaw rate - mean wanted rate| over COURSE_ALLOWANCE_RADPS (rad/s);
    0 where none is."""
    straight = torch.as_tensor((headings[:, 1].reshape(dogs, -1) == 0).all(1))
    if not straight.any():
        return y_raw.new_zeros(())
    predicted_radps = (yaw_step_rad(y_raw) * FPS).reshape(dogs, -1).mean(1)
    wanted = headings[:, 1] + wrapped_rad(headings[:, 0]) / COURSE_TAU_S
    wanted_radps = torch.as_tensor(wanted.reshape(dogs, -1).mean(1), dtype=y_raw.dtype)
    beyond = (predicted_radps - wanted_radps).abs() - COURSE_ALLOWANCE_RADPS
    return beyond.clamp(min=0)[straight].square().mean()

"""The stopping-pops term (issue 17): the runtime's own dogs, asked a speed and then to stop, with
no shown joint moving faster in a frame than the mocap's do at the speed the dog is going.

The moving dogs' terms (training/placed_speed.py, finetune_moving.py) unroll
dogs asked a steady speed. The runs that met their skating and leg bars flipped a joint when
the dog stopped, which no dog of theirs was asked to do: (WS8)'s left upper arm, stopping from
a trot, turned over in one frame (its elbow 27.7 cm; the trot's own fastest joint 11.4) where
the network's forward axis for it shrank to a tenth of its length (docs/RESULTS.md, the
twenty-first session; evaluation/jumps_and_stops.py measures it).

So each epoch, beside the moving dogs, the network exported from the current weights drives
`--placed-dogs` stopping dogs through the runtime (placed_speed.moving_inputs with stops):
each asked its speed as a moving dog, then, early in its kept steps, asked to stop the way a
player letting go asks (posture_requests.slow_down_left: the asked speed falling to zero over
SLOW_DOWN_S, then idle). The term unrolls their kept steps as the moving
dogs' terms do (the pose fed back with its gradient) and counts each shown joint's move in the
frame (training/shown_pose.py, in the world as the evaluation measures it) beyond
ALLOWED_OVER_MOCAP times the mocap's JOINT_STEP_PERCENTILE-th percentile for that joint at the
dog's predicted speed, squared.
"""

from __future__ import annotations

import numpy as np
import torch
from canis.runtime.features import FPS, JOINT_COUNT
from canis.training.finetune_losses import world_velocity_mps
from canis.training.finetune_moving import by_speed, reference_at
from canis.training.placed_speed import MovingDogs, moving_inputs, root_speed_mps
from canis.training.shown_pose import shown_step_m

JOINT_STEP_PERCENTILE = 99.0
# A joint pays for its move beyond this many times the mocap's: a stride's own fastest frames
# pass the mocap's percentile by a quarter or so in the shipped network (a hand 9.7 cm in a
# frame at 1.1 m/s against the mocap's 7.7), which the term is not for; a flip moves a joint
# 3-9 times it (an elbow 27.7 cm against 3-7).
ALLOWED_OVER_MOCAP = 1.5
STOP_WITHIN_FRAMES = 30  # the stop is asked within the first half second of the kept steps
# A step's stopping dogs: pops are rare (19 of (WS8)'s 7680 stopping steps move a joint 5 cm
# beyond what the term allows, 4 of the shipped network's; int8, one step each), so a step
# takes four times the moving dogs' 8 to see about one.
DOGS_PER_STEP = 32
CHUNK_ROWS = 8192  # the mocap's rows at a time through the shown pose (memory, not results)


def joint_steps_cm(x_raw: torch.Tensor, y_raw: torch.Tensor) -> torch.Tensor:
    """(B, J) how far each shown joint moves in the world over the step from x to y (cm)."""
    before, after = shown_step_m(x_raw, y_raw, range(JOINT_COUNT))
    velocity_mps = world_velocity_mps(before, after, y_raw)
    return velocity_mps.square().sum(-1).clamp(min=1e-12).sqrt() * (100.0 / FPS)


def joint_steps_by_speed(
    x_raw: torch.Tensor, y_raw: torch.Tensor, action: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The mocap's reference from its rows: (speed bin centres m/s (S,), (S, J) each joint's
    JOINT_STEP_PERCENTILE-th percentile step in cm over the frames asked to move)."""
    with torch.no_grad():
        steps = [
            joint_steps_cm(x_raw[start : start + CHUNK_ROWS], y_raw[start : start + CHUNK_ROWS])
            for start in range(0, len(x_raw), CHUNK_ROWS)
        ]
    values = torch.cat(steps).numpy()
    return by_speed(
        values,
        y_raw,
        action,
        "--stopping-pops-weight",
        "the joints' fastest steps",
        JOINT_STEP_PERCENTILE,
    )


def stopping_pops_loss(
    x_raw: torch.Tensor, y_raw: torch.Tensor, reference: tuple[np.ndarray, np.ndarray]
) -> torch.Tensor:
    """The mean over steps and joints of each joint's step beyond ALLOWED_OVER_MOCAP times the
    mocap's (cm) at the step's predicted root speed (joint_steps_by_speed's reference, linear
    between its bins and its end bins' beyond them), squared."""
    centres_mps, steps_cm = reference
    with torch.no_grad():
        speed_mps = root_speed_mps(y_raw).numpy()
    allowed = ALLOWED_OVER_MOCAP * reference_at(centres_mps, steps_cm, speed_mps)
    beyond = joint_steps_cm(x_raw, y_raw) - torch.as_tensor(allowed, dtype=y_raw.dtype)
    return beyond.clamp(min=0).square().mean()


class StoppingDogs(MovingDogs):
    """Each epoch's stopping dogs (moving dogs asked to stop early in their kept steps) and the
    stopping-pops term over a batch of their unrolled steps."""

    def __init__(self, model, saved, data, standard, run_dir, dogs, reference, unroll: int):
        super().__init__(model, saved, data, standard, run_dir, dogs, unroll=unroll)
        self.path = self.path.with_name("stopping.onnx")
        self.reference = reference  # joint_steps_by_speed's

    def _driven(self, generator: np.random.Generator):
        stop_from = generator.integers(0, STOP_WITHIN_FRAMES, self.dogs)
        return moving_inputs(
            self.path, self.dogs, generator, stop_from_frames=stop_from, phases_out=self.phases
        )

    def loss(self, predict, dogs: int, generator: np.random.Generator) -> torch.Tensor:
        """The stopping-pops term over `dogs` dogs drawn from this epoch's."""
        _, x_raw, y_raw, _ = self._drawn_steps(predict, dogs, generator)
        return stopping_pops_loss(x_raw, y_raw, self.reference)

"""The placed-stillness term: the runtime's own standing dog, asked nothing, kept still.

Fine-tuning on the mocap's stretches alone can leave the demo's placed dog stirring (its head
and front legs up to 1.8 cm a frame with no key held), and a stillness term on the stretches'
standing rows does not stop it: those rows' trajectories are the mocap's, and there the
network already stands still. The stirring shows where the game puts the dog: standing in the
standing keyframe (Controller.reset, the demo's R) or come to rest, its past and future built
by the runtime from a command of nothing.

So each epoch the network exported from the current weights drives such dogs through the
runtime (no second implementation of the contract: the Controller builds every input): a
share placed by Controller.reset in the standing keyframe, the others in the mocap's state at
a standing frame (torch_runtime.mocap_state), all asked to stand where they are (velocity 0,
their own facing, action idle) for `frames` steps. The term is then one step from those
inputs, the network run without dropout as in the game: each rotating joint's turn beyond
JOINT_ALLOWANCE_DEG a frame, squared and averaged over the joints, plus the root's step beyond
ROOT_ALLOWANCE_MM a frame, squared. Mocap dogs at rest shift their weight, so a little motion
is free; the demo's standing test allows no joint more than 1 cm a frame. The root counts on
its own since a slow slide is what undoes a standing dog in the demo: the foot lock holds its
paws until the network has carried them 12 cm (runtime/kinematics.py), then lets them go, and
the dog seems to shuffle. Measured on 64 placed dogs (Intel Xeon family 6 model 207): the
shipped MANN-8's keyframe dog slides 0.44 mm/frame (5 cm in 2 s), a network whose demo dog
shuffled 0.71, and one whose head stirred 1.46 with joints turning up to 5.1 deg/frame (the
shipped one's 2.5); mocap dogs standing idle turn their joints 0.52
deg/frame and move their root 1.0 mm/frame at the median.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from canis.runtime.features import ACTIONS, FPS
from canis.runtime.trajectory import ControlState
from canis.training.finetune_losses import ROTATING_ROWS, leg_turn_deg
from canis.training.moving_skating import root_speed_mps

# A placed dog's motion that costs nothing, per frame: each joint's turn (about the mocap's
# idle median, 0.52) and the root's step (1.2 cm/s: 10 s before the foot lock, which lets go
# at 12 cm, lets a paw go).
JOINT_ALLOWANCE_DEG = 0.5
ROOT_ALLOWANCE_MM = 0.2
PLACED_FRAMES = 180  # the demo's standing test watches the first 3 s after R
KEYFRAME_SHARE = 0.25  # of the placed dogs: the rest start from mocap standing frames
IDLE = ACTIONS.index("idle")


def placed_stillness_loss(x_raw: torch.Tensor, y_raw: torch.Tensor) -> torch.Tensor:
    """Mean over the rows of the squared excess of each rotating joint's turn over
    JOINT_ALLOWANCE_DEG (deg/frame, averaged over the joints) plus that of the root's step over
    ROOT_ALLOWANCE_MM (mm/frame): zero for a dog that stirs no more than that."""
    if len(x_raw) == 0:
        return x_raw.new_zeros(())
    turn_deg = leg_turn_deg(x_raw, y_raw, ROTATING_ROWS)
    step_mm = root_speed_mps(y_raw) * 1000.0 / FPS
    joints = (turn_deg - JOINT_ALLOWANCE_DEG).clamp(min=0).square().mean(1)
    root = (step_mm - ROOT_ALLOWANCE_MM).clamp(min=0).square()
    return (joints + root).mean()


def standing_starts(after: np.ndarray, action_index: np.ndarray, gait: np.ndarray, left_out=None):
    """Rows a mocap dog stands idle in (action idle, off locomotion) with the history behind
    them that runtime_rollout.mocap_state reads, but those `left_out` (StretchData's)."""
    from canis.runtime.readouts import NO_GAIT
    from canis.training.torch_runtime import rollout_starts

    starts = rollout_starts(after, 0)
    standing = (action_index[starts] == IDLE) & (gait[starts] == NO_GAIT)
    if left_out is not None:
        standing &= ~left_out[starts]
    return starts[standing]


def placed_inputs(
    model_path: Path,
    x_raw: np.ndarray,
    y_raw: np.ndarray,
    after: np.ndarray,
    starts: np.ndarray,
    dogs: int,
    frames: int,
    generator: np.random.Generator,
    phase_rad: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """x (dogs, frames, 480) as the Controller built it for `dogs` dogs asked to stand where
    they are: KEYFRAME_SHARE of them placed in the standing keyframe (all alike: the demo's
    R), the others at mocap standing rows drawn from `starts` (and, for PFNN, at the mocap's
    phase there, `phase_rad` (rows,)); and the phase (dogs, frames) each step fed the network
    (PFNN's; zeros for the others)."""
    from canis.runtime.controller import Controller
    from canis.runtime.inference import MotionModel
    from canis.training.torch_runtime import MocapRun, mocap_state

    model = MotionModel(model_path, threads=1)
    from_keyframe = max(1, round(dogs * KEYFRAME_SHARE))
    from_mocap = dogs - from_keyframe
    # The network alone: no speed tracking, and its own drift not held (runtime/pose.py).
    alone = {"speed_tracking": False, "stand_hold": False}
    controllers = [Controller(model, count=from_keyframe, **alone)]
    if from_mocap > 0:
        controller = Controller(model, count=from_mocap, **alone)
        run = MocapRun.of(y_raw, after, generator.choice(starts, from_mocap), 0)
        controller.place(mocap_state(controller.state, run, x_raw, phase_rad))
        controllers.append(controller)
    parts, phases = [], []
    for controller in controllers:
        count = controller.count
        xs = np.empty((count, frames, x_raw.shape[1]), np.float32)
        fed_rad = np.zeros((count, frames))
        for k in range(frames):
            fed_rad[:, k] = controller.state.phase_rad
            stand = ControlState(
                np.zeros((count, 2)),
                controller.root_yaw_rad.copy(),
                np.full(count, IDLE),
            )
            xs[:, k] = controller.step(stand)
        controller.close()
        parts.append(xs)
        phases.append(fed_rad)
    return np.concatenate(parts), np.concatenate(phases)


class PlacedDogs:
    """Each epoch's placed dogs (placed_inputs, by the network exported from the weights the
    epoch starts from) and the term over a batch of their steps."""

    def __init__(self, model, saved: dict, data, split, standard, run_dir, dogs: int):
        self.model, self.saved, self.data, self.standard = model, saved, data, standard
        self.path = Path(run_dir) / "placed.onnx"
        self.x_raw = standard.x_raw(split.x).numpy()
        self.y_raw = standard.y_raw(split.y).numpy()
        self.after = split.after
        self.phase_rad = split.phase.numpy() if saved["kind"] == "pfnn" else None
        self.starts = standing_starts(split.after, split.action, split.gait, split.left_out)
        if len(self.starts) == 0:
            raise ValueError(
                "--placed-stillness-weight: the training clips have no standing frames "
                "(action idle, off locomotion) to place dogs at"
            )
        self.dogs = dogs

    def refresh(self, generator: np.random.Generator) -> float:
        """New placed dogs; returns the seconds they took (the export included)."""
        import time

        from canis.training.onnx_graph import ExportedModel, write_wrapped

        started = time.perf_counter()
        write_wrapped(ExportedModel(self.model, self.data.normalisation), self.saved, self.path)
        xs, phases = placed_inputs(
            self.path, self.x_raw, self.y_raw, self.after, self.starts, self.dogs,
            PLACED_FRAMES, generator, self.phase_rad,
        )  # fmt: skip
        self.xs, self.phases = xs.reshape(-1, self.x_raw.shape[1]), phases.reshape(-1)
        return time.perf_counter() - started

    def loss(self, predict, rows: int, generator: np.random.Generator) -> torch.Tensor:
        """placed_stillness_loss over `rows` steps drawn from the placed dogs, the network run
        without dropout (as the game runs it: under dropout every predicted step jitters)."""
        picked = generator.choice(len(self.xs), rows)
        x = self.standard.x_standard(self.xs[picked])
        self.model.eval()
        try:
            prediction = predict(x, torch.as_tensor(self.phases[picked]).float())
        finally:
            self.model.train()
        return placed_stillness_loss(self.standard.x_raw(x), self.standard.y_raw(prediction))

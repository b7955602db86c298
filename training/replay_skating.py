"""The replay-skating term (issue 17): the runtime's own dogs, driven by the clips' own commands,
skate no more than the mocap did on the same frames.

The skating term on the training stretches (contact_loss.skating_excess_loss, the sixth
session's (K1)) taught the network to stop skating there, and what it learnt did not carry to
the runtime's dogs: there the trajectory is the dog's own past and a blend of the command with
the network's last prediction, never the mocap's (docs/EVALUATION.md). And since the eleventh
session's leg-motion and placed-stillness terms the shipped MANN-8, replayed with the mocap's
own commands (evaluation/replay.py), skates more than the network before them, its front
paws 2-3.5x (the thirteenth session).

So each epoch, as the placed terms' dogs, the network exported from the current weights drives
dogs through the runtime: each placed in the mocap's state at a training frame and driven by its
clip's own commands for REPLAY_FRAMES steps (runtime_rollout.rollout_pairs, as `--feedback
runtime`'s rollouts: starts, stops, turns and gait changes as the clips have them; half of them
given the clip's path, the others steered as from a stick). The term is one step from a few of
each dog's inputs, the network run without dropout as in the game: each dog's mean foot skating
over them beyond the mocap's own over the same frames of its clip: the evaluation's measure
(contact_loss.skating_cm) of the paws as the runtime draws them, from the predicted axes
(training/shown_pose.py), which is what the evaluation measures. (The first runs, at commit
9036c34, measured the predicted paw positions instead: the term fell from 0.06 to 0.008
cm/frame and the driven dogs' shown paws skated as much as before, or more in the turn. The
next, on the shown paws alone, brought the steady scenarios' skating to 0.000-0.014 by
carrying every paw above the measure's 2.5 cm: 2-7% of the paw-steps under it against the
shipped network's 21-50% and the mocap's 32-63%. So the term now has a second part:
each paw's lowest height over the dog's steps beyond its clip's lowest over the same frames.)
A dog that skates less than its clip, or stands lower, costs nothing, and one dog's margin
does not pay for another's excess.

Measured, not shipped (docs/EVALUATION.md, the fourteenth session): with both parts the paws
come down (as many as the mocap's) and slide, more than the shipped network's in every
scenario, on steady commands and on the clips' own.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch
from canis.runtime.features import PAW_ROWS
from canis.training.moving_skating import shown_skating_and_height_cm
from canis.training.runtime_rollout import (
    BACK_FRAMES,
    chain_length,
    rollout_pairs,
    rollout_starts,
)
from canis.training.shown_pose import shown_step_m

REPLAY_FRAMES = 120  # 2 s of each clip's own commands from the mocap's state
# The first steps after placing are still the mocap's own distribution (the history and the
# pose are the clip's); the term takes the later ones, where the dog runs on its own.
SKIPPED_FRAMES = 30
FRAMES_PER_DOG = 16  # each dog's steps a batch takes, at random points of its stride
DOGS_PER_STEP = 8  # a batch's dogs: 128 steps, as the placed-speed term's
PATH_SHARE = 0.5  # of the dogs given the clip's path ahead (runtime_rollout.rollout_pairs)


def replay_skating_loss(
    x_raw: torch.Tensor,
    y_raw: torch.Tensor,
    x_mocap_raw: torch.Tensor,
    y_mocap_raw: torch.Tensor,
    dogs: int,
) -> torch.Tensor:
    """Rows (dogs * frames) grouped by dog: the mean over the dogs of each dog's mean skating
    of the shown paws (cm/frame, over its rows and paws) beyond the mocap's own over the same
    rows' frames, plus each paw's lowest height over the dog's rows beyond the mocap's lowest
    there (cm, averaged over the paws): a dog that stops skating by carrying its paws above the
    skating measure's 2.5 cm pays for the height instead."""
    if dogs == 0:
        return y_raw.new_zeros(())
    skating, height = (v.reshape(dogs, -1, 4) for v in shown_skating_and_height_cm(x_raw, y_raw))
    with torch.no_grad():
        mocap = shown_skating_and_height_cm(x_mocap_raw, y_mocap_raw)
        mocap_skating, mocap_height = (v.reshape(dogs, -1, 4) for v in mocap)
    skating_excess = (skating.mean((1, 2)) - mocap_skating.mean((1, 2))).clamp(min=0)
    lowest_excess = (height.amin(1) - mocap_height.amin(1)).clamp(min=0).mean(1)
    return (skating_excess + lowest_excess).mean()


class ReplayDogs:
    """Each epoch's replaying dogs (by the network exported from the weights the epoch starts
    from) and the term over a batch of their steps."""

    def __init__(self, model, saved: dict, data, split, standard, run_dir, dogs: int):
        self.model, self.saved, self.data, self.standard = model, saved, data, standard
        self.split = split
        self.path = Path(run_dir) / "replay.onnx"
        self.x_raw = standard.x_raw(split.x).numpy()
        self.y_raw = standard.y_raw(split.y).numpy()
        self.dogs = dogs
        self.frames = REPLAY_FRAMES  # read here, so that a test can shorten it
        if len(rollout_starts(split.after, self.frames)) == 0:
            raise ValueError(
                f"--replay-skating-weight: no training clip is long enough to replay "
                f"{self.frames} frames from (each needs {chain_length(self.frames)} frames: "
                f"{BACK_FRAMES} of history before the start and the path ahead after it)"
            )

    def refresh(self, generator: np.random.Generator) -> float:
        """New replaying dogs; returns the seconds they took (the export included)."""
        from canis.export.onnx_export import ExportedModel, write_wrapped

        started = time.perf_counter()
        write_wrapped(ExportedModel(self.model, self.data.normalisation), self.saved, self.path)
        # PFNN's dogs start at the mocap's phase and go on at the runtime's (its own).
        phase = self.split.phase.numpy() if self.saved["kind"] == "pfnn" else None
        self.xs, self.rows, self.phases = rollout_pairs(
            self.path, self.x_raw, self.y_raw, self.split.after, self.split.action, phase,
            self.dogs, self.frames, PATH_SHARE, generator,
        )  # fmt: skip
        return time.perf_counter() - started

    def loss(self, predict, dogs: int, generator: np.random.Generator) -> torch.Tensor:
        """replay_skating_loss over `dogs` dogs drawn from this epoch's, FRAMES_PER_DOG of each
        one's steps after SKIPPED_FRAMES, the network run without dropout (as the game runs
        it)."""
        chosen = generator.choice(len(self.xs), dogs)
        frames = generator.integers(SKIPPED_FRAMES, self.xs.shape[1], (dogs, FRAMES_PER_DOG))
        x_raw = self.xs[chosen[:, None], frames].reshape(-1, self.xs.shape[2])
        rows = self.rows[chosen[:, None], frames].reshape(-1)
        self.model.eval()
        try:
            phase_rad = torch.as_tensor(self.phases[chosen[:, None], frames].reshape(-1))
            prediction = predict(self.standard.x_standard(x_raw), phase_rad)
        finally:
            self.model.train()
        mocap_x = torch.as_tensor(self.x_raw[rows])
        mocap_y = torch.as_tensor(self.y_raw[rows])
        return replay_skating_loss(
            torch.as_tensor(x_raw), self.standard.y_raw(prediction), mocap_x, mocap_y, dogs
        )


def measure(models: list[Path], dataset: Path, dogs: int = 64, seed: int = 0) -> dict:
    """{model: {"predicted", "drawn", "mocap", "paws_down", "mocap_paws_down"}}: the replaying
    dogs' mean skating (cm/frame) of the predicted and the drawn paws over their steps after
    SKIPPED_FRAMES, the mocap's over the same frames, and the share of drawn paws under 2.5 cm,
    the dogs' and the mocap's; each model's dogs drawn alike (`seed`)."""
    from canis.runtime.features import OUTPUT
    from canis.runtime.inference import MotionModel
    from canis.runtime.motion_metrics import SKATING_HEIGHT_CM
    from canis.training.closed_loop_training import Standardiser, StretchData
    from canis.training.contact_loss import skating_cm
    from canis.training.train import TrainingData

    data = TrainingData(str(dataset), "mann", torch.device("cpu"))
    split = StretchData(str(dataset), data, validation=False)
    standard = Standardiser(data.normalisation, OUTPUT.size)
    x_raw, y_raw = standard.x_raw(split.x).numpy(), standard.y_raw(split.y).numpy()
    figures = {}
    for path in models:
        generator = np.random.default_rng(seed)
        xs, rows, _ = rollout_pairs(
            path, x_raw, y_raw, split.after, split.action, None, dogs, REPLAY_FRAMES,
            PATH_SHARE, generator,
        )  # fmt: skip
        x = xs[:, SKIPPED_FRAMES:].reshape(-1, xs.shape[2])
        kept = rows[:, SKIPPED_FRAMES:].reshape(-1)
        model = MotionModel(path, threads=1)
        y = np.concatenate([model.run(x[i : i + 512])["y"] for i in range(0, len(x), 512)])
        x_t, y_t = torch.as_tensor(x), torch.as_tensor(y)
        mocap = torch.as_tensor(x_raw[kept]), torch.as_tensor(y_raw[kept])
        heights_cm = shown_step_m(x_t, y_t, PAW_ROWS)[1][..., 1] * 100.0
        mocap_heights_cm = shown_step_m(*mocap, PAW_ROWS)[1][..., 1] * 100.0
        figures[str(path)] = {
            "predicted": skating_cm(x_t, y_t).mean().item(),
            "drawn": skating_cm(x_t, y_t, drawn=True).mean().item(),
            "mocap": skating_cm(*mocap, drawn=True).mean().item(),
            "paws_down": (heights_cm < SKATING_HEIGHT_CM).float().mean().item(),
            "mocap_paws_down": (mocap_heights_cm < SKATING_HEIGHT_CM).float().mean().item(),
        }
    return figures


def main(argv=None) -> None:
    """python -m canis.training.replay_skating MODEL.onnx ... [--dataset D]: each model's
    replaying dogs (the term's, 64 of them, seed 0) measured as the term sees them."""
    import argparse
    import json

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("models", nargs="+", type=Path)
    parser.add_argument("--dataset", type=Path, default=Path("data/dog_dataset.npz"))
    args = parser.parse_args(argv)
    print(json.dumps(measure(args.models, args.dataset), indent=1))


if __name__ == "__main__":
    main()

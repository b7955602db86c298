"""The stretches closed-loop fine-tuning (training/finetune.py) trains on, and their loss
(acRNN-style, auto-conditioned: issue 17 item 1).

One-step training only ever shows the network mocap inputs; in the game it reads its own
outputs. Here each sample is a stretch of consecutive frames of one clip: the first
`ground_truth_frames` inputs are the mocap's, the following `own_frames` are rebuilt from the
network's own predictions, and the loss is summed over every frame. A curriculum grows the
own-output stretch from 1 frame to its maximum over the first epochs (acRNN's schedule).

The next input is rebuilt exactly as the runtime rebuilds it: the pose block from the
prediction through runtime/pose_update.next_local_pose and features.write_joints (the one
definition of both), then clamped to the training range as the exported graph clamps it. It
is built in numpy, without gradient through the feedback (acRNN's own scheme feeds back
values, not gradients). The trajectory block stays the mocap's: in the game it is built from
the player's command and the network's predicted future; here the command side is the clip's.
tests/test_finetune.py checks next_input against Controller.step's own x.
"""

from __future__ import annotations

import numpy as np
import torch
from canis.runtime.features import (
    ACTIONS,
    FPS,
    INPUT,
    LocalPose,
    decode_output,
    write_joints,
)
from canis.runtime.pose import next_local_pose
from canis.training.finetune_config import ClosedLoopConfig
from canis.training.finetune_losses import contact_loss
from torch import nn

JOINT_FIELDS = ("position", "forward", "up", "velocity")


def local_pose_of(x_raw: np.ndarray) -> LocalPose:
    """The pose x carries (root frame), read through the contract."""
    return LocalPose(
        *(INPUT.field(x_raw, "joints", field).astype(np.float64) for field in JOINT_FIELDS)
    )


def next_input(x_raw: np.ndarray, y_raw: np.ndarray, x_next_mocap_raw: np.ndarray) -> np.ndarray:
    """x of the next frame, unstandardised (B, 480): the mocap's trajectory block and the pose
    the runtime keeps after predicting y_raw from x_raw."""
    pose = next_local_pose(local_pose_of(x_raw), decode_output(y_raw.astype(np.float64)), 1 / FPS)
    x_next = np.array(x_next_mocap_raw, dtype=np.float32)
    write_joints(INPUT, x_next, pose)
    return x_next


def successors(clip: np.ndarray, frame: np.ndarray) -> np.ndarray:
    """For every row, the row of the same clip's next frame, or -1."""
    key = {(int(c), int(f)): i for i, (c, f) in enumerate(zip(clip, frame, strict=True))}
    return np.array([key.get((int(c), int(f) + 1), -1) for c, f in zip(clip, frame, strict=True)])


def stretch_starts(after: np.ndarray, length: int) -> np.ndarray:
    """Rows from which `length` consecutive frames exist (the start and length-1 successors)."""
    ok = np.ones(len(after), dtype=bool)
    current = np.arange(len(after))
    for _ in range(length - 1):
        ok &= current >= 0
        current = np.where(current >= 0, after[np.maximum(current, 0)], -1)
    return np.flatnonzero(ok & (current >= 0))


def stretches_through(
    starts: np.ndarray, after: np.ndarray, length: int, rows: np.ndarray
) -> np.ndarray:
    """The starts (of stretch_starts) whose `length` frames pass a row where `rows` is True."""
    current, passes = starts.copy(), rows[starts].copy()
    for _ in range(length - 1):
        current = after[current]
        passes |= rows[current]
    return starts[passes]


def drawable_starts(split, length: int) -> np.ndarray:
    """The starts of `length`-frame stretches of a StretchData that pass none of its rows
    training left out (StretchData.left_out)."""
    starts = stretch_starts(split.after, length)
    if not split.left_out.any():
        return starts
    return np.setdiff1d(starts, stretches_through(starts, split.after, length, split.left_out))


def draw_stretches(
    generator, starts: np.ndarray, batch_size: int, share: float, through: np.ndarray | None
) -> np.ndarray:
    """A batch of stretch starts: all from `starts` (share 0: the draw of the runs before
    --jump-share), or round(share * batch_size) of them from `through`."""
    if not share:
        return generator.choice(starts, batch_size)
    drawn = round(share * batch_size)
    return np.concatenate(
        [generator.choice(starts, batch_size - drawn), generator.choice(through, drawn)]
    )


class Standardiser:
    """Moves between the networks' standardised tensors and raw contract values."""

    def __init__(self, normalisation: dict[str, torch.Tensor], outputs: int):
        from canis.training.onnx_graph import input_range

        n = normalisation
        self.x_mean, self.x_std = n["x_mean"], n["x_std"]
        self.y_mean, self.y_std = n["y_mean"][:outputs], n["y_std"][:outputs]
        self.outputs = outputs
        # PFNN's phase increment: the standardised output after y (train.TrainingData).
        self.phase_delta = (
            (n["phase_delta_mean"], n["phase_delta_std"]) if "phase_delta_mean" in n else None
        )
        # The exported graph's clamp, standardised: one range, or fine-tuning would train on
        # inputs the game does not give (a dog beyond the training range by less than the
        # margin was clamped here and not there; the seventeenth session).
        low, high = input_range(n)
        self.x_min = (low - self.x_mean) / self.x_std
        self.x_max = (high - self.x_mean) / self.x_std

    def x_raw(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.x_std + self.x_mean

    def y_raw(self, y: torch.Tensor) -> torch.Tensor:
        return y[:, : len(self.y_mean)] * self.y_std + self.y_mean

    def next_phase_rad(self, phase_rad: torch.Tensor, prediction: torch.Tensor) -> torch.Tensor:
        """The phase the runtime feeds PFNN at the next step: Controller.step's phase plus the
        predicted increment, wrapped to [0, 2pi), with its gradient. Networks without a phase
        keep `phase_rad` (their zeros)."""
        if self.phase_delta is None:
            return phase_rad
        mean, std = self.phase_delta
        delta_rad = prediction[:, self.outputs] * std[0] + mean[0]
        return torch.remainder(phase_rad + delta_rad, 2 * np.pi)

    def x_standard(self, x_raw: np.ndarray) -> torch.Tensor:
        x = (torch.as_tensor(x_raw) - self.x_mean) / self.x_std
        return torch.maximum(torch.minimum(x, self.x_max), self.x_min)


# The loss's terms beside the MSE, as logged.
TERMS = ("contact", "placed_stillness", "moving_skating")


def frame_loss(
    prediction: torch.Tensor,
    x: torch.Tensor,
    rows: np.ndarray,
    split,
    standard: Standardiser,
    weights: ClosedLoopConfig | None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """One frame's loss: the MSE of the prediction from x (standardised) against the mocap's
    y of `rows`, plus the per-frame terms `weights` weighs (None: the MSE alone); returns
    (loss, each term's value for logging)."""
    if weights is not None and weights.jump_weight != 1:
        jumping = torch.as_tensor(split.action[rows] == ACTIONS.index("jump"))
        scale = torch.where(jumping, weights.jump_weight, 1.0).to(prediction.dtype)
        loss = (scale * (prediction - split.y[rows]).square().mean(1)).mean()
    else:
        loss = nn.functional.mse_loss(prediction, split.y[rows])
    terms = dict.fromkeys(TERMS, 0.0)
    if weights is None:
        return loss, terms
    if weights.contact_weight > 0:
        x_raw, y_raw = standard.x_raw(x), standard.y_raw(prediction)
        term = contact_loss(x_raw, y_raw, split.planted[rows])
        loss, terms["contact"] = loss + weights.contact_weight * term, term.item()
    return loss, terms


def stretch_frames(predict, split, starts: np.ndarray, standard: Standardiser, gt: int, own: int):
    """The stretches from `starts`: `gt` frames fed the mocap's x, then `own` fed x rebuilt
    from the network's previous output. Yields (frame, own, x, rows, prediction) for each
    frame, x standardised and `rows` the mocap's rows the frame stands for. PFNN's phase is
    fed back likewise: the mocap's while its x is, then advanced by the predicted increment
    as the runtime advances it."""
    x_train, after = split.x, split.after
    rows = starts
    x = x_train[rows]
    phase_rad = split.phase[rows]
    length = gt + own
    for frame in range(length):
        prediction = predict(x, phase_rad)
        yield frame, frame >= gt, x, rows, prediction
        if frame == length - 1:
            return
        following = after[rows]
        if frame + 1 >= gt:  # the next input comes from the network
            x_next_raw = next_input(
                standard.x_raw(x).detach().numpy(),
                standard.y_raw(prediction).detach().numpy(),
                standard.x_raw(x_train[following]).numpy(),
            )
            x = standard.x_standard(x_next_raw)
        else:
            x = x_train[following]
        if frame + 1 >= gt and standard.phase_delta is not None:  # PFNN's own phase
            phase_rad = standard.next_phase_rad(phase_rad, prediction.detach())
        else:  # the mocap's (other networks read no phase)
            phase_rad = split.phase[following]
        rows = following


def stretch_loss(
    predict,
    split,
    starts: np.ndarray,
    standard: Standardiser,
    ground_truth_frames: int,
    own_frames: int,
    weights: ClosedLoopConfig | None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Mean over the stretch of the one-step MSE plus the per-frame terms `weights` weighs
    (None: the MSE alone); returns (loss, each term's mean value for logging). `split`: a
    StretchData; `predict(x, phase)`."""
    total, term_totals = 0.0, dict.fromkeys(TERMS, 0.0)
    length = ground_truth_frames + own_frames
    for _, _, x, rows, prediction in stretch_frames(
        predict, split, starts, standard, ground_truth_frames, own_frames
    ):
        loss, terms = frame_loss(prediction, x, rows, split, standard, weights)
        term_totals = {name: term_totals[name] + terms[name] for name in TERMS}
        total = total + loss
    return total / length, {name: value / length for name, value in term_totals.items()}


class StretchData:
    """A split's standardised rows with, per row, the row of its clip's next frame."""

    def __init__(
        self,
        dataset_path: str,
        data,
        validation: bool,
        sniffing: bool = True,
        sniffing_walks: bool = True,
    ):
        from canis.training.dataset import load as load_dataset

        arrays = load_dataset(dataset_path)
        rows = arrays["validation"] if validation else ~arrays["validation"]
        # The rows no stretch and no placed dog may use: those of a sniffing dog, idle or
        # walking, where the network was trained without them (`sniffing = false`,
        # `sniffing_walks = false`); none otherwise.
        self.left_out = np.zeros(int(rows.sum()), bool)
        for kept, column in ((sniffing, "sniffing"), (sniffing_walks, "sniffing_walk")):
            if kept:
                continue
            if column not in arrays.arrays:  # built before the rows were marked
                raise ValueError(
                    f"{dataset_path}: has no {column} column, whose rows the network was "
                    "trained without: build it again (canis dataset build)"
                )
            self.left_out |= arrays[column][rows]
        self.after = successors(arrays["clip"][rows], arrays["frame"][rows])
        self.x = data.x_val if validation else data.x_train
        self.y = data.y_val if validation else data.y_train
        self.phase = data.phase_val if validation else data.phase_train
        contact = arrays.arrays.get("contact_next")
        self.planted = None if contact is None else torch.as_tensor(contact[rows])
        self.action = arrays["action"][rows].astype(np.int64)
        self.gait = arrays["gait"][rows].astype(np.int64)


def closed_loop_validation(
    model, predict, val_split, standard: Standardiser, loop: ClosedLoopConfig, stretches: int
) -> float:
    """The MSE over `stretches` fixed held-out stretches (the same rows for every model, so
    runs compare): ground-truth frames, then `loop.own_frames` rebuilt from the network's own
    outputs; no contact term. With own_frames 0 it is a one-step loss."""
    model.eval()
    with torch.no_grad():
        fixed = np.random.default_rng(12345)
        val_starts = stretch_starts(val_split.after, loop.ground_truth_frames + loop.own_frames)
        picked = fixed.choice(val_starts, stretches)
        closed, _ = stretch_loss(
            predict, val_split, picked, standard, loop.ground_truth_frames, loop.own_frames, None
        )
    return closed.item()

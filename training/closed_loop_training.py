"""Closed-loop (auto-conditioned, acRNN-style) training for the controllers (issue 17 item 1).

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
tests/test_closed_loop_training.py checks next_input against Controller.step's own x.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch
from canis.runtime.features import (
    ACTIONS,
    FPS,
    INPUT,
    OUTPUT,
    LocalPose,
    decode_output,
    write_joints,
)
from canis.runtime.pose_update import next_local_pose
from canis.training.contact_loss import contact_loss
from canis.training.getting_up_pops import GettingUpDogs
from canis.training.leg_motion_loss import leg_motion_loss
from canis.training.moving_gait import GAIT_REFERENCES, gait_by_speed
from canis.training.moving_legs import leg_turn_by_speed
from canis.training.moving_skating import skating_by_speed
from canis.training.placed_speed import (
    DOGS_PER_STEP,
    FRAMES_PER_DOG,
    MAX_TURN_DEGPS,
    MovingDogs,
)
from canis.training.placed_stillness import PlacedDogs
from canis.training.posture_stillness import PostureDogs
from canis.training.schedules import DROPOUT, WEIGHT_DECAY
from canis.training.stopping_pops import DOGS_PER_STEP as STOPPING_DOGS_PER_STEP
from canis.training.stopping_pops import StoppingDogs, joint_steps_by_speed
from torch import nn

JOINT_FIELDS = ("position", "forward", "up", "velocity")
MAX_UNROLL_FRAMES = FRAMES_PER_DOG  # a moving dog's steps in a batch


@dataclass
class ClosedLoopConfig:
    ground_truth_frames: int = 4  # frames fed the mocap at the start of each stretch
    own_frames: int = 8  # frames fed the network's own output, at the curriculum's end
    curriculum_epochs: int = 4  # own frames grow linearly from 1 over these epochs
    contact_weight: float = 0.0  # 0: no contact term (training/contact_loss.py)
    # 0: no leg-motion term (training/leg_motion_loss.py): on the stretches' own frames, each
    # leg joint's mean turn over each frame's batch against the mocap's.
    leg_motion_weight: float = 0.0
    # 0: no placed-stillness term (training/placed_stillness.py): the runtime's own dogs placed
    # standing and asked nothing, refreshed each epoch, `placed_dogs` of them, kept still.
    placed_stillness_weight: float = 0.0
    placed_dogs: int = 64
    # > 0: the placed terms' dogs are driven anew by the current weights every this many steps
    # as well as at each epoch's start (0: at each epoch's start only). A one-step term on the
    # same dogs for a whole epoch can fit their steps without changing how a fresh dog moves.
    placed_refresh_steps: int = 0
    # 0: no placed-speed term (training/placed_speed.py): the runtime's own dogs asked a speed
    # with its speed tracking off, refreshed each epoch, `placed_dogs` of them, brought to it.
    placed_speed_weight: float = 0.0
    # 0: no moving-legs term (training/moving_legs.py): on the placed-speed term's dogs, each
    # leg joint's turn held up to the mocap's at the dog's asked speed.
    moving_legs_weight: float = 0.0
    # > 1: the moving dogs' terms run over stretches of this many steps with the pose fed back
    # with its gradient (placed_speed.MovingDogs); 1: one step from each recorded input.
    moving_unroll_frames: int = 1
    moving_legs_both_ways: bool = False  # the moving-legs term counts legs moving too much too
    # > 0: the moving-legs term counts only the dogs asked under this speed (m/s): a walk's
    # stiff legs raised without pressing on the canter, whose hind paws hovered under it.
    moving_legs_below_mps: float = 0.0
    # 0: no moving-skating term (training/moving_skating.py): on the placed-speed term's dogs,
    # the shown paws' skating and heights held down to the mocap's at the dog's asked speed.
    moving_skating_weight: float = 0.0
    # 0: no moving-course term (training/moving_course.py): on the same dogs, the root turned
    # toward the facing asked (a dog asked straight ahead goes straight ahead).
    moving_course_weight: float = 0.0
    # 0: no moving-gait term (training/moving_gait.py): on the same dogs asked straight ahead,
    # unrolled over a gait window, the paws' footfall pattern held to the mocap's.
    moving_gait_weight: float = 0.0
    # The moving-gait term's reference at a speed: the mean of all the mocap's windows there
    # ("all", as (GS10) was trained) or of those of the gait it uses most there ("most-used").
    moving_gait_reference: str = "all"
    # The moving dogs' fastest turn either way, deg/s (half of them turn; placed_speed.py). The
    # controllers evaluation's turn asks 76.8 deg/s, beyond the default's.
    moving_max_turn_degps: float = MAX_TURN_DEGPS
    # The moving-skating term counts paws carried lower than the mocap's too.
    moving_paws_both_ways: bool = False
    # The moving-skating term holds each paw down (under 2.5 cm) as often as the mocap's too,
    # this many times DOWN_SHARE_COST_CM per share short (0: not held). Runs before it was a
    # weight stored False/True: 0/1 alike.
    moving_paws_down: float = 0.0
    # The moving-skating term's skating beyond the mocap's counted in the mocap's at that speed.
    moving_skating_relative: bool = False
    # The moving-skating term's bar: the mocap's skating at the dog's speed times this (1: the
    # mocap's own; under 1 asks for less sliding than the mocap's, whose planted paws slide).
    moving_skating_scale: float = 1.0
    # The moving-skating term holds each paw's root mean square height above 2.5 cm up to the
    # mocap's too (how high it swings, which the means above cannot tell).
    moving_paws_swing: bool = False
    # ... only for the dogs asked under this speed (m/s; 0: at every speed).
    moving_paws_swing_below_mps: float = 0.0
    # 0: each turning moving dog turns one way throughout; else it swaps sides this often (s),
    # as the controllers evaluation's turn does every 5 s.
    moving_turn_switch_s: float = 0.0
    # The moving dogs' terms are each step's mean over this many dogs (8: the runs before it).
    moving_dogs_per_step: int = DOGS_PER_STEP
    # > 0: this share of each batch's stretches is drawn from those passing a frame labelled
    # jump (0: every stretch alike). Jumps are about 1% of the rows and no placed or moving dog
    # is asked one, so the terms on those dogs can wear the jump away unseen.
    jump_share: float = 0.0
    # 0: no stopping-pops term (training/stopping_pops.py): `placed_dogs` of the runtime's own
    # dogs, asked a speed and then to stop, no shown joint faster in a frame than the mocap's.
    stopping_pops_weight: float = 0.0
    # 0: no getting-up-pops term (training/getting_up_pops.py): `placed_dogs` of the runtime's
    # own dogs taken to a posture and back up through the transition network, the same bar on
    # their steps after the hand-back.
    getting_up_pops_weight: float = 0.0
    # This share of the getting-up dogs is kept for its first second after the way down (the
    # posture held) instead of after getting up (0: none).
    getting_up_settling: float = 0.0
    # 0: no posture-stillness term (training/posture_stillness.py): `placed_dogs` of the
    # runtime's own dogs taken to a posture through the transition network and held, kept still.
    posture_stillness_weight: float = 0.0
    # The mocap stretches' frames labelled jump weigh this many times the others in the MSE
    # (1: all alike): beside the moving dogs' terms the stretches' own loss is about an eighth
    # of the whole, and a jump's frames a hundredth of that.
    jump_weight: float = 1.0

    def __post_init__(self):
        for option, weight in (
            ("--contact-weight", self.contact_weight),
            ("--leg-motion-weight", self.leg_motion_weight),
            ("--placed-stillness-weight", self.placed_stillness_weight),
            ("--placed-speed-weight", self.placed_speed_weight),
            ("--moving-legs-weight", self.moving_legs_weight),
            ("--moving-skating-weight", self.moving_skating_weight),
            ("--moving-course-weight", self.moving_course_weight),
        ):
            if not (np.isfinite(weight) and weight >= 0):
                raise ValueError(f"{option} {weight}: must be finite and >= 0")
        for option, weight in (
            ("--moving-gait-weight", self.moving_gait_weight),
            ("--stopping-pops-weight", self.stopping_pops_weight),
            ("--getting-up-pops-weight", self.getting_up_pops_weight),
            ("--posture-stillness-weight", self.posture_stillness_weight),
            ("--moving-paws-down", self.moving_paws_down),
        ):
            if not (np.isfinite(weight) and weight >= 0):
                raise ValueError(f"{option} {weight}: must be a finite weight >= 0")
        if self.placed_stillness_weight > 0 and self.placed_dogs < 2:
            raise ValueError(
                f"--placed-dogs {self.placed_dogs}: needs 2 or more (the keyframe's dogs and "
                "the mocap's)"
            )
        if not 1 <= self.moving_unroll_frames <= MAX_UNROLL_FRAMES:
            raise ValueError(
                f"--moving-unroll-frames {self.moving_unroll_frames}: must be between 1 and "
                f"{MAX_UNROLL_FRAMES} (the moving dogs' steps a batch takes)"
            )
        if not 0 <= self.moving_max_turn_degps <= 180:
            raise ValueError(
                f"--moving-max-turn-degps {self.moving_max_turn_degps}: must be between 0 and 180"
            )
        if not (np.isfinite(self.moving_turn_switch_s) and self.moving_turn_switch_s >= 0):
            raise ValueError(
                f"--moving-turn-switch-s {self.moving_turn_switch_s}: must be 0 (never) or a "
                "positive number of seconds"
            )
        if self.moving_dogs_per_step < 1:
            raise ValueError(
                f"--moving-dogs-per-step {self.moving_dogs_per_step}: must be at least 1"
            )
        moving_options = (
            ("--moving-dogs-per-step", self.moving_dogs_per_step != DOGS_PER_STEP),
            ("--moving-turn-switch-s", self.moving_turn_switch_s),
        )
        for option, given in moving_options:
            if given and not self.moves_dogs():
                raise ValueError(
                    f"{option}: needs a moving dogs' term (--placed-speed-weight, "
                    "--moving-legs-weight or --moving-skating-weight)"
                )
        if self.moving_gait_reference not in GAIT_REFERENCES:
            raise ValueError(
                f"--moving-gait-reference {self.moving_gait_reference}: one of "
                f"{', '.join(GAIT_REFERENCES)}"
            )
        if self.moving_gait_reference != "all" and self.moving_gait_weight == 0:
            raise ValueError(
                f"--moving-gait-reference {self.moving_gait_reference}: needs --moving-gait-weight"
            )
        below = self.moving_paws_swing_below_mps
        if not (np.isfinite(below) and below >= 0):
            raise ValueError(
                f"--moving-paws-swing-below-mps {below}: must be a finite speed >= 0 (m/s)"
            )
        if below and not self.moving_paws_swing:
            raise ValueError("--moving-paws-swing-below-mps: needs --moving-paws-swing")
        scale = self.moving_skating_scale
        if not (np.isfinite(scale) and scale > 0):
            raise ValueError(f"--moving-skating-scale {scale}: must be a finite number > 0")
        skating_options = (
            ("--moving-paws-swing", self.moving_paws_swing),
            ("--moving-skating-relative", self.moving_skating_relative),
            ("--moving-skating-scale", scale != 1.0),
            ("--moving-paws-down", self.moving_paws_down),
            ("--moving-paws-both-ways", self.moving_paws_both_ways),
        )
        for option, given in skating_options:
            if given and self.moving_skating_weight == 0:
                raise ValueError(f"{option}: needs --moving-skating-weight")
        if self.moving_legs_both_ways and self.moving_legs_weight == 0:
            raise ValueError("--moving-legs-both-ways: needs --moving-legs-weight")
        legs_below = self.moving_legs_below_mps
        if not (np.isfinite(legs_below) and legs_below >= 0):
            raise ValueError(
                f"--moving-legs-below-mps {legs_below}: must be a finite speed >= 0 (m/s)"
            )
        if legs_below and self.moving_legs_weight == 0:
            raise ValueError("--moving-legs-below-mps: needs --moving-legs-weight")
        if self.placed_refresh_steps < 0:
            raise ValueError(
                f"--placed-refresh-steps {self.placed_refresh_steps}: must be 0 (each epoch) "
                "or more"
            )
        dogs_driven = (
            self.moves_dogs()
            or self.stopping_pops_weight
            or self.getting_up_pops_weight
            or self.posture_stillness_weight
        )
        if dogs_driven and self.placed_dogs < 1:
            raise ValueError(f"--placed-dogs {self.placed_dogs}: needs 1 or more")
        if not (np.isfinite(self.jump_share) and 0 <= self.jump_share < 1):
            raise ValueError(
                f"--jump-share {self.jump_share}: must be a share of the batch, 0 or more and "
                "under 1"
            )
        if not (np.isfinite(self.jump_weight) and self.jump_weight >= 1):
            raise ValueError(f"--jump-weight {self.jump_weight}: must be a finite weight >= 1")
        if not (np.isfinite(self.getting_up_settling) and 0 <= self.getting_up_settling <= 1):
            raise ValueError(
                f"--getting-up-settling {self.getting_up_settling}: must be a share of the "
                "dogs, 0 to 1"
            )
        if self.getting_up_settling and not self.getting_up_pops_weight:
            raise ValueError("--getting-up-settling: needs --getting-up-pops-weight")

    def moves_dogs(self) -> bool:
        """Whether a term runs on the moving dogs (placed_speed.MovingDogs)."""
        return (
            self.placed_speed_weight > 0
            or self.moving_legs_weight > 0
            or self.moving_skating_weight > 0
            or self.moving_course_weight > 0
            or self.moving_gait_weight > 0
        )

    def own_frames_at(self, epoch: int) -> int:
        """The own-output stretch in `epoch` (0-based): 0 turns closed loop off."""
        if self.own_frames == 0:
            return 0
        ramp = min(1.0, (epoch + 1) / max(self.curriculum_epochs, 1))
        return max(1, round(ramp * self.own_frames))

    def identity(self) -> dict:
        return asdict(self)


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
TERMS = (
    "contact", "leg_motion", "placed_stillness", "placed_speed", "moving_legs", "moving_skating",
    "stopping_pops", "getting_up_pops", "moving_course", "moving_gait", "posture_stillness",
)  # fmt: skip


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
    (loss, each term's value for logging). The leg-motion term is not a per-frame one:
    leg_motion_stretch."""
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


def leg_motion_stretch(
    model, predict, split, starts, standard: Standardiser, loop: ClosedLoopConfig, own: int
) -> tuple[torch.Tensor, dict[str, float]]:
    """The weighted leg-motion term over the stretches from `starts`, on their own frames only
    (from the mocap's x the turn would mostly measure how far the prediction lands from the
    mocap's pose, not how the legs move), the network run without dropout and fed its own
    outputs, as in the game. Under dropout every predicted step jitters and the term would ask
    the legs to move less: on training stretches the shipped MANN-8's leg joints turn 1.0-2.3
    deg/frame over 16 own frames without dropout (the mocap's 1.1-3.4), 4.9-7.4 with dropout
    0.3, and the term is 0.2-0.9 (deg/frame)^2 a frame without, 15-22 with.

    The means are taken over each frame's rows (leg_motion_loss's groups), over all the own
    frames. It counts over the stretch as the per-frame terms do (the ground-truth frames
    adding nothing). Returns (weighted term, TERMS' values)."""
    x_raws, y_raws, all_rows, frames = [], [], [], []
    model.eval()
    try:
        for frame, is_own, x, rows, prediction in stretch_frames(
            predict, split, starts, standard, loop.ground_truth_frames, own
        ):
            if is_own:
                x_raws.append(standard.x_raw(x))
                y_raws.append(standard.y_raw(prediction))
                all_rows.append(rows)
                frames.append(np.full(len(rows), frame))
    finally:
        model.train()
    terms = dict.fromkeys(TERMS, 0.0)
    if not all_rows:
        return torch.zeros(()), terms
    rows, frames = np.concatenate(all_rows), np.concatenate(frames)
    x_raw, y_raw = torch.cat(x_raws), torch.cat(y_raws)
    share = own / (loop.ground_truth_frames + own)
    mocap = standard.x_raw(split.x[rows]), standard.y_raw(split.y[rows])
    term = leg_motion_loss(x_raw, y_raw, *mocap, torch.as_tensor(frames)) * share
    terms["leg_motion"] = term.item()
    return loop.leg_motion_weight * term, terms


class StretchData:
    """A split's standardised rows with, per row, the row of its clip's next frame."""

    def __init__(self, dataset_path: str, data, validation: bool):
        from canis.training.dataset import load as load_dataset

        arrays = load_dataset(dataset_path)
        rows = arrays["validation"] if validation else ~arrays["validation"]
        self.after = successors(arrays["clip"][rows], arrays["frame"][rows])
        self.x = data.x_val if validation else data.x_train
        self.y = data.y_val if validation else data.y_train
        self.phase = data.phase_val if validation else data.phase_train
        contact = arrays.arrays.get("contact_next")
        self.planted = None if contact is None else torch.as_tensor(contact[rows])
        self.action = arrays["action"][rows].astype(np.int64)
        self.gait = arrays["gait"][rows].astype(np.int64)


def check_finite_step(model, loss, terms: dict, epoch: int, step: int, checkpoint) -> None:
    """Stop before a step that would make the weights non-finite: the run's last checkpoint
    (the previous epoch's) is kept, and the error names the terms as they stood."""
    gradients = [p.grad for p in model.parameters() if p.grad is not None]
    if torch.isfinite(loss) and all(torch.isfinite(g).all() for g in gradients):
        return
    values = ", ".join(f"{name} {value:.4g}" for name, value in terms.items() if value)
    raise FloatingPointError(
        f"fine-tuning epoch {epoch + 1}, step {step + 1}: the loss ({loss.item():.4g}) or its "
        f"gradient is not finite (terms: {values or 'none'}); stopped before the step: "
        f"{checkpoint} is as the last finished epoch left it"
    )


# The loss configuration's fields that experiments added and no shipped model used, with the
# value they had when off (issue 61: deleted with their code paths). A run that stored one of
# them at that value resumes; one that turned it on does not.
DELETED_FIELDS = {
    "skating_weight": 0.0,
    "contact_paws": "predicted",
    "feedback": "pose",
    "rollout_dogs": 2048,
    "rollout_path_share": 0.5,
    "rollout_match_frames": 0,
    "leg_motion_groups": "batch",
    "leg_motion_on": "stretches",
    "stillness_weight": 0.0,
    "moving_gait_turning": False,
    "moving_gait_duty": False,
    "moving_turns_as_mocap": False,
    "moving_paws_lift": 0.0,  # runs before it was a weight stored False/True: 0/1 alike
    "moving_paws_planted": 0.0,
    "moving_paws_still": 0.0,
    "moving_paws_still_predicted": False,
    "moving_paws_down_fast": 0.0,
    "moving_paws_down_fast_mps": 2.0,
    "replay_skating_weight": 0.0,
    "bone_weight": 0.0,
    "bone_positions_only": False,
    "clip_grad_norm": 0.0,
}


def check_resumable(path, saved: dict, identity: dict) -> None:
    """A resumed fine-tuning must use the loss configuration it started with: name what
    differs (issue 17's bad input)."""
    previous = saved.get("closed_loop")
    if previous is None:
        raise ValueError(
            f"{path}: is not a closed-loop fine-tuning checkpoint (no closed_loop settings); "
            "give it as --start of a new run instead of resuming it"
        )
    # As runs written before these were settings: fp32, and the training's default dropout and
    # weight decay (they were fixed then); the terms that came later were off before them.
    unset = {
        "precision": "fp32",
        "dropout": DROPOUT,
        "weight_decay": WEIGHT_DECAY,
        "leg_motion_weight": 0.0,
        "placed_stillness_weight": 0.0,
        "placed_dogs": 64,
        "placed_refresh_steps": 0,
        "placed_speed_weight": 0.0,
        "moving_legs_weight": 0.0,
        "moving_unroll_frames": 1,
        "moving_legs_both_ways": False,
        "moving_legs_below_mps": 0.0,
        "moving_skating_weight": 0.0,
        "moving_course_weight": 0.0,
        "moving_gait_weight": 0.0,
        "moving_gait_reference": "all",
        "moving_max_turn_degps": MAX_TURN_DEGPS,
        "moving_paws_both_ways": False,
        "moving_turn_switch_s": 0.0,
        "moving_dogs_per_step": DOGS_PER_STEP,
        "moving_paws_down": 0.0,  # runs before it was a weight stored False/True: 0/1 alike
        "moving_skating_relative": False,
        "moving_skating_scale": 1.0,
        "moving_paws_swing": False,
        "moving_paws_swing_below_mps": 0.0,
        "jump_share": 0.0,
        "stopping_pops_weight": 0.0,
        "jump_weight": 1.0,
        "getting_up_pops_weight": 0.0,
        "getting_up_settling": 0.0,
        "posture_stillness_weight": 0.0,
    }
    deleted = [
        f"{key} {previous[key]!r}"
        for key, off in DELETED_FIELDS.items()
        if key in previous and previous[key] != off
    ]
    if deleted:
        raise ValueError(
            f"{path}: was fine-tuned with settings this version no longer has: "
            f"{', '.join(deleted)}; its fine-tuning cannot be resumed"
        )
    # keep_epochs (deleted too) chose the checkpoints kept, not the weights.
    gone = {*DELETED_FIELDS, "keep_epochs"}
    previous = {key: value for key, value in previous.items() if key not in gone}
    previous, identity = unset | previous, unset | identity
    differ = [
        f"{key} {previous.get(key)!r} (now {value!r})"
        for key, value in identity.items()
        if previous.get(key) != value
    ]
    differ += [
        f"{key} {value!r} (now unset)" for key, value in previous.items() if key not in identity
    ]
    if differ:
        raise ValueError(
            f"{path}: was fine-tuned with another loss configuration: {', '.join(differ)}; "
            "resume with the same settings or start a new run"
        )


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


@dataclass
class FineTuneSettings:
    start: str  # a `canis train` checkpoint (.safetensors) to start from
    dataset: str
    epochs: int = 8
    steps_per_epoch: int = 200
    batch_size: int = 32
    lr: float = 1e-5
    seed: int = 0
    validation_stretches: int = 256
    precision: str = "fp32"  # "bf16": autocast matmuls in training; "auto": precision_for_run
    # None: the start's own (start_regularisation): a network trained without dropout is not
    # fine-tuned with it.
    dropout: float | None = None
    weight_decay: float | None = None

    def __post_init__(self):
        if self.dropout is not None and not 0 <= self.dropout < 1:
            raise ValueError(f"--dropout {self.dropout}: must be at least 0 and below 1")
        if self.weight_decay is not None and not self.weight_decay >= 0:
            raise ValueError(f"--weight-decay {self.weight_decay}: must be 0 or more")


# A config file's keys (`canis finetune --config`): the run's settings beside the loss
# configuration's fields; the paths (--start, --out, --dataset) and --threads stay flags.
RUN_FIELDS = ("epochs", "steps_per_epoch", "batch_size", "lr", "seed", "precision", "dropout",
              "weight_decay")  # fmt: skip
PRECISIONS = ("auto", "bf16", "fp32")
_TYPES = {
    "int": ("an integer", lambda v: isinstance(v, int) and not isinstance(v, bool)),
    "float": ("a number", lambda v: isinstance(v, int | float) and not isinstance(v, bool)),
    "bool": ("true or false", lambda v: isinstance(v, bool)),
    "str": ("a string", lambda v: isinstance(v, str)),
}


def config_fields() -> dict[str, str]:
    """Each key a config file may hold, with its type as the dataclasses annotate it."""
    run = {f.name: f.type for f in fields(FineTuneSettings) if f.name in RUN_FIELDS}
    return run | {f.name: f.type for f in fields(ClosedLoopConfig)}


def check_run_settings(values: dict) -> None:
    """The run's settings `values` holds (a config file's), in range."""
    for key in ("epochs", "steps_per_epoch", "batch_size"):
        if key in values and values[key] < 1:
            raise ValueError(f"--{key.replace('_', '-')} {values[key]}: must be at least 1")
    if "seed" in values and values["seed"] < 0:
        raise ValueError(f"--seed {values['seed']}: must be 0 or more")
    if "lr" in values and not (np.isfinite(values["lr"]) and values["lr"] > 0):
        raise ValueError(f"--lr {values['lr']}: must be a finite number > 0")
    if values.get("precision", "auto") not in PRECISIONS:
        raise ValueError(f"--precision {values['precision']!r}: one of {', '.join(PRECISIONS)}")
    regularisation = {k: values[k] for k in ("dropout", "weight_decay") if k in values}
    FineTuneSettings(start="", dataset="", **regularisation)


def read_config(path) -> dict:
    """The settings of a config file: a JSON object of config_fields' keys (numbers as floats
    where the field is one, as the flags give them). A file that is not such an object, an
    unknown key, a wrong type or an out-of-range value is refused in one line naming the key,
    before any work."""
    path = Path(path)
    try:
        values = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise ValueError(f"{path}: not a readable JSON config ({error})") from None
    if not isinstance(values, dict):
        raise ValueError(f"{path}: must hold a JSON object of settings")
    known = config_fields()
    for key, value in values.items():
        if key not in known:
            raise ValueError(f"{path}: unknown key {key!r} (the keys: {', '.join(known)})")
        kinds = [kind.strip() for kind in known[key].split("|")]  # "float | None"
        if not (value is None and "None" in kinds or _TYPES[kinds[0]][1](value)):
            words = _TYPES[kinds[0]][0] + (" or null" if "None" in kinds else "")
            raise ValueError(f"{path}: {key} {json.dumps(value)}: must be {words}")
        if kinds[0] == "float" and value is not None:
            values[key] = float(value)
    try:
        check_run_settings(values)
        ClosedLoopConfig(**{k: v for k, v in values.items() if k not in RUN_FIELDS})
    except ValueError as error:  # its message names flags: here they are the file's keys
        keys = re.sub(r"--([a-z0-9-]+)", lambda m: m.group(1).replace("-", "_"), str(error))
        raise ValueError(f"{path}: {keys}") from None
    return values


def start_regularisation(saved: dict, settings: FineTuneSettings) -> dict:
    """The dropout and weight decay a fine-tune uses where `settings` leaves them unset: those
    its start was last fine-tuned or trained with. A checkpoint converted from an export
    records neither and reads as the training defaults, the shipped networks' own."""
    trained = (saved.get("train") or {}).get("config") or {}
    earlier = saved.get("closed_loop") or {}
    defaults = {"dropout": DROPOUT, "weight_decay": WEIGHT_DECAY}
    return {
        name: float(
            getattr(settings, name)
            if getattr(settings, name) is not None
            else earlier.get(name, trained.get(name, default))
        )
        for name, default in defaults.items()
    }


def fine_tune(
    settings: FineTuneSettings,
    loop: ClosedLoopConfig,
    run_dir,
    resume=False,
    recipe: dict | None = None,
):
    """Fine-tunes a trained controller in closed loop into run_dir (last.safetensors after
    every epoch, log.csv, config.json: the settings as a config file); resumable. Returns the
    log rows. `recipe`: where the settings came from ({"file": a config file, "values": its
    settings, "overrides": the flags given beside it}), recorded in the checkpoint for the
    model card. PFNN's phase is fed back with its
    pose: in the own-output frames and the runtime's dogs it is the runtime's, advanced by the
    predicted increment (Standardiser.next_phase_rad)."""
    from canis.training.checkpoint import (
        load_checkpoint,
        restore_optimizer,
        save_checkpoint,
    )
    from canis.training.models import restored_model
    from canis.training.precision import autocast, fused_optimiser, precision_for_run
    from canis.training.train import (
        LAST,
        TrainingData,
        _append_log,
        _check_same_dataset,
        _predict,
        split_settings,
        validation_loss,
    )

    run_dir = Path(run_dir)
    source = run_dir / LAST if resume else Path(settings.start)
    checkpoint = load_checkpoint(source)
    saved = checkpoint.config
    cpu = torch.device("cpu")
    resumed = saved.get("closed_loop") if resume else None
    settings = replace(
        settings,
        precision=precision_for_run(settings.precision, cpu, resumed),
        **start_regularisation(saved, settings),
    )
    print(
        f"precision {settings.precision}, {torch.get_num_threads()} threads, dropout "
        f"{settings.dropout}, weight decay {settings.weight_decay}",
        flush=True,
    )
    identity = loop.identity() | {
        k: v for k, v in asdict(settings).items() if k not in ("epochs", "dataset")
    }
    if resume:
        check_resumable(source, saved, identity)
    kind = saved["kind"]
    split = split_settings(checkpoint)
    if split != {"holdout": "clips", "mirrored": True}:  # StretchData reads that split's rows
        raise ValueError(
            f"{source}: was trained with --holdout {split['holdout']}"
            + ("" if split["mirrored"] else " --no-mirrored")
            + "; fine-tuning trains on every row of the dataset's training clips: start from "
            "a run trained on them"
        )
    data = TrainingData(settings.dataset, kind, torch.device("cpu"))
    _check_same_dataset(checkpoint, data, SimpleNamespace(dataset=settings.dataset), source)
    model = restored_model(checkpoint, source, settings.dropout)
    optimizer = torch.optim.AdamW(
        model.parameters(),
        lr=settings.lr,
        weight_decay=settings.weight_decay,
        fused=fused_optimiser(cpu),
    )
    if resume:
        restore_optimizer(checkpoint, model, optimizer)
    first_epoch = saved["closed_loop_epoch"] if resume else 0
    if not resume:
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "log.csv").unlink(missing_ok=True)
    used = {k: v for k, v in asdict(settings).items() if k in RUN_FIELDS} | asdict(loop)
    (run_dir / "config.json").write_text(json.dumps(used, indent=1) + "\n")
    standard = Standardiser(data.normalisation, OUTPUT.size)
    train_split = StretchData(settings.dataset, data, validation=False)
    val_split = StretchData(settings.dataset, data, validation=True)
    if loop.contact_weight > 0 and train_split.planted is None:
        raise ValueError(
            f"{settings.dataset}: has no paw contacts (contact_next); rebuild it with "
            "`canis dataset build` to use the contact term"
        )
    rows = []

    def predict(x, phase):  # validation: fp32, as the exported model runs
        return _predict(model, kind, x, phase)

    def predict_training(x, phase):
        with autocast(settings.precision, cpu):
            return _predict(model, kind, x, phase).float()

    placed = moving = stopping = getting_up = posture = None
    if loop.placed_stillness_weight > 0:
        placed = PlacedDogs(model, saved, data, train_split, standard, run_dir, loop.placed_dogs)
    if loop.moves_dogs():
        mocap = standard.x_raw(train_split.x), standard.y_raw(train_split.y), train_split.action
        legs = leg_turn_by_speed(*mocap) if loop.moving_legs_weight > 0 else None
        paws = skating_by_speed(*mocap) if loop.moving_skating_weight > 0 else None
        gaits = (
            gait_by_speed(
                *mocap,
                train_split.after,
                train_split.gait if loop.moving_gait_reference == "most-used" else None,
            )
            if loop.moving_gait_weight > 0
            else None
        )
        moving = MovingDogs(
            model, saved, data, standard, run_dir, loop.placed_dogs, legs,
            loop.moving_unroll_frames, loop.moving_legs_both_ways, paws,
            loop.moving_max_turn_degps, loop.moving_turn_switch_s,
            {
                "heights_both_ways": loop.moving_paws_both_ways,
                "paws_down": loop.moving_paws_down,
                "skating_relative": loop.moving_skating_relative,
                "skating_scale": loop.moving_skating_scale,
                "paws_swing": loop.moving_paws_swing,
                "swing_below_mps": loop.moving_paws_swing_below_mps,
            },
            loop.moving_course_weight > 0, gaits,
            legs_below_mps=loop.moving_legs_below_mps,
        )  # fmt: skip
    if loop.stopping_pops_weight > 0 or loop.getting_up_pops_weight > 0:
        mocap = standard.x_raw(train_split.x), standard.y_raw(train_split.y), train_split.action
        steps_reference = joint_steps_by_speed(*mocap)
    if loop.stopping_pops_weight > 0:
        stopping = StoppingDogs(
            model, saved, data, standard, run_dir, loop.placed_dogs,
            steps_reference, loop.moving_unroll_frames,
        )  # fmt: skip
    if loop.getting_up_pops_weight > 0:
        getting_up = GettingUpDogs(
            model, saved, data, standard, run_dir, loop.placed_dogs,
            steps_reference, loop.moving_unroll_frames, loop.getting_up_settling,
        )  # fmt: skip
    if loop.posture_stillness_weight > 0:
        posture = PostureDogs(
            model, saved, data, standard, run_dir, loop.placed_dogs, loop.moving_unroll_frames
        )
    for epoch in range(first_epoch, settings.epochs):
        own = loop.own_frames_at(epoch)
        length = loop.ground_truth_frames + own
        generator = np.random.default_rng(settings.seed * 1_000_003 + epoch)
        torch.manual_seed(settings.seed * 7919 + epoch)
        rollout_seconds = 0.0
        placed_terms = [
            dogs for dogs in (placed, moving, stopping, getting_up, posture) if dogs is not None
        ]
        for dogs in placed_terms:  # this epoch's placed dogs, by the weights it starts from
            rollout_seconds += dogs.refresh(generator)
        jumps = None
        starts = stretch_starts(train_split.after, loop.ground_truth_frames + own)
        if loop.jump_share:
            jumps = stretches_through(
                starts,
                train_split.after,
                loop.ground_truth_frames + own,
                train_split.action == ACTIONS.index("jump"),
            )
            if len(jumps) == 0:
                raise ValueError(
                    f"--jump-share: {settings.dataset} has no training stretch through a jump"
                )
        model.train()
        started, loss_sum, term_sums = time.perf_counter(), 0.0, dict.fromkeys(TERMS, 0.0)
        gradient_norms = []  # each step's, before clipping
        for step in range(settings.steps_per_epoch):
            if step > 0 and loop.placed_refresh_steps and step % loop.placed_refresh_steps == 0:
                for dogs in placed_terms:  # driven again by the weights as they are now
                    rollout_seconds += dogs.refresh(generator)
            batch = draw_stretches(generator, starts, settings.batch_size, loop.jump_share, jumps)
            loss, terms = stretch_loss(
                predict_training, train_split, batch, standard, loop.ground_truth_frames, own, loop
            )
            if loop.leg_motion_weight > 0:
                motion, motion_terms = leg_motion_stretch(
                    model, predict_training, train_split, batch, standard, loop, own
                )
                loss = loss + motion
                terms["leg_motion"] += motion_terms["leg_motion"]
            if placed is not None:  # as many steps as a batch of stretches has own frames
                still = placed.loss(predict_training, settings.batch_size * max(own, 1), generator)
                loss = loss + loop.placed_stillness_weight * still
                terms["placed_stillness"] = still.item()
            if moving is not None:
                dogs = loop.moving_dogs_per_step
                speed, legs, paws, course = moving.loss(predict_training, dogs, generator)
                loss = (
                    loss
                    + loop.placed_speed_weight * speed
                    + loop.moving_legs_weight * legs
                    + loop.moving_skating_weight * paws
                    + loop.moving_course_weight * course
                )
                terms["placed_speed"] = speed.item()
                terms["moving_legs"] = legs.item()
                terms["moving_skating"] = paws.item()
                terms["moving_course"] = course.item()
                if loop.moving_gait_weight > 0:
                    gait = moving.gait_loss(predict_training, dogs)
                    loss = loss + loop.moving_gait_weight * gait
                    terms["moving_gait"] = gait.item()
            if stopping is not None:
                pops = stopping.loss(predict_training, STOPPING_DOGS_PER_STEP, generator)
                loss = loss + loop.stopping_pops_weight * pops
                terms["stopping_pops"] = pops.item()
            if getting_up is not None:
                pops = getting_up.loss(predict_training, STOPPING_DOGS_PER_STEP, generator)
                loss = loss + loop.getting_up_pops_weight * pops
                terms["getting_up_pops"] = pops.item()
            if posture is not None:
                still = posture.loss(predict_training, STOPPING_DOGS_PER_STEP, generator)
                loss = loss + loop.posture_stillness_weight * still
                terms["posture_stillness"] = still.item()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            check_finite_step(model, loss, terms, epoch, step, run_dir / LAST)
            norm = nn.utils.get_total_norm(
                [p.grad for p in model.parameters() if p.grad is not None]
            )
            gradient_norms.append(norm.item())
            optimizer.step()
            loss_sum += loss.item()
            term_sums = {name: term_sums[name] + terms[name] for name in TERMS}
        seconds = time.perf_counter() - started
        closed = closed_loop_validation(
            model, predict, val_split, standard, loop, settings.validation_stretches
        )
        row = {
            "epoch": epoch + 1,
            "own_frames": own,
            "train_loss": loss_sum / settings.steps_per_epoch,
            **{f"{name}_term": term_sums[name] / settings.steps_per_epoch for name in TERMS},
            "validation_loss": validation_loss(model, kind, data),
            "validation_closed_loop_loss": closed,
            "gradient_norm_median": float(np.median(gradient_norms)),
            "gradient_norm_max": max(gradient_norms),
            "seconds": round(seconds, 2),
            "rollout_seconds": round(rollout_seconds, 2),
            "frames_per_s": round(
                settings.steps_per_epoch * settings.batch_size * length / seconds, 1
            ),
        }
        rows.append(row)
        _append_log(run_dir / "log.csv", row)
        # A start written by `canis average` names its sources; this run's weights are not
        # that mean, so the record stays with the start (the card would say they were); so
        # does the config file a fine-tuned start was run from.
        gone = ("averaged_from", "closed_loop_config")
        kept = {key: value for key, value in saved.items() if key not in gone}
        state = kept | {
            "closed_loop": identity,
            "closed_loop_epoch": epoch + 1,
            "closed_loop_start": str(settings.start),
            "last": row,
        }
        if recipe is not None:
            state["closed_loop_config"] = recipe
        save_checkpoint(run_dir / LAST, model, optimizer, data.normalisation, state)
        print(
            f"epoch {epoch + 1}/{settings.epochs} (own frames {own}): "
            f"train {row['train_loss']:.4f} validation {row['validation_loss']:.4f} closed-loop "
            f"{row['validation_closed_loop_loss']:.4f}",
            flush=True,
        )
    return rows

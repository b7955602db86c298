"""The moving-skating term, on the moving dogs (training/moving_dogs.py: the runtime's own dogs
asked a steady speed), as free functions of their raw inputs and predictions, with the mocap's
reference by speed it is held to."""

from __future__ import annotations

import numpy as np
import torch
from canis.runtime.features import ACTIONS, PAW_ROWS
from canis.runtime.motion_metrics import SKATING_HEIGHT_CM
from canis.training.finetune_losses import step_skating_cm, world_velocity_mps
from canis.training.moving_dogs import SPEED_RANGE_MPS, root_speed_mps
from canis.training.shown_pose import shown_step_m

SPEED_BIN_MPS = 0.2
MIN_BIN_ROWS = 100  # a speed bin with fewer locomotion frames is left out of the reference
MOVE = ACTIONS.index("move")


def by_speed(
    values: np.ndarray,
    y_raw: torch.Tensor,
    action: np.ndarray,
    option: str,
    what: str,
    percentile: float | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(speed bin centres m/s (S,), the mean of `values` (N, K) in each bin, or the given
    percentile (S, K)) over the rows asked to move, binned by their predicted root speed
    (y_raw) over SPEED_RANGE_MPS; bins with fewer than MIN_BIN_ROWS rows left out. `option` and
    `what` name the term in the error raised where fewer than two bins are left."""
    with torch.no_grad():
        speed_mps = root_speed_mps(y_raw).numpy()
    low, high = SPEED_RANGE_MPS
    edges = np.arange(low - SPEED_BIN_MPS, high + 2 * SPEED_BIN_MPS, SPEED_BIN_MPS)
    centres, means = [], []
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        rows = (action == MOVE) & (speed_mps >= lo) & (speed_mps < hi)
        if rows.sum() >= MIN_BIN_ROWS:
            centres.append((lo + hi) / 2)
            chosen = values[rows]
            means.append(
                chosen.mean(0) if percentile is None else np.percentile(chosen, percentile, 0)
            )
    if len(centres) < 2:
        raise ValueError(
            f"{option}: the training clips have too few locomotion frames between "
            f"{low} and {high} m/s to give {what} by speed"
        )
    return np.array(centres), np.stack(means)


def reference_at(centres_mps: np.ndarray, means: np.ndarray, speed_mps: np.ndarray):
    """(dogs, K) the mocap's figures by speed (by_speed's (S, K): the moving-skating term's
    paws) at each dog's speed, linear
    between the bins' centres (the end bins' values beyond them)."""
    return np.stack(
        [np.interp(speed_mps, centres_mps, means[:, k]) for k in range(means.shape[1])], axis=1
    )


# The moving-skating term: the runtime's own dogs, asked a steady speed,
# skating no more than the mocap's dogs at that speed, with their paws no higher.
#
# On the moving dogs' stretches (unrolled as --moving-unroll-frames says) each dog's shown paws
# (training/shown_pose.py: drawn from the predicted axes, as the evaluation measures them) are
# held to the mocap's at the dog's asked speed: the dog's mean skating (over its steps and paws)
# beyond the mocap's frames asked to move at that speed, plus each paw's mean height beyond the
# mocap's paw's mean there by more than a small allowance (cm, averaged over the paws), so that
# a dog cannot stop skating by carrying its paws above the measure's 2.5 cm. A dog that skates
# less than the mocap costs nothing, and one dog's margin does not pay for another's excess.
#
# The options: `heights_both_ways` counts paws carried lower than the mocap's too; so held, a paw
# that never comes down meets the mean height, so `paws_down` holds each paw down (under 2.5 cm,
# counted softly) as often as the mocap's, DOWN_SHARE_COST_CM per whole share short beyond
# DOWN_SHARE_ALLOWANCE; `skating_relative` counts the skating in the mocap's at the dog's speed (in
# cm it is small beside the heights' misses); `paws_swing` holds each paw's root mean square lift
# above 2.5 cm up to the mocap's (a flattened stride meets every mean), for the dogs asked under
# `swing_below_mps` where that is above 0 (the walk's shuffle); and as the mocap's planted paws
# slide too, `skating_scale` sets the skating bar at the mocap's times that.

# A dog's paws may sit this much higher on average than the mocap's at its speed for free: the
# term is there to stop paws carried above the measure's 2.5 cm through the stance (which
# raises the mean by more), not to press every stride onto the mocap's.
HEIGHT_ALLOWANCE_CM = 0.5
DOWN_SOFTNESS_CM = 0.5  # a paw 0.5 cm above 2.5 counts 0.27 down, 0.5 cm below 0.73
DOWN_SHARE_ALLOWANCE = 0.05  # of the steps: a paw may be down this much less than the mocap's
DOWN_SHARE_COST_CM = 10.0  # a whole share of steps short costs as a paw 10 cm off its height
MIN_REFERENCE_SKATING_CM = 0.01  # relative skating: a mocap bin that hardly skates counts as this
CHUNK_ROWS = 8192  # the mocap's rows at a time through the shown pose (memory, not results)


def shown_paw_steps(
    x_raw: torch.Tensor, y_raw: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(B, 4) each shown paw's skating over the step (cm/frame), its height after it (cm) and
    its horizontal world speed over it (m/s)."""
    before, after = shown_step_m(x_raw, y_raw, PAW_ROWS)
    velocity = world_velocity_mps(before, after, y_raw)
    speed = velocity[..., [0, 2]].norm(dim=-1)
    return step_skating_cm(velocity, after), after[..., 1] * 100.0, speed


def shown_skating_and_height_cm(
    x_raw: torch.Tensor, y_raw: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, 4) each shown paw's skating over the step (cm/frame) and its height after it (cm)."""
    skating, height, _ = shown_paw_steps(x_raw, y_raw)
    return skating, height


def soft_down(height_cm: torch.Tensor) -> torch.Tensor:
    """How far each paw counts as down (0-1) at its height: 1/2 at the measure's 2.5 cm."""
    return torch.sigmoid((SKATING_HEIGHT_CM - height_cm) / DOWN_SOFTNESS_CM)


def lift_cm(height_cm: torch.Tensor) -> torch.Tensor:
    """Each paw's height above the measure's 2.5 cm (0 under it): where a step shows."""
    return (height_cm - SKATING_HEIGHT_CM).clamp(min=0)


def skating_by_speed(
    x_raw: torch.Tensor, y_raw: torch.Tensor, action: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The mocap's reference from its rows: (speed bin centres m/s (S,), (S, 13): in each bin
    the mean skating of the shown paws (cm/frame, over the paws), each paw's mean height (cm),
    each paw's share of steps down (soft_down) and each paw's mean squared lift (lift_cm,
    cm^2)) over the frames asked to move."""
    values = []
    with torch.no_grad():
        for start in range(0, len(x_raw), CHUNK_ROWS):
            rows = slice(start, start + CHUNK_ROWS)
            skating, height, _ = shown_paw_steps(x_raw[rows], y_raw[rows])
            columns = [
                skating.mean(1, keepdim=True),
                height,
                soft_down(height),
                lift_cm(height) ** 2,
            ]
            values.append(torch.cat(columns, 1).numpy())
    return by_speed(
        np.concatenate(values), y_raw, action, "moving_skating_weight", "the paws' skating"
    )


def moving_skating_loss(
    x_raw: torch.Tensor,
    y_raw: torch.Tensor,
    reference: torch.Tensor,
    heights_both_ways: bool = False,
    paws_down: float = 0.0,
    skating_relative: bool = False,
    skating_scale: float = 1.0,
    paws_swing: bool = False,
    swing_below_mps: float = 0.0,
    asked_mps: torch.Tensor | None = None,
) -> torch.Tensor:
    """x_raw, y_raw (dogs * frames, ...) grouped by dog, reference (dogs, 13) (skating_by_speed's
    at each dog's speed): the mean over dogs of the dog's mean skating (cm/frame) beyond the
    reference's times `skating_scale` (counted in the reference's with `skating_relative`),
    plus its paws' mean heights beyond the reference's by more than HEIGHT_ALLOWANCE_CM (cm,
    averaged over paws; lower too with `heights_both_ways`); `paws_down` (a weight, 0: off;
    True counts 1): plus each paw's share of steps down short of the reference's by more than
    DOWN_SHARE_ALLOWANCE, DOWN_SHARE_COST_CM a share (averaged over paws), times the weight;
    `paws_swing`: plus each paw's root mean square lift short of the reference's by more than
    HEIGHT_ALLOWANCE_CM (cm, averaged over paws), only for the dogs asked (asked_mps, (dogs,))
    under `swing_below_mps` where that is above 0."""
    dogs = len(reference)
    if dogs == 0:
        return y_raw.new_zeros(())
    skating, height, _ = (v.reshape(dogs, -1, 4) for v in shown_paw_steps(x_raw, y_raw))
    skating_excess = (skating.mean((1, 2)) - skating_scale * reference[:, 0]).clamp(min=0)
    if skating_relative:
        skating_excess = skating_excess / reference[:, 0].clamp(min=MIN_REFERENCE_SKATING_CM)
    miss_cm = height.mean(1) - reference[:, 1:5]
    if heights_both_ways:
        miss_cm = miss_cm.abs()
    height_excess = (miss_cm - HEIGHT_ALLOWANCE_CM).clamp(min=0).mean(1)
    if paws_down:
        short = reference[:, 5:9] - soft_down(height).mean(1) - DOWN_SHARE_ALLOWANCE
        weight = torch.full_like(short[:, 0], float(paws_down))
        height_excess = height_excess + weight * DOWN_SHARE_COST_CM * short.clamp(min=0).mean(1)
    if paws_swing:
        # The floor keeps the square root's gradient finite for a paw that never lifts.
        rms_cm = lift_cm(height).square().mean(1).clamp(min=1e-6).sqrt()
        short_cm = (reference[:, 9:13].sqrt() - rms_cm - HEIGHT_ALLOWANCE_CM).clamp(min=0)
        if swing_below_mps > 0:
            if asked_mps is None:
                raise ValueError("swing_below_mps: needs each dog's asked speed (asked_mps)")
            short_cm = short_cm * (asked_mps < swing_below_mps).to(short_cm.dtype)[:, None]
        height_excess = height_excess + short_cm.mean(1)
    return (skating_excess + height_excess).mean()

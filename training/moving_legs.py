"""The moving-legs term (issue 17, leg stiffness): the runtime's own dogs, asked a steady speed,
moving their legs as much as the mocap's dogs at that speed.

The leg-motion term (training/finetune_losses.py) asks for the mocap's leg motion on the
training stretches, whose trajectory is the mocap's; there the shipped network's legs already
move as the mocap's (docs/EVALUATION.md, the eighth session). Where they do not is the game's
steady command: on the placed-speed term's dogs (training/placed_speed.py: from the standing
keyframe, asked a speed for 2 s, speed tracking off) the shipped MANN-8's leg joints turn 2.05
deg/frame asked 0.4-0.5 m/s where the training split's frames asked to move at those speeds
turn 3.11, 3.06 against 3.49 at 0.5-0.7 m/s, and within 15% from 0.7 m/s up (seed 0, 64
dogs). The controllers
evaluation's walk is asked 0.56 m/s, its turn 0.59: the slow end is where the stiffness misses.

So on those same dogs' steps (one prediction serves both terms) each dog's mean turn of each leg
joint over its sampled steps is held to the mocap's mean for that joint at the dog's asked
speed (interpolated between speed bins of the training split's frames asked to move): the
shortfall beyond LEG_ALLOWANCE counts, and with `both_ways` the excess too. The turn is
leg_turn_deg's (root frame, the predicted yaw step taken out), the measure the other leg terms
use.

Measured, not shipped (docs/EVALUATION.md, the fifteenth session): one step at a time
(placed_speed.MovingDogs with unroll 1) the term is met on the dogs it is measured on while
fresh dogs' slow legs freeze; unrolled over 8 fed-back steps it reaches fresh dogs, whose legs
then move more than the mocap's and whose paws slide.
"""

from __future__ import annotations

import numpy as np
import torch
from canis.runtime.features import ACTIONS
from canis.training.finetune_losses import leg_turn_deg
from canis.training.placed_speed import SPEED_RANGE_MPS, root_speed_mps

LEG_ALLOWANCE = 0.05  # relative to the mocap's turn: a shortfall within it costs nothing
SPEED_BIN_MPS = 0.2
MIN_BIN_ROWS = 100  # a speed bin with fewer locomotion frames is left out of the reference
MOVE = ACTIONS.index("move")


def leg_turn_by_speed(
    x_raw: torch.Tensor, y_raw: torch.Tensor, action: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The mocap's reference from its rows (x, y raw; action per row): (speed bin centres m/s
    (S,), each leg joint's mean turn deg/frame in each bin (S, L)) over the frames asked to
    move, binned by their root speed over SPEED_RANGE_MPS."""
    with torch.no_grad():
        turn_deg = leg_turn_deg(x_raw, y_raw).numpy()
    return by_speed(turn_deg, y_raw, action, "--moving-legs-weight", "the legs' motion")


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
    """(dogs, K) the mocap's figures by speed (by_speed's (S, K): each leg joint's turn, the
    moving-skating term's paws or the moving-gait term's correlations) at each dog's speed, linear
    between the bins' centres (the end bins' values beyond them)."""
    return np.stack(
        [np.interp(speed_mps, centres_mps, means[:, k]) for k in range(means.shape[1])], axis=1
    )


def moving_legs_loss(
    x_raw: torch.Tensor,
    y_raw: torch.Tensor,
    reference_deg: torch.Tensor,
    both_ways: bool = False,
    counted: torch.Tensor | None = None,
) -> torch.Tensor:
    """x_raw, y_raw (dogs * frames, ...) grouped by dog, reference_deg (dogs, L): the mean over
    dogs and leg joints of the squared shortfall (deg/frame) of each joint's mean turn over the
    dog's frames below the reference, beyond LEG_ALLOWANCE of it; `both_ways`: the excess
    above it too; `counted` (dogs,) bool: only those dogs' misses count (the mean still over
    all the dogs, so the term's scale does not hang on how many are counted)."""
    if len(reference_deg) == 0:
        return y_raw.new_zeros(())
    turn_deg = leg_turn_deg(x_raw, y_raw).reshape(len(reference_deg), -1, reference_deg.shape[1])
    miss_deg = reference_deg - turn_deg.mean(1)
    if both_ways:
        miss_deg = miss_deg.abs()
    cost = (miss_deg - reference_deg * LEG_ALLOWANCE).clamp(min=0).square()
    if counted is not None:
        cost = cost * counted.to(cost.dtype)[:, None]
    return cost.mean()

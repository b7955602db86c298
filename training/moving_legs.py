"""The moving-legs term (issue 17, leg stiffness): the runtime's own dogs, asked a steady speed,
moving their legs as much as the mocap's dogs at that speed.

The leg-motion term (training/leg_motion_loss.py) asks for the mocap's leg motion on the
training stretches, whose trajectory is the mocap's; there the shipped network's legs already
move as the mocap's (docs/EVALUATION.md, the eighth session). Where they do not is the game's
steady command: on the placed-speed term's dogs (training/placed_speed.py: from the standing
keyframe, asked a speed for 2 s, speed tracking off) the shipped MANN-8's leg joints turn 2.05
deg/frame asked 0.4-0.5 m/s where the training split's frames asked to move at those speeds
turn 3.11, 3.06 against 3.49 at 0.5-0.7 m/s, and within 15% from 0.7 m/s up (seed 0, 64
dogs; `python -m canis.training.moving_legs MODEL.onnx` prints the table). The controllers
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
from canis.runtime.features import ACTIONS, INPUT
from canis.training.contact_loss import _field, yaw_step_rad
from canis.training.leg_motion_loss import LEG_ROWS, axes_turn_deg, leg_turn_deg
from canis.training.placed_speed import SPEED_RANGE_MPS, root_speed_mps

LEG_ALLOWANCE = 0.05  # relative to the mocap's turn: a shortfall within it costs nothing
SPEED_BIN_MPS = 0.2
MIN_BIN_ROWS = 100  # a speed bin with fewer locomotion frames is left out of the reference
MOVE = ACTIONS.index("move")
# The span main()'s second measure turns the legs over: a leg that swings through its stride
# turns nearly as far in SPAN_FRAMES frames as SPAN_FRAMES single frames add up to; one that
# shakes back and forth turns much less.
SPAN_FRAMES = 4


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


def leg_turn_over_deg(
    x_first_raw: torch.Tensor, x_last_raw: torch.Tensor, turn_rad: torch.Tensor
) -> torch.Tensor:
    """(B, L) the angle each leg joint turns from x_first's pose to x_last's (input rows), in
    the root frame, the root having turned by turn_rad (B,) between them."""
    fields = [_field(INPUT, x, "joints", f, LEG_ROWS) for x in (x_first_raw, x_last_raw)
              for f in ("forward", "up")]  # fmt: skip
    return axes_turn_deg(*fields, turn_rad)


def span_turn_by_speed(
    x_raw: torch.Tensor, y_raw: torch.Tensor, action: np.ndarray, after: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """by_speed of each leg joint's turn over SPAN_FRAMES frames of the mocap (x's pose to
    the pose SPAN_FRAMES rows on, `after` giving each row's next frame in its clip or -1),
    from the rows whose clip goes on that long."""
    rows = np.flatnonzero(after >= 0)
    turn_rad = torch.zeros(len(rows))
    current = rows
    for _ in range(SPAN_FRAMES):
        turn_rad += yaw_step_rad(y_raw[current])
        current = after[current]
        kept = current >= 0
        rows, current, turn_rad = rows[kept], current[kept], turn_rad[torch.as_tensor(kept)]
    with torch.no_grad():
        turn_deg = leg_turn_over_deg(x_raw[rows], x_raw[current], turn_rad).numpy()
    return by_speed(
        turn_deg,
        y_raw[rows],
        action[rows],
        "python -m canis.training.moving_legs",
        "the legs' turn over a span",
    )


def reference_at(centres_mps: np.ndarray, means: np.ndarray, speed_mps: np.ndarray):
    """(dogs, K) the mocap's figures by speed (by_speed's (S, K): each leg joint's turn, the
    moving-skating term's paws, or the turning dogs' fastest turn) at each dog's speed, linear
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


REPORT_EDGES_MPS = (0.4, 0.5, 0.7, 0.9, 1.2, 1.6, 2.0, 2.5, 3.0, 3.6)  # the measures' bands


def measure_arguments(description: str, argv):
    """The moving-dogs measures' command line (models, --dataset, --dogs, --seed): (args, the
    dataset's training rows {X, Y, action, gait, clip, frame})."""
    import argparse

    from canis.training.dataset import load as load_dataset

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("models", nargs="+")
    parser.add_argument("--dataset", default="data/dog_dataset.npz")
    parser.add_argument("--dogs", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    arrays = load_dataset(args.dataset)
    train = ~arrays["validation"]
    return args, {key: arrays[key][train] for key in ("X", "Y", "action", "gait", "clip", "frame")}


def driven_dogs(model: str, dogs: int, seed: int):
    """(xs (dogs, frames, 480), asked m/s (dogs,), y (dogs * frames, 363)): the moving terms'
    dogs driven by `model` through the runtime, and its predictions from their inputs."""
    import onnxruntime as ort
    from canis.training.placed_speed import moving_inputs

    xs, asked = moving_inputs(model, dogs, np.random.default_rng(seed))
    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    return xs, asked, session.run(["y"], {"x": xs.reshape(-1, xs.shape[2])})[0]


def speed_bands(asked_mps: np.ndarray):
    """(low, high, dogs asked between them) for each of REPORT_EDGES_MPS's bands with dogs."""
    for low, high in zip(REPORT_EDGES_MPS[:-1], REPORT_EDGES_MPS[1:], strict=True):
        dogs = (asked_mps >= low) & (asked_mps < high)
        if dogs.any():
            yield low, high, dogs


def main(argv=None) -> None:
    """Print each model's moving dogs' leg turn against the mocap's, by asked speed."""
    from canis.training.closed_loop_training import successors

    args, rows = measure_arguments(main.__doc__, argv)
    x_mocap, y_mocap = torch.as_tensor(rows["X"]), torch.as_tensor(rows["Y"])
    centres, turn = leg_turn_by_speed(x_mocap, y_mocap, rows["action"])
    after = successors(rows["clip"], rows["frame"])
    span_centres, span_turn = span_turn_by_speed(x_mocap, y_mocap, rows["action"], after)
    for model in args.models:
        xs, asked, y = driven_dogs(model, args.dogs, args.seed)
        x = xs.reshape(-1, xs.shape[2])
        dog_deg = leg_turn_deg(torch.as_tensor(x), torch.as_tensor(y)).numpy()
        dog_deg = dog_deg.reshape(args.dogs, -1, dog_deg.shape[1]).mean(1)
        dog_span_deg = _span_turn_deg(xs, y)
        mocap_deg = reference_at(centres, turn, asked)
        mocap_span_deg = reference_at(span_centres, span_turn, asked)
        term = moving_legs_loss(
            torch.as_tensor(x), torch.as_tensor(y), torch.as_tensor(mocap_deg, dtype=torch.float32)
        )
        print(f"{model}: term {term.item():.4f} (deg/frame)^2")
        for lo, hi, dogs in speed_bands(asked):
            print(
                f"  asked {lo:.1f}-{hi:.1f} m/s ({dogs.sum()} dogs): legs turn "
                f"{dog_deg[dogs].mean():.2f} deg/frame, the mocap's "
                f"{mocap_deg[dogs].mean():.2f}; over {SPAN_FRAMES} frames "
                f"{dog_span_deg[dogs].mean():.2f} deg "
                f"({dog_span_deg[dogs].mean() / (SPAN_FRAMES * dog_deg[dogs].mean()):.0%} "
                f"of {SPAN_FRAMES} frames' turns), the mocap's "
                f"{mocap_span_deg[dogs].mean():.2f} "
                f"({mocap_span_deg[dogs].mean() / (SPAN_FRAMES * mocap_deg[dogs].mean()):.0%})"
            )


def _span_turn_deg(xs: np.ndarray, y: np.ndarray) -> np.ndarray:
    """(dogs,) each dog's mean leg-joint turn over SPAN_FRAMES of its recorded frames (xs
    (dogs, frames, 480), y its predictions flattened)."""
    dogs, frames = xs.shape[:2]
    turn_rad = yaw_step_rad(torch.as_tensor(y)).reshape(dogs, frames)
    spans = []
    for t in range(frames - SPAN_FRAMES):
        span_rad = turn_rad[:, t : t + SPAN_FRAMES].sum(1)
        first, last = (torch.as_tensor(xs[:, t + k]) for k in (0, SPAN_FRAMES))
        spans.append(leg_turn_over_deg(first, last, span_rad).mean(1))
    return torch.stack(spans, 1).mean(1).numpy()


if __name__ == "__main__":
    main()

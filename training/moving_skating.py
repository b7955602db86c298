"""The moving dogs and the moving-skating term fine-tuning holds them to.

The moving dogs: each epoch the network exported from the current weights drives the
runtime's own dogs (the Controller builds every input; speed tracking off) from the standing
keyframe, each first given a lead-in command (standing, or another speed) and then its own
asked speed, drawn log-uniform over the mocap's gaits, half of them turning, until it has
settled; the steps after that are kept: what a player's steady stick asks, which the mocap's
stretches (whose trajectory ahead is the clip's) never do.

The moving-skating term runs on batches of them, as free functions of their raw inputs and
predictions, with the mocap's reference by speed it is held to.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from canis.runtime.features import ACTIONS, INPUT, OUTPUT, PAW_ROWS
from canis.runtime.motion_metrics import SKATING_HEIGHT_CM
from canis.runtime.root import yaw_direction_xz
from canis.runtime.trajectory import ControlState
from canis.training.finetune_losses import _field, step_skating_cm, world_velocity_mps
from canis.training.torch_runtime import shown_step_m

SPEED_RANGE_MPS = (0.4, 3.6)  # the mocap's walks to its fast canters (the card asks 0.5-3.3)
TURNING_SHARE = 0.5  # of the dogs: turning at up to MAX_TURN_DEGPS either way (unless told)
MAX_TURN_DEGPS = 60.0
LEAD_IN_FRAMES = 60  # 1 s of the lead-in command: from standing, or from another speed
SETTLE_FRAMES = 120  # 2 s of the asked speed before the kept steps (the card settles 3 s)
KEPT_FRAMES = 120
FRAMES_PER_DOG = 16  # each dog's kept steps a batch takes, at random points of its stride
DOGS_PER_STEP = 8  # a batch's dogs: 128 steps, a quarter of the placed-stillness term's
MOVE = ACTIONS.index("move")


def root_speed_mps(y_raw: torch.Tensor) -> torch.Tensor:
    """(B,) the predicted root speed over the ground, as Controller.root_velocity_xz_mps's
    norm (the card's measure)."""
    velocity_mps = _field(OUTPUT, y_raw, "root_update", "velocity", [0])[:, 0]
    # The floor keeps the square root's gradient finite for a root that does not move.
    return velocity_mps.square().sum(-1).clamp(min=1e-12).sqrt()


def asked_commands(
    dogs: int, generator: np.random.Generator, max_turn_degps: float = MAX_TURN_DEGPS
):
    """(asked speed m/s, turn rate rad/s, lead-in speed m/s), each (dogs,): the asked speed
    log-uniform over SPEED_RANGE_MPS; half the dogs turning, uniform up to max_turn_degps
    either way; the lead-in standing for half of them, another such speed for the rest."""
    low, high = np.log(SPEED_RANGE_MPS)
    asked = np.exp(generator.uniform(low, high, dogs))
    turning = generator.random(dogs) < TURNING_SHARE
    turn_radps = np.where(
        turning, np.radians(generator.uniform(-max_turn_degps, max_turn_degps, dogs)), 0.0
    )
    other_mps = np.exp(generator.uniform(low, high, dogs))
    lead_in = np.where(generator.random(dogs) < 0.5, 0.0, other_mps)
    return asked, turn_radps, lead_in


def swapped_turn_radps(
    turn_radps: np.ndarray, turning_s: float, switch_s: float, phase_s: np.ndarray
) -> np.ndarray:
    """Each dog's turn rate (rad/s) `turning_s` seconds after it was first asked to turn, where
    it swaps sides every `switch_s` seconds (0: never), its first swap `switch_s - phase_s`
    seconds in (phase_s in [0, switch_s): the kept steps fall at every point after a swap).
    The controllers evaluation's turn swaps every 5 s (evaluate_controllers.TURN_SWITCH_S)."""
    if switch_s == 0:
        return turn_radps
    swaps = np.floor((turning_s + phase_s) / switch_s)
    return np.where(swaps % 2 == 0, turn_radps, -turn_radps)


def moving_inputs(
    model_path: Path,
    dogs: int,
    generator: np.random.Generator,
    kept_frames: int = KEPT_FRAMES,
    max_turn_degps: float = MAX_TURN_DEGPS,
    turn_switch_s: float = 0.0,
    phases_out: np.ndarray | None = None,
):
    """x (dogs, kept_frames, 480) as the Controller built it (speed tracking off) for dogs from
    the standing keyframe given their lead-in command for LEAD_IN_FRAMES, then asked their
    speed (and turn, swapping sides every turn_switch_s seconds where not 0) for SETTLE_FRAMES
    and kept_frames more; and each dog's asked speed (dogs,). Where phases_out (dogs,
    kept_frames) is given, the phase each kept step fed the network (PFNN's;
    zeros for the others)."""
    from canis.runtime.controller import DT_S, Controller
    from canis.runtime.inference import MotionModel

    asked, turn_radps, lead_in = asked_commands(dogs, generator, max_turn_degps)
    # Drawn after the commands, so that runs without swaps draw the dogs they drew before.
    phase_s = generator.uniform(0, turn_switch_s, dogs) if turn_switch_s else np.zeros(dogs)
    model = MotionModel(model_path, threads=1)
    controller = Controller(model, count=dogs, speed_tracking=False, stand_hold=False)
    facing_rad = controller.root_yaw_rad.copy()
    move = np.full(dogs, MOVE)
    xs = np.empty((dogs, kept_frames, INPUT.size), np.float32)
    first_kept = LEAD_IN_FRAMES + SETTLE_FRAMES
    for frame in range(first_kept + kept_frames):
        leading = frame < LEAD_IN_FRAMES
        speed = lead_in if leading else asked
        if not leading:
            turning_s = (frame - LEAD_IN_FRAMES) * DT_S
            rate = swapped_turn_radps(turn_radps, turning_s, turn_switch_s, phase_s)
            facing_rad = facing_rad + rate * DT_S
        velocity = speed[:, None] * yaw_direction_xz(facing_rad)
        if phases_out is not None and frame >= first_kept:
            phases_out[:, frame - first_kept] = controller.state.phase_rad
        x = controller.step(ControlState(velocity, facing_rad.copy(), move))
        if frame >= first_kept:
            xs[:, frame - first_kept] = x
    controller.close()
    return xs, asked


class MovingDogs:
    """Each epoch's moving dogs (moving_inputs, by the network exported from the weights the
    epoch starts from) and the moving-skating term over a batch of their steps
    (training/moving_skating.py), held to the mocap's paws by speed."""

    kept_frames = KEPT_FRAMES  # each dog's kept steps

    def __init__(
        self,
        model,
        saved: dict,
        data,
        standard,
        run_dir,
        dogs: int,
        skating,
        unroll: int = 1,
        max_turn_degps: float = MAX_TURN_DEGPS,
        turn_switch_s: float = 0.0,
        skating_options: dict | None = None,
    ):
        self.model, self.saved, self.data, self.standard = model, saved, data, standard
        self.path = Path(run_dir) / "moving.onnx"
        self.dogs = dogs
        self.skating = skating  # moving_skating.skating_by_speed's (centres, paws)
        # > 1: the term runs over stretches of this many steps, each step's input the recorded
        # one with the pose the previous prediction leaves (shown_pose.fed_back_input), so
        # its gradient follows the dog through the frames after a step.
        self.unroll = unroll
        self.max_turn_degps = max_turn_degps  # the turning dogs' fastest turn either way
        self.turn_switch_s = turn_switch_s  # the turning dogs swap sides this often (0: never)
        # moving_skating_loss's options (heights_both_ways, paws_down, skating_relative,
        # skating_scale, paws_swing, swing_below_mps), as the loss configuration names them.
        self.skating_options = skating_options or {}

    def refresh(self, generator: np.random.Generator) -> float:
        """New moving dogs; returns the seconds they took (the export included)."""
        import time

        from canis.training.onnx_graph import ExportedModel, write_wrapped

        started = time.perf_counter()
        write_wrapped(ExportedModel(self.model, self.data.normalisation), self.saved, self.path)
        # Each kept step's phase as the runtime fed it (PFNN's; zeros for the others).
        self.phases = np.zeros((self.dogs, self.kept_frames))
        self.xs, self.asked_mps = moving_inputs(
            self.path,
            self.dogs,
            generator,
            max_turn_degps=self.max_turn_degps,
            turn_switch_s=self.turn_switch_s,
            phases_out=self.phases,
        )
        return time.perf_counter() - started

    def _steps(
        self,
        predict,
        chosen: np.ndarray,
        generator: np.random.Generator,
        unroll: int | None = None,
    ):
        """(x raw, y raw, the kept step of each row) of FRAMES_PER_DOG steps of each chosen dog
        (or one stretch where `unroll` is longer), grouped by dog: stretches of `unroll` steps
        (self.unroll unless told) from random kept steps, the pose (and PFNN's phase, advanced
        by its predicted increment) fed back after the first, as the runtime feeds them."""
        from canis.training.torch_runtime import fed_back_input

        unroll = unroll or self.unroll
        stretches = max(1, FRAMES_PER_DOG // unroll)
        first = generator.integers(0, self.xs.shape[1] - unroll + 1, (len(chosen), stretches))
        width = self.xs.shape[2]
        x_raw = torch.as_tensor(self.xs[chosen[:, None], first].reshape(-1, width))
        phase_rad = torch.as_tensor(self.phases[chosen[:, None], first].reshape(-1)).float()
        xs_raw, ys_raw = [], []
        for k in range(unroll):
            x = self.standard.x_standard(x_raw)
            prediction = predict(x, phase_rad)
            y_raw = self.standard.y_raw(prediction)
            xs_raw.append(self.standard.x_raw(x))
            ys_raw.append(y_raw)
            if k + 1 < unroll:
                recorded = self.xs[chosen[:, None], first + k + 1].reshape(-1, width)
                x_raw = fed_back_input(x_raw, y_raw, torch.as_tensor(recorded))
                phase_rad = self.standard.next_phase_rad(phase_rad, prediction)
        grouped = [
            torch.stack(steps, 1).reshape(-1, steps[0].shape[1]) for steps in (xs_raw, ys_raw)
        ]
        frames = (first[..., None] + np.arange(unroll)).reshape(-1)
        return grouped[0], grouped[1], frames

    def _drawn_steps(self, predict, dogs: int, generator: np.random.Generator):
        """(the dogs drawn (dogs,), x raw, y raw, each row's kept step): _steps of `dogs` dogs
        drawn from this epoch's, the network run without dropout (as the game runs it)."""
        chosen = generator.choice(len(self.xs), dogs)
        self.model.eval()
        try:
            x_raw, y_raw, frames = self._steps(predict, chosen, generator)
        finally:
            self.model.train()
        return chosen, x_raw, y_raw, frames

    def loss(self, predict, dogs: int, generator: np.random.Generator) -> torch.Tensor:
        """moving_skating_loss over `dogs` dogs drawn from this epoch's, FRAMES_PER_DOG of each
        one's kept steps, the network run without dropout (as the game runs it)."""
        chosen, x_raw, y_raw, _ = self._drawn_steps(predict, dogs, generator)
        asked_mps = self.asked_mps[chosen]
        asked = torch.as_tensor(asked_mps, dtype=y_raw.dtype)
        reference = torch.as_tensor(reference_at(*self.skating, asked_mps), dtype=y_raw.dtype)
        return moving_skating_loss(x_raw, y_raw, reference, asked_mps=asked, **self.skating_options)


# The moving-skating term: the mocap's reference by speed, and the loss against it.
SPEED_BIN_MPS = 0.2
MIN_BIN_ROWS = 100  # a speed bin with fewer locomotion frames is left out of the reference


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
# (training/torch_runtime.py: drawn from the predicted axes, as the evaluation measures them) are
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

"""The moving dogs: each epoch the network exported from the current weights drives the
runtime's own dogs (the Controller builds every input; speed tracking off) from the standing
keyframe, each first given a lead-in command (standing, or another speed) and then its own
asked speed, drawn log-uniform over the mocap's gaits, half of them turning, until it has
settled; the steps after that are kept. The moving-skating term (training/moving_skating.py)
runs on batches of them: what a player's steady stick asks, which the mocap's stretches (whose
trajectory ahead is the clip's) never do."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from canis.runtime.features import ACTIONS, INPUT, OUTPUT
from canis.runtime.root import yaw_direction_xz
from canis.runtime.trajectory import ControlState
from canis.training.finetune_losses import _field

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
    controller = Controller(MotionModel(model_path, threads=1), count=dogs, speed_tracking=False)
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
        from canis.training.shown_pose import fed_back_input

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
        from canis.training.moving_skating import moving_skating_loss, reference_at

        chosen, x_raw, y_raw, _ = self._drawn_steps(predict, dogs, generator)
        asked_mps = self.asked_mps[chosen]
        asked = torch.as_tensor(asked_mps, dtype=y_raw.dtype)
        reference = torch.as_tensor(reference_at(*self.skating, asked_mps), dtype=y_raw.dtype)
        return moving_skating_loss(x_raw, y_raw, reference, asked_mps=asked, **self.skating_options)

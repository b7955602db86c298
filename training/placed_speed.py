"""The placed-speed term (issue 17): the runtime's own dogs, asked a speed with its speed tracking
off, brought to that speed.

The leg-motion and placed-stillness terms brought the skating and the legs' stiffness to the
mocap's (docs/EVALUATION.md in git history, the eleventh session, (PS1 x2)), but the dog they leave
no longer
reaches the speed it is asked when the runtime's speed tracking is off: 0.29 m/s asked 0.5, 0.88
asked 1.1, 3.91 asked 3.3 (its card; the shipped network's within 8%). The mocap's own frames
do not show this: there the trajectory ahead is the clip's, which the dog did follow. In the
game the trajectory's first samples start from the dog's own velocity (trajectory.extrapolate)
and bend toward the command, so a dog a little slow is shown a slow start and stays slow: the
speed it settles at is the network's, not the player's.

So each epoch, as the placed-stillness term's dogs, the network exported from the current
weights drives dogs through the runtime (the Controller builds every input; speed tracking
off): all from the standing keyframe (Controller.reset, where the demo and the card start),
each first given a lead-in command (standing, or another speed) and then its own asked speed,
drawn log-uniform over the mocap's gaits, half of them turning, until it has settled; the steps
after that are kept. The term is one step from a few of each dog's kept inputs, the network run
without dropout as in the game: the dog's mean predicted root speed over them against the speed
asked, relative, beyond SPEED_ALLOWANCE, squared. The mean over frames at different points of the
stride is what the card measures (a mean over seconds); each frame's own speed rises and falls
within a stride in the mocap too and is left free.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from canis.runtime.features import ACTIONS, INPUT, OUTPUT
from canis.runtime.root import yaw_direction_xz
from canis.runtime.trajectory import ControlState
from canis.runtime.transition_requests import slow_down_left
from canis.training.finetune_losses import _field

SPEED_RANGE_MPS = (0.4, 3.6)  # the mocap's walks to its fast canters (the card asks 0.5-3.3)
TURNING_SHARE = 0.5  # of the dogs: turning at up to MAX_TURN_DEGPS either way (unless told)
MAX_TURN_DEGPS = 60.0
LEAD_IN_FRAMES = 60  # 1 s of the lead-in command: from standing, or from another speed
SETTLE_FRAMES = 120  # 2 s of the asked speed before the kept steps (the card settles 3 s)
KEPT_FRAMES = 120
SPEED_ALLOWANCE = 0.05  # relative; the target is 10%
# The moving-gait term's draws: the key of their children of the epoch's seed (OwnDraws; the
# getting-up term's have none: theirs are the seed's spawned children).
GAIT_DRAWS_KEY = 6_017
FRAMES_PER_DOG = 16  # each dog's kept steps a batch takes, at random points of its stride
DOGS_PER_STEP = 8  # a batch's dogs: 128 steps, a quarter of the placed-stillness term's
MOVE, IDLE = ACTIONS.index("move"), ACTIONS.index("idle")


class OwnDraws:
    """A term's own generators, one per refresh: the children of the epoch generator's seed
    under the term's key and the refresh's number in the epoch. They draw nothing from the
    epoch's generator and spawn nothing (a spawn would move every later spawner's children),
    so adding the term leaves every other term's dogs and batches as they were; a resumed
    epoch (a new generator of the same seed) gets the same children again. Key () gives the
    children SeedSequence.spawn gives, in order."""

    def __init__(self, *key: int):
        self.key = key
        self.seed, self.taken = None, 0

    def next(self, generator: np.random.Generator) -> np.random.Generator:
        seed = generator.bit_generator.seed_seq
        if seed is not self.seed:  # a new epoch's (or a resumed epoch's) generator
            self.seed, self.taken = seed, 0
        child = np.random.SeedSequence(
            seed.entropy, spawn_key=(*seed.spawn_key, *self.key, self.taken)
        )
        self.taken += 1
        return np.random.default_rng(child)


def root_speed_mps(y_raw: torch.Tensor) -> torch.Tensor:
    """(B,) the predicted root speed over the ground, as Controller.root_velocity_xz_mps's
    norm (the card's measure)."""
    velocity_mps = _field(OUTPUT, y_raw, "root_update", "velocity", [0])[:, 0]
    # The floor keeps the square root's gradient finite for a root that does not move.
    return velocity_mps.square().sum(-1).clamp(min=1e-12).sqrt()


def placed_speed_loss(y_raw: torch.Tensor, asked_mps: torch.Tensor) -> torch.Tensor:
    """y_raw (dogs * frames, ...) grouped by dog, asked_mps (dogs,): the mean over the dogs of
    the squared excess of |mean predicted speed - asked| / asked over SPEED_ALLOWANCE."""
    if len(asked_mps) == 0:
        return y_raw.new_zeros(())
    mean_mps = root_speed_mps(y_raw).reshape(len(asked_mps), -1).mean(1)
    relative = (mean_mps - asked_mps).abs() / asked_mps
    return (relative - SPEED_ALLOWANCE).clamp(min=0).square().mean()


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
    stop_from_frames: np.ndarray | None = None,
    headings_out: np.ndarray | None = None,
    phases_out: np.ndarray | None = None,
):
    """x (dogs, kept_frames, 480) as the Controller built it (speed tracking off) for dogs from
    the standing keyframe given their lead-in command for LEAD_IN_FRAMES, then asked their
    speed (and turn, swapping sides every turn_switch_s seconds where not 0) for SETTLE_FRAMES
    and kept_frames more; and each dog's asked speed (dogs,). Where stop_from_frames (dogs,)
    is given, each dog is asked to stop at that kept step as a player letting go asks
    (posture_requests.slow_down_left: its speed falling to zero, then idle). Where headings_out
    (dogs, kept_frames, 2) is given, each kept step's (asked facing minus the root's yaw before
    it, rad; asked turn rate, rad/s) is written there (training/finetune_moving.py); where
    phases_out (dogs, kept_frames) is given, the phase each kept step fed the network (PFNN's;
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
        action = move
        if stop_from_frames is not None:
            left = slow_down_left(np.maximum(frame - first_kept - stop_from_frames, 0))
            speed = speed * left
            action = np.where(left > 0, MOVE, IDLE)
        velocity = speed[:, None] * yaw_direction_xz(facing_rad)
        if headings_out is not None and frame >= first_kept:
            headings_out[:, frame - first_kept, 0] = facing_rad - controller.root_yaw_rad
            headings_out[:, frame - first_kept, 1] = rate  # kept steps are past the lead-in
        if phases_out is not None and frame >= first_kept:
            phases_out[:, frame - first_kept] = controller.state.phase_rad
        x = controller.step(ControlState(velocity, facing_rad.copy(), action))
        if frame >= first_kept:
            xs[:, frame - first_kept] = x
    controller.close()
    return xs, asked


class MovingDogs:
    """Each epoch's moving dogs (moving_inputs, by the network exported from the weights the
    epoch starts from) and the terms over a batch of their steps: the placed-speed term, the
    moving-legs term (training/finetune_moving.py) when given the mocap's legs by speed, and the
    moving-skating term (training/finetune_moving.py) when given the mocap's paws by speed."""

    kept_frames = KEPT_FRAMES  # each dog's kept steps (at most: a subclass's may keep fewer)

    def __init__(
        self,
        model,
        saved: dict,
        data,
        standard,
        run_dir,
        dogs: int,
        legs=None,
        unroll: int = 1,
        legs_both_ways: bool = False,
        skating=None,
        max_turn_degps: float = MAX_TURN_DEGPS,
        turn_switch_s: float = 0.0,
        skating_options: dict | None = None,
        course: bool = False,
        gait=None,
        legs_below_mps: float = 0.0,
    ):
        self.model, self.saved, self.data, self.standard = model, saved, data, standard
        self.path = Path(run_dir) / "moving.onnx"
        self.dogs = dogs
        self.legs = legs  # None, or leg_turn_by_speed's (centres m/s, turn deg/frame)
        # > 1: the terms run over stretches of this many steps, each step's input the recorded
        # one with the pose the previous prediction leaves (shown_pose.fed_back_input), so
        # their gradient follows the dog through the frames after a step.
        self.unroll = unroll
        self.legs_both_ways = legs_both_ways  # the moving-legs term counts motion beyond too
        self.legs_below_mps = legs_below_mps  # > 0: the moving-legs term on dogs asked under it
        self.skating = skating  # None, or finetune_moving.skating_by_speed's (centres, paws)
        self.max_turn_degps = max_turn_degps  # the turning dogs' fastest turn either way
        self.turn_switch_s = turn_switch_s  # the turning dogs swap sides this often (0: never)
        # moving_skating_loss's options (heights_both_ways, paws_down, skating_relative,
        # skating_scale, paws_swing, swing_below_mps), as the loss configuration names them.
        self.skating_options = skating_options or {}
        # The moving-course term (training/finetune_moving.py) runs on these dogs: each kept
        # step's asked facing and turn rate are recorded with it.
        self.course = course
        self.headings = None
        # None, or finetune_moving.gait_by_speed's (centres m/s, lateral and diagonal correlation):
        # the moving-gait term's reference (training/finetune_moving.py, gait_loss).
        self.gait = gait
        self.gait_draws = OwnDraws(GAIT_DRAWS_KEY)

    def refresh(self, generator: np.random.Generator) -> float:
        """New moving dogs; returns the seconds they took (the export included)."""
        import time

        from canis.training.onnx_graph import ExportedModel, write_wrapped

        started = time.perf_counter()
        write_wrapped(ExportedModel(self.model, self.data.normalisation), self.saved, self.path)
        # Each kept step's phase as the runtime fed it (PFNN's; zeros for the others), which
        # _driven fills in.
        self.phases = np.zeros((self.dogs, self.kept_frames))
        self.xs, self.asked_mps = self._driven(generator)
        if self.gait is not None:
            self.gait_generator = self.gait_draws.next(generator)
        return time.perf_counter() - started

    def _driven(self, generator: np.random.Generator):
        """moving_inputs's (x, asked speed) for this refresh's dogs, by the network exported
        (their headings into self.headings where the course term runs)."""
        if self.course or self.gait is not None:
            self.headings = np.zeros((self.dogs, KEPT_FRAMES, 2))
        return moving_inputs(
            self.path,
            self.dogs,
            generator,
            max_turn_degps=self.max_turn_degps,
            turn_switch_s=self.turn_switch_s,
            headings_out=self.headings,
            phases_out=self.phases,
        )

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

    def gait_loss(self, predict, dogs: int) -> torch.Tensor:
        """moving_gait_loss over `dogs` dogs drawn from this epoch's dogs asked straight ahead
        (by the term's own generator), each unrolled over a
        window of GAIT_WINDOW_FRAMES of its kept steps from a random one, its pose fed back, the
        network run without dropout (as the game runs it); 0 where there is no such dog."""
        from canis.training.finetune_moving import (
            GAIT_WINDOW_FRAMES,
            moving_gait_loss,
            reference_at,
            soft_contacts,
        )

        # The turning dogs are left out: held to the mocap's pattern at their speed (mostly
        # straight frames), the first runs turned with their legs nearly still, a shuffle whose
        # paws never lift has no correlation, as the slow walk's reference almost has.
        held = np.flatnonzero((self.headings[..., 1] == 0).all(1))
        if len(held) == 0:
            return torch.zeros(())
        generator = self.gait_generator
        chosen = generator.choice(held, dogs)
        self.model.eval()
        try:
            x_raw, y_raw, _ = self._steps(predict, chosen, generator, GAIT_WINDOW_FRAMES)
        finally:
            self.model.train()
        contacts = soft_contacts(x_raw, y_raw).reshape(dogs, GAIT_WINDOW_FRAMES, -1)
        reference = reference_at(*self.gait, self.asked_mps[chosen])
        return moving_gait_loss(contacts, torch.as_tensor(reference, dtype=contacts.dtype))

    def loss(self, predict, dogs: int, generator: np.random.Generator):
        """(placed_speed_loss, moving_legs_loss or 0, moving_skating_loss or 0,
        moving_course_loss or 0) over `dogs` dogs drawn from this epoch's, FRAMES_PER_DOG of
        each one's kept steps, the network run without dropout (as the game runs it)."""
        from canis.training.finetune_moving import (
            moving_course_loss,
            moving_legs_loss,
            moving_skating_loss,
            reference_at,
        )

        chosen, x_raw, y_raw, frames = self._drawn_steps(predict, dogs, generator)
        asked_mps = self.asked_mps[chosen]
        asked = torch.as_tensor(asked_mps, dtype=y_raw.dtype)
        speed = placed_speed_loss(y_raw, asked)
        legs = skating = course = y_raw.new_zeros(())
        if self.legs is not None:
            reference = torch.as_tensor(reference_at(*self.legs, asked_mps), dtype=y_raw.dtype)
            counted = (
                torch.as_tensor(asked_mps < self.legs_below_mps) if self.legs_below_mps else None
            )
            legs = moving_legs_loss(x_raw, y_raw, reference, self.legs_both_ways, counted)
        if self.skating is not None:
            reference = torch.as_tensor(reference_at(*self.skating, asked_mps), dtype=y_raw.dtype)
            skating = moving_skating_loss(
                x_raw, y_raw, reference, asked_mps=asked, **self.skating_options
            )
        if self.course:
            rows_per_dog = len(frames) // dogs
            headings = self.headings[np.repeat(chosen, rows_per_dog), frames]
            course = moving_course_loss(y_raw, headings, dogs)
        return speed, legs, skating, course

"""What Controller.transition_to checks and works out before a transition starts: the target
keyframe as the transition network reads it, the action the dogs are handed back with, and
where each of them will stand.

Postures asked for while a dog moves: the motion network brings it to a stop first, the way
a dog slows, and the transition network takes it to the posture once it is nearly still.

A transition started from a walk, trot or canter asks the RTN to turn a fast gait into a sit
or a lie in one go: measured in the demo's setup (45 frames, foot lock, flat or hills), the
shown joints then move up to 18 cm in one frame (trot -> beg, in the target blend) and MANN's
lie after a canter throws the head 35 cm in one frame after the hand-back, where from a stand
no frame moves more than 4.7 cm (docs/RESULTS.md, "Postures asked while moving"). Stopping
first costs 0.6-1.0 s, in which the dog is seen to slow, and the transition then starts from
the context the RTN handles best: a still dog (7.1 cm at most in a frame).

    postures = PostureRequests(controller)
    started = postures.request("sit", 45, characters=[0])  # [] unless the dog is still
    started = postures.step(control)                # instead of controller.step(control)
    for start in started: ...                       # the TransitionStarts begun this frame

While a dog waits, step() asks it, whatever `control` says, for a speed that falls from its
own to zero over SLOW_DOWN_S, straight ahead where it faced (a recording of the controls, which
stores a speed along the facing, replays it exactly), and then for the idle action; the
transition starts when its root speed is below STOP_SPEED_MPS or after MAX_STOP_S. A new
request replaces a waiting one; cancel() drops them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from canis.runtime.actions import Action, action_index, action_indices
from canis.runtime.arguments import per_dog, random_generator
from canis.runtime.features import ACTIONS, FPS
from canis.runtime.poses import KEYFRAME_ACTIONS, Keyframe, keyframe_pose
from canis.runtime.posture_waits import PostureWait
from canis.runtime.root import wrap_angle_rad, yaw_direction_xz, yaw_from_direction
from canis.runtime.skeleton import Skeleton
from canis.runtime.state import DogState, dog_rows
from canis.runtime.trajectory import ControlState
from canis.runtime.transition import check_transition_request
from canis.runtime.transition_frames import (
    CONTEXT_FRAMES,
    MAX_TRANSITION_FRAMES,
    MIN_TRANSITION_FRAMES,
    frame_vector,
)
from canis.runtime.transition_player import LEAD_FRAMES


@dataclass
class TransitionStart:
    """What Controller.transition_to started: where each asked dog will stand when the
    transition hands it back (ask for that facing afterwards, so the dog stays put)."""

    characters: np.ndarray  # (n,) the dogs it drives: their rows when it was asked
    final_xz_m: np.ndarray  # (n, 2) world
    final_yaw_rad: np.ndarray  # (n,)
    frames: int  # steps from the request until the dogs are handed back
    ids: np.ndarray | None = None  # (n,) int64 the same dogs' ids (runtime/dog_ids.py)


def stopping_point(state: DogState, rows, moving_s: float, slowing_s: float):
    """Where a character moving as now comes to rest if it goes on for `moving_s`, then slows
    evenly to a stop over `slowing_s`: half the distance and half the turn it would make at
    its current rates over that time."""
    directions = state.history.directions_xz[rows]
    turn_rate = (
        wrap_angle_rad(
            yaw_from_direction(directions[:, -1]) - yaw_from_direction(directions[:, -2])
        )
        * FPS
    )
    seconds = moving_s + 0.5 * slowing_s
    yaw = wrap_angle_rad(state.root_yaw_rad[rows] + turn_rate * seconds)
    xz = state.root_xz_m[rows] + state.root_velocity_xz_mps[rows] * seconds
    return xz, yaw


def target_keyframe(
    keyframes: dict[str, Keyframe], target: str | Keyframe, action, caller: str = "transition_to"
) -> tuple[Keyframe, int]:
    """The keyframe `target` names (or is), checked, and the action index the dogs are handed
    back with: `action` (a name, an Action or an index; runtime/actions.py), by default the
    keyframe's own network label."""
    keyframe = keyframes.get(target) if isinstance(target, str) else target
    if keyframe is None:
        raise ValueError(
            f"{caller}: no keyframe {target!r}; the library has {', '.join(keyframes)}"
        )
    keyframe = keyframe.checked()
    if action is None:
        return keyframe, ACTIONS.index(KEYFRAME_ACTIONS.get(keyframe.name, "idle"))
    return keyframe, action_index(action)


# Target frames already made, by the keyframe's content (the library's are asked for again and
# again): its FK was a third of what asking for a transition cost. An entry holds its
# skeleton, so the skeleton's id is not reused while it is here.
_TARGET_FRAMES: dict[tuple, tuple[Skeleton, np.ndarray]] = {}
_TARGET_FRAMES_KEPT = 32


def target_frame(skeleton: Skeleton, keyframe: Keyframe, n: int) -> np.ndarray:
    """(n, FRAME_SIZE) the keyframe as the transition network's target frame, at rest."""
    rotations = np.asarray(keyframe.local_rotations)
    key = (id(skeleton), float(keyframe.hips_height_m), rotations.dtype.str, rotations.tobytes())
    made = _TARGET_FRAMES.get(key)
    if made is None or made[0] is not skeleton:
        pose = keyframe_pose(skeleton, keyframe)
        made = (skeleton, frame_vector(np.zeros((1, 2)), np.zeros(1), pose))
        if len(_TARGET_FRAMES) >= _TARGET_FRAMES_KEPT:
            _TARGET_FRAMES.clear()
        _TARGET_FRAMES[key] = made
    return np.repeat(made[1], n, axis=0)


def target_placement(
    s: DogState, rows: np.ndarray, frames: int, at_xz_m=None, yaw_rad=None
) -> tuple[np.ndarray, np.ndarray]:
    """Where the dogs `rows` stand when handed back, (n, 2) and (n,): `at_xz_m` / `yaw_rad`
    where given, by default where each would stop if it went on through the lead, then
    slowed evenly over the transition's `frames`."""
    n = len(rows)
    xz, yaw = stopping_point(s, rows, LEAD_FRAMES / FPS, (frames + 1) / FPS)
    if at_xz_m is not None:
        xz = per_dog(at_xz_m, (n, 2), "at_xz_m", "transition_to", broadcast=True)
    if yaw_rad is not None:
        yaw = per_dog(yaw_rad, (n,), "yaw_rad", "transition_to", broadcast=True)
    if not (np.all(np.isfinite(xz)) and np.all(np.isfinite(yaw))):
        raise ValueError("transition_to: the transition's target position or yaw is not finite")
    return xz, yaw


# Slow enough to start a transition: between the 0.1 and 0.2 m/s tried (stopping at once, on
# the hills), which made little difference to the transition (walk -> lie: 7.8 and 7.5 cm in
# its worst frame; trot -> lie: 3.5 and 3.6), where the lower one made the stop from a walk
# 37 frames long instead of 23.
STOP_SPEED_MPS = 0.15
# The asked speed falls to zero over this long: asked for zero at once, a trotting dog's
# joints moved up to 10.5 cm in a frame (its trot's own worst is 9.1); over 0.3 s, 8.7 cm,
# and the stop from a canter takes 1.07 s instead of 0.77 (flat ground, shipped MANN-8).
SLOW_DOWN_S = 0.3
# A dog that does not settle (turning on the spot, on a slope) starts its transition anyway:
# the shipped MANN-8 stops from a 3.3 m/s canter in 0.75 s.
MAX_STOP_S = 1.5


def slow_down_left(frames_since_request):
    """The share of its speed a stopping dog is still asked, `frames_since_request` frames
    after the stop was asked (0 at the request: all of it), falling to 0 over SLOW_DOWN_S."""
    left = 1.0 - frames_since_request / (SLOW_DOWN_S * FPS)
    # A dog waiting in the demo asks one number a frame, where numpy's call costs ten times it.
    return np.maximum(left, 0.0) if isinstance(left, np.ndarray) else max(left, 0.0)


class PostureRequests:
    """Transitions that wait for each asked dog to stop (module docstring). The waiting
    requests are the controller's (Controller.posture_waits, by dog id): they follow their
    dog through add() and remove(), go with a removed dog, are in get_state(), and a
    PostureRequests made after set_state() (in a fresh process, say) sees the restored ones."""

    def __init__(self, controller, stop_speed_mps: float = STOP_SPEED_MPS):
        self.controller = controller
        self.stop_speed_mps = stop_speed_mps

    @property
    def requests(self) -> dict[int, PostureWait]:
        """The waiting requests by dog id, in the order they were asked."""
        return self.controller.posture_waits

    def request(
        self,
        target: str | Keyframe,
        frames: int = 30,
        characters=None,
        action=None,
        variation: float = 0.0,
        seed: int | None = None,
        ids=None,
    ) -> list[TransitionStart]:
        """Asks `characters` (rows or a mask) or `ids` (default all) for a transition to
        `target` (as Controller.transition_to, `variation` and `seed` included). Dogs already
        slower than the stop speed start it now (their TransitionStart is returned); the
        others stop first and start in a later step()."""
        c = self.controller
        if c.transition_model is None:
            raise RuntimeError("PostureRequests needs Controller(transition_model=...)")
        rows = c._rows_named(characters, ids, "request")
        # Checked now, so that a bad target, length or action fails here and not frames later.
        target_keyframe(c.keyframes, target, action, "request")
        c.transition_model.target_noise(0, variation, caller="request: variation")
        random_generator(seed, "request: seed")
        if not MIN_TRANSITION_FRAMES <= frames <= MAX_TRANSITION_FRAMES:
            raise ValueError(
                f"request: a transition of {frames} frames; the transition network was trained "
                f"on {MIN_TRANSITION_FRAMES} to {MAX_TRANSITION_FRAMES}"
            )
        label = None if action is None else action_index(action)
        for row in rows:
            self.requests[int(c.state.dog_id[row])] = PostureWait(
                target,
                int(frames),
                label,
                float(c.root_yaw_rad[row]),
                float(np.linalg.norm(c.root_velocity_xz_mps[row])),
                float(variation),
                seed,
            )
        return self._start_ready()

    def waiting(self) -> np.ndarray:
        """(N,) dogs that are stopping before their transition."""
        return np.isin(self.controller.state.dog_id, list(self.requests))

    def cancel(self, characters=None, ids=None) -> None:
        """Drops the waiting requests of `characters` (rows or a mask) or `ids` (default
        all): they move as told again."""
        c = self.controller
        for row in c._rows_named(characters, ids, "cancel"):
            self.requests.pop(int(c.state.dog_id[row]), None)

    def _waiting_rows(self) -> list[tuple[int, int, PostureWait]]:
        """(dog id, its row, its request) of every waiting request, in the order asked."""
        ids = list(self.requests)
        rows = self.controller.rows(ids) if ids else []
        return [(dog, int(row), self.requests[dog]) for dog, row in zip(ids, rows, strict=True)]

    def control(self, control: ControlState) -> ControlState:
        """`control` with every waiting dog asked to slow down to a stop, facing where it faced
        when asked, then to idle."""
        if not self.requests:
            return control
        velocity = np.array(control.velocity_mps, dtype=np.float64)
        facing = np.array(control.facing_yaw_rad, dtype=np.float64)
        action = action_indices(control.action).copy()
        for _, row, r in self._waiting_rows():
            left = slow_down_left(r.waited_frames)
            velocity[row] = left * r.speed_mps * yaw_direction_xz(r.facing_yaw_rad)
            facing[row] = r.facing_yaw_rad
            action[row] = int(Action.MOVE if left > 0 else Action.IDLE)
        return replace(control, velocity_mps=velocity, facing_yaw_rad=facing, action=action)

    def step(self, control: ControlState) -> list[TransitionStart]:
        """One controller step with the waiting dogs stopping; returns the transitions that
        started after it (one TransitionStart per target asked)."""
        self.controller.step(self.control(control))
        for request in self.requests.values():
            request.waited_frames += 1
        return self._start_ready()

    def _start_ready(self) -> list[TransitionStart]:
        """Starts the waiting dogs that are slow enough, or have waited MAX_STOP_S."""
        c = self.controller
        speeds = np.linalg.norm(c.root_velocity_xz_mps, axis=1)
        groups: dict[tuple, tuple[PostureWait, list[int]]] = {}
        for dog, row, r in self._waiting_rows():
            if speeds[row] < self.stop_speed_mps or r.waited_frames >= MAX_STOP_S * FPS:
                del self.requests[dog]
                groups.setdefault(r.group(), (r, []))[1].append(row)
        return [
            c.transition_to(
                r.target, r.frames, rows, action=r.action, variation=r.variation, seed=r.seed
            )
            for r, rows in groups.values()
        ]


def start_transition(
    controller,
    target: str | Keyframe,
    frames: int,
    characters,
    at_xz_m,
    yaw_rad,
    action: str | None,
    variation: float,
    seed: int | None,
) -> TransitionStart:
    """Controller.transition_to: the request checked, then handed to the controller's
    transition player (in the profiler's transition stage)."""
    if controller.transition_model is None:
        raise RuntimeError("transition_to needs Controller(transition_model=...)")
    rng = controller.rng if seed is None else random_generator(seed, "transition_to: seed")
    if isinstance(frames, bool) or not isinstance(frames, (int, np.integer)):
        raise ValueError(f"transition_to: frames must be a whole number, got {frames!r}")
    keyframe, action_label = target_keyframe(controller.keyframes, target, action)
    rows = (
        np.arange(controller.count)
        if characters is None
        else dog_rows(characters, controller.count, "transition_to")
    )
    n = len(rows)
    s = controller.state
    with controller.profiler.stage("transition"):
        target_xz, target_yaw = target_placement(s, rows, frames, at_xz_m, yaw_rad)
        target = target_frame(controller.skeleton, keyframe, n)
        # The context the RTN would read now: its length, shapes and values are checked
        # before anything changes (the one it reads ends LEAD_FRAMES later).
        check_transition_request(
            s.frame_history[rows], np.zeros((n, CONTEXT_FRAMES, 4)), target, frames
        )
        noise = controller.transition_model.target_noise(
            n, variation, rng, "transition_to: variation"
        )
        # A dog taken from a transition that is playing goes to the motion network for the
        # new one's lead: the display eases over the difference, as at a hand-back.
        s.handback_pending[rows] |= controller.transitions.playing[rows]
        controller.transitions.start(
            rows, s, target, target_xz, target_yaw, frames, action_label, noise
        )
    controller.profiler.instant(
        "transition start", to=keyframe.name, frames=frames, dogs=rows.tolist()
    )
    ids = controller.state.dog_id[rows].copy()
    return TransitionStart(rows, target_xz, target_yaw, LEAD_FRAMES + frames + 1, ids)

"""Player input -> ControlState, independent of the device (gamepad through pygame's SDL game
controller API, or the keyboard; demo/devices.py reads them).

Movement is camera-relative: the left stick (or WASD/arrows) points where the dog should go as
seen on screen. Stick deflection sets the speed up to a walk/pace; the right trigger (or Shift)
raises the top speed to a canter. Bumpers (or Q/E) turn on the spot. Face buttons (or number
keys) pick an action; moving switches to "move", and a posture (sit, beg, lie) holds until
the dog moves or is told to idle. A posture asked while the stick is held holds until the stick
is let go and pushed again (the dog stops and sits rather than getting up at once). Actions are
the API's names (runtime/actions.py): the begging pose is "beg"; the keyframe "stand" is the
dog on four legs, which the action "idle" gets it back to. A jump is one press: the jump action
is asked for JUMP_HOLD_S (one leap of the shipped MANN-8 from a stand or a walk), then the dog
moves on or stands; pressing again while it jumps does nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from canis.runtime.actions import ACTION_NAMES, action_index
from canis.runtime.features import ACTIONS
from canis.runtime.poses import KEYFRAME_ACTIONS
from canis.runtime.root import wrap_angle_rad, yaw_direction_xz
from canis.runtime.trajectory import ControlState

DEAD_ZONE = 0.15  # stick deflection ignored around the centre (radial)
TRIGGER_DEAD_ZONE = 0.05
WALK_TOP_SPEED_MPS = 1.1  # full stick without the trigger: the paper's pace speed
CANTER_TOP_SPEED_MPS = 3.3  # full stick and full trigger: the paper's canter speed
TURN_RATE_RADPS = math.radians(120.0)
POSTURES = ("sit", "beg", "lie")
# The keyframe each action that holds a pose is reached through: the inverse of
# KEYFRAME_ACTIONS, whose actions are the network's labels ("stand" is its begging label).
POSTURE_KEYFRAMES = {
    ACTION_NAMES[ACTIONS.index(label)]: name for name, label in KEYFRAME_ACTIONS.items()
}
# How long one press asks for "jump": the evaluation's jump (evaluation/controllers.py)
# holds it as long; held 0.8 s or more the shipped MANN-8 leaps again (measured from a stand
# and a 1.1 m/s walk: 1 leap at 0.35-0.5 s, 2-3 at 0.8 s).
JUMP_HOLD_S = 0.5


@dataclass
class InputFrame:
    """One frame of player input, whatever the device. Sticks are -1..1 with +y up/forward."""

    move: tuple[float, float] = (0.0, 0.0)  # left stick / WASD: (right, forward)
    boost: float = 0.0  # right trigger / Shift, 0..1
    turn: float = 0.0  # bumpers / Q-E: -1 turn right .. +1 turn left
    action: str | None = None  # an action button pressed this frame
    next_transition: bool = False  # Start / X key: transition to the next keyframe (RTN)


@dataclass
class PlayerControl:
    """Turns input frames into a ControlState for one dog, keeping what must persist."""

    facing_yaw_rad: float = 0.0
    action: str = "idle"
    rejected_inputs: int = 0  # frames whose axes held NaN or inf (treated as released)
    jumps: int = 0  # jumps started (one per press)
    jump_left_s: float = 0.0  # how much longer the current jump is asked for
    # A posture asked while the stick was held: the held stick does not move the dog until
    # it is let go (one press of sit, one sit, as one press of jump is one jump).
    posture_over_held_move: bool = False
    _last_move: np.ndarray = field(default_factory=lambda: np.zeros(2))

    def hold(self, action: str) -> None:
        """The dog is to hold `action` (a posture the transition network takes it to): a move
        stick held now does not move it until let go."""
        self.action = action
        self.posture_over_held_move = True

    def update(self, frame: InputFrame, camera_yaw_rad: float, dt_s: float) -> ControlState:
        move, boost, turn = self._sanitised(frame)
        magnitude = float(np.linalg.norm(move))
        if magnitude <= DEAD_ZONE:
            self.posture_over_held_move = False
        if magnitude > DEAD_ZONE and not self.posture_over_held_move:
            # Rescale so speed rises from zero at the dead zone's edge to full at the rim.
            strength = min(1.0, (magnitude - DEAD_ZONE) / (1.0 - DEAD_ZONE))
            top = WALK_TOP_SPEED_MPS + boost * (CANTER_TOP_SPEED_MPS - WALK_TOP_SPEED_MPS)
            # Screen-space (right, forward) turned into the world by the camera's yaw.
            right, forward = move / magnitude
            yaw = camera_yaw_rad + math.atan2(-right, forward)
            velocity = strength * top * yaw_direction_xz(yaw)
            self.facing_yaw_rad = yaw
            if self.action != "jump":
                self.action = "move"
        else:
            velocity = np.zeros(2)
            self.facing_yaw_rad = wrap_angle_rad(
                self.facing_yaw_rad + turn * TURN_RATE_RADPS * dt_s
            )
            if self.action == "move":
                self.action = "move" if abs(turn) > 0 else "idle"
        if self.action == "jump":
            self.jump_left_s -= dt_s
            if self.jump_left_s <= 1e-9:  # the leap is done: carry on moving, or stand
                self.action = "move" if magnitude > DEAD_ZONE or abs(turn) > 0 else "idle"
        if frame.action is not None:
            if frame.action not in ACTION_NAMES:
                raise ValueError(
                    f"unknown action {frame.action!r}; actions: {', '.join(ACTION_NAMES)}"
                )
            if frame.action == "jump":
                if self.action != "jump":  # one press, one jump
                    self.jumps += 1
                    self.jump_left_s = JUMP_HOLD_S
                    self.action = "jump"
            else:
                self.action = frame.action
                if frame.action in POSTURES and magnitude > DEAD_ZONE:
                    self.hold(frame.action)
                    velocity = np.zeros(2)
        return ControlState(
            velocity[None], np.array([self.facing_yaw_rad]), np.array([action_index(self.action)])
        )

    def _sanitised(self, frame: InputFrame):
        values = np.array([*frame.move, frame.boost, frame.turn], dtype=np.float64)
        if not np.all(np.isfinite(values)):
            self.rejected_inputs += 1
            values = np.where(np.isfinite(values), values, 0.0)
        move = np.clip(values[:2], -1.0, 1.0)
        boost = float(np.clip(values[2], 0.0, 1.0))
        boost = 0.0 if boost < TRIGGER_DEAD_ZONE else boost
        return move, boost, float(np.clip(values[3], -1.0, 1.0))

"""Recording what the player asked for as a control script (the format of canis run --script),
which replays exactly: every event states the facing, the speed along it and the action, so
the replayed ControlState of each frame is the one that was recorded.

A recording is a JSON object: the events under "events", and what canis run needs to start
where the demo did: the model (a shipped model's name, else its path), the terrain, the dog's
start on the ground, whether the speed tracking used the model's speed curve, and the length
(tools/script.py reads it; a bare list of events is a script too).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from canis.runtime.actions import ACTION_NAMES
from canis.runtime.assets import model_reference
from canis.runtime.features import FPS
from canis.runtime.root import yaw_from_direction
from canis.runtime.trajectory import ControlState

RECORDING_FORMAT = 1


class InputRecorder:
    def __init__(
        self,
        model: Path,
        terrain: str,
        start_xz_m=(0.0, 0.0),
        start_yaw_rad: float = 0.0,
        speed_calibration: bool = False,
    ):
        self.header = {
            "canis_recording": RECORDING_FORMAT,
            "model": model_reference(model),
            "terrain": terrain,
            "start": {"xz_m": [float(v) for v in start_xz_m], "yaw_rad": float(start_yaw_rad)},
            "speed_calibration": bool(speed_calibration),
        }
        self.events: list[dict] = []
        self.frame = 0
        self._last: tuple | None = None

    def add(self, control: ControlState) -> None:
        """Records one frame's control (character 0)."""
        velocity = control.velocity_mps[0]
        speed = float(np.linalg.norm(velocity))
        # The player's dog faces where it moves; when it stands, the asked facing is kept.
        facing = (
            float(yaw_from_direction(velocity))
            if speed > 1e-9
            else float(control.facing_yaw_rad[0])
        )
        # Exact floats: JSON round-trips them, and a rounded time can land an event a frame late.
        state = (facing, speed, int(control.action[0]))
        if state != self._last:
            self.events.append(
                {
                    "t": self.frame / FPS,
                    "facing": state[0],
                    "move": [0, 1] if speed > 1e-9 else [0, 0],
                    "speed": state[1],
                    "turn": 0.0,
                    "action": ACTION_NAMES[state[2]],  # the API's names: "beg", not "stand"
                }
            )
            self._last = state
        self.frame += 1

    def add_foot_lock(self, enabled: bool) -> None:
        """Records the foot lock's state from this frame on (at the start and when toggled)."""
        self.events.append({"t": self.frame / FPS, "foot_lock": bool(enabled)})

    def add_transition(
        self, to: str, frames: int, variation: float = 0.0, seed: int | None = None
    ) -> None:
        """Records a transition asked for this frame (before the frame's control is added); a
        sampled one with its variation and seed, so that the replay samples the same."""
        asked = {"to": to, "frames": frames}
        if variation > 0:
            asked |= {"variation": variation, "seed": seed}
        self.events.append({"t": self.frame / FPS, "transition": asked})

    def add_ik(self, enabled: bool) -> None:
        """Records whether the terrain IK is on from this frame on."""
        self.events.append({"t": self.frame / FPS, "ik": bool(enabled)})

    def add_reset(self) -> None:
        """R: the dog stands at the origin again (the player's facing and action start over)."""
        self.events.append({"t": self.frame / FPS, "reset": True})
        self._last = None

    def save(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        events = self.events or [{"t": 0.0}]  # nothing happened: still a valid script
        recording = self.header | {"seconds": self.frame / FPS, "events": events}
        path.write_text(json.dumps(recording, indent=0) + "\n")
        return path

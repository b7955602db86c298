"""The demo's keyboard, mouse and gamepad bindings: what each key does, the help line that
lists them, and the input frame read from the gamepad while one is attached, else the keyboard.

Keys: WASD/arrows move (camera-relative), Shift canters, Q/E turn on the spot, 1 stand
(idle: on four legs), 2 sit, 3 beg (on the hind legs), 4 lie, Space jump; mouse drag or
J/L/I/K orbit the camera, scroll zooms; X transition to the next keyframe (stand, sit, lie,
beg), P pause, N single step, M slow motion, G toggle IK, F foot lock, B body or bones, R reset,
T next terrain, F1 next model (the shipped MANN-8, MANN-8 fp32, PFNN in turn; the HUD names
the one shown), F5 record the input as a script, F12 screenshot, H hide help,
Escape quit.
"""

from __future__ import annotations

import numpy as np
from canis.demo.input import InputFrame
from canis.runtime.features import FPS
from canis.runtime.terrain import load_terrain

CAMERA_KEY_RATE_RADPS = 1.5
HELP = (
    "WASD/arrows move  Shift canter  Q/E turn  Space jump  1 stand 2 sit 3 beg 4 lie  "
    "X next keyframe  V vary them  R reset",
    "drag/JLIK camera  wheel zoom  P pause  N step  M slow  G IK  F foot lock  B bones  T terrain"
    "  C dog (--rig)",
    "F1 model {models}  F5 record  F12 screenshot  H help  Esc quit",
)
ACTION_KEYS = {"_1": "idle", "_2": "sit", "_3": "beg", "_4": "lie", "SPACE": "jump"}


def help_lines(model_names: list[str]) -> list[str]:
    """HELP with the models F1 cycles, in its order (the shipped ones: MANN-8, which is the
    int8 MANN-8, then MANN-8 fp32 and PFNN; --model gives one, and F1 then has none to
    switch to)."""
    models = " > ".join(model_names) if len(model_names) > 1 else f"(only {model_names[0]})"
    return [text.format(models=models) for text in HELP]


class KeyBindings:
    """DemoApp's input handlers (pushed on the window with it) and its input frame."""

    def input_frame(self) -> InputFrame:
        """The gamepad's input while one is attached, else the keyboard's."""
        pad = self.gamepad.poll() if self.gamepad is not None else None
        if pad is not None:
            frame, (yaw_rate, pitch_rate) = pad
            self.camera["yaw"] += yaw_rate / FPS
            self.camera["pitch"] = float(
                np.clip(self.camera["pitch"] + pitch_rate / FPS, 0.05, 1.4)
            )
            if self.pending_action is not None and frame.action is None:
                frame.action = self.pending_action
            self.pending_action = None
            if self.input_source != "gamepad":
                self.notice.say("gamepad connected: it drives the dog")
            self.input_source = "gamepad"
            if frame.next_transition:
                self.next_transition()
            return frame
        if self.input_source == "gamepad":
            kept = "; the recording goes on" if self.recorder is not None else ""
            self.notice.say(f"gamepad unplugged: the keyboard drives the dog{kept}", 6.0)
        self.input_source = "keyboard"
        k, keys = self.key, self.keys
        forward = (keys[k.W] or keys[k.UP]) - (keys[k.S] or keys[k.DOWN])
        right = (keys[k.D] or keys[k.RIGHT]) - (keys[k.A] or keys[k.LEFT])
        boost = 1.0 if keys[k.LSHIFT] or keys[k.RSHIFT] else 0.0
        turn = float(keys[k.Q]) - float(keys[k.E])
        frame = InputFrame(
            move=(float(right), float(forward)), boost=boost, turn=turn, action=self.pending_action
        )
        self.pending_action = None
        return frame

    def on_key_press(self, symbol, modifiers) -> None:
        k = self.key
        name = k.symbol_string(symbol)
        if name in ACTION_KEYS:
            self.pending_action = ACTION_KEYS[name]
        elif symbol == k.X:
            self.next_transition()
        elif symbol == k.V:
            self.toggle_varied_transitions()
        elif symbol == k.P:
            self.paused = not self.paused
        elif symbol == k.N:
            self.pending_steps += 1
        elif symbol == k.M:
            self.slow_motion = not self.slow_motion
        elif symbol == k.C:
            self._save_recording_first("C")
            self.rig_choice.next()
            self._new_controller()
            self.notice.say(f"showing the {self.rig_choice.name}")
        elif symbol == k.G:
            self.shown.ik.enabled = not self.shown.ik.enabled
            if self.recorder is not None:
                self.recorder.add_ik(self.shown.ik.enabled)
        elif symbol == k.F:
            lock = self.shown.foot_lock
            lock.enabled = not lock.enabled
            if self.recorder is not None:
                self.recorder.add_foot_lock(lock.enabled)
        elif symbol == k.R:
            self.reset()
        elif symbol == k.T:
            self._save_recording_first("T")
            self.terrain_index = (self.terrain_index + 1) % len(self.terrains)
            self.heightmap = load_terrain(self.terrain_name)
            if self.rig_choice.dogs is not None:  # the rig stands on it; the network is flat
                self.rig_choice.dogs.terrain = self.heightmap
            else:
                self.controller.terrain = self.heightmap
            self.scene.set_terrain(self.heightmap)
        elif symbol == k.F1:
            self._save_recording_first("F1")
            self.model_index = (self.model_index + 1) % len(self.model_names)
            self._new_controller()
            self.notice.say(
                f"model {self.model_name} ({self.model_index + 1} of {len(self.model_names)}; "
                f"F1 cycles {' > '.join(self.model_names)})"
            )
        elif symbol == k.F12:
            self.screenshot()
        elif symbol == k.H:
            self.show_help = not self.show_help
        elif symbol == k.B:
            self.scene.show_body = not self.scene.show_body
        elif symbol == k.F5:
            self.toggle_recording()

    def on_mouse_drag(self, x, y, dx, dy, buttons, modifiers) -> None:
        self.camera["yaw"] -= dx * 0.01
        self.camera["pitch"] = float(np.clip(self.camera["pitch"] + dy * 0.01, 0.05, 1.4))

    def on_mouse_scroll(self, x, y, scroll_x, scroll_y) -> None:
        self.camera["distance"] = float(np.clip(self.camera["distance"] * 0.9**scroll_y, 1.0, 15.0))

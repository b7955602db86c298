"""Gamepads through pygame's SDL game-controller API, with hot-plug.

The mapping from raw axes and buttons to an InputFrame is a pure function (tested with
synthetic values); GamepadReader around it only talks to SDL. Left stick moves, right stick
orbits the camera, right trigger canters, bumpers turn on the spot, A jumps, B sits, X lies
down, Y begs (on the hind legs), Back idles. Unplugging drops back to the keyboard on the next
frame; plugging a pad in again picks it up.
"""

from __future__ import annotations

import logging
import os

from canis.demo.input import InputFrame

log = logging.getLogger("canis.demo")
AXIS_RANGE = 32767.0
CAMERA_RATE_RADPS = 2.5
BUTTON_ACTIONS = {"a": "jump", "b": "sit", "x": "lie", "y": "beg", "back": "idle"}
TRANSITION_BUTTON = "start"


def frame_from_pad(axes: dict[str, float], pressed: set[str], previously: set[str]):
    """(InputFrame, camera (yaw, pitch) rates in rad/s) from raw SDL axis values (sticks
    -32768..32767 with up negative, triggers 0..32767) and the buttons held now and before."""

    def axis(name):
        return max(-1.0, min(1.0, axes.get(name, 0.0) / AXIS_RANGE))

    move = (axis("leftx"), -axis("lefty"))
    turn = float("leftshoulder" in pressed) - float("rightshoulder" in pressed)
    new = [b for b in BUTTON_ACTIONS if b in pressed and b not in previously]
    frame = InputFrame(
        move=move,
        boost=max(0.0, axis("triggerright")),
        turn=turn,
        action=BUTTON_ACTIONS[new[0]] if new else None,
        next_transition=TRANSITION_BUTTON in pressed and TRANSITION_BUTTON not in previously,
    )
    camera = (-axis("rightx") * CAMERA_RATE_RADPS, -axis("righty") * CAMERA_RATE_RADPS)
    return frame, camera


class GamepadReader:
    """The first attached game controller, or None when there is none."""

    AXES = ("leftx", "lefty", "rightx", "righty", "triggerleft", "triggerright")
    BUTTONS = ("a", "b", "x", "y", "back", "start", "leftshoulder", "rightshoulder")

    def __init__(self):
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # events only; pyglet draws
        os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
        import pygame
        from pygame._sdl2 import controller

        self.pygame, self.controller_module = pygame, controller
        pygame.display.init()
        controller.init()
        self.pad = None
        self.previously: set[str] = set()
        self._open_first()

    @classmethod
    def open(cls) -> GamepadReader | None:
        try:
            return cls()
        except Exception as error:  # no SDL/pygame here: the keyboard still works
            log.info("no gamepad support (%s); keyboard only", error)
            return None

    def _open_first(self) -> None:
        c = self.controller_module
        for index in range(c.get_count()):
            if c.is_controller(index):
                self.pad = c.Controller(index)
                log.info("gamepad connected: %s", c.name_forindex(index))
                return

    def poll(self):
        """(InputFrame, camera rates) from the pad, or None to use the keyboard."""
        pg = self.pygame
        for event in pg.event.get((pg.CONTROLLERDEVICEADDED, pg.CONTROLLERDEVICEREMOVED)):
            if event.type == pg.CONTROLLERDEVICEREMOVED:
                self.pad = None
                log.info("gamepad removed: keyboard")
            elif self.pad is None:
                self._open_first()
        if self.pad is None or not self.pad.attached():
            self.pad = None
            return None
        axes = {
            name: float(self.pad.get_axis(getattr(pg, f"CONTROLLER_AXIS_{name.upper()}")))
            for name in self.AXES
        }
        pressed = {
            name
            for name in self.BUTTONS
            if self.pad.get_button(getattr(pg, f"CONTROLLER_BUTTON_{name.upper()}"))
        }
        result = frame_from_pad(axes, pressed, self.previously)
        self.previously = pressed
        return result

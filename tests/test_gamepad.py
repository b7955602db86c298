"""The gamepad path through pygame's SDL, with a virtual game controller that SDL itself
provides (SDL_JoystickAttachVirtual in the SDL that pygame bundles, reached with ctypes): SDL
reports it as an attached game controller, and sets its axes and buttons as a pad would."""

import ctypes
import glob
import os

import pytest

pygame = pytest.importorskip("pygame")

# SDL_GameControllerAxis / SDL_GameControllerButton order, which a virtual game controller uses.
AXES = {"leftx": 0, "lefty": 1, "rightx": 2, "righty": 3, "triggerleft": 4, "triggerright": 5}
BUTTONS = {"a": 0, "b": 1, "x": 2, "y": 3, "back": 4, "start": 6, "leftshoulder": 9}


class VirtualPad:
    def __init__(self):
        found = glob.glob(
            os.path.join(os.path.dirname(pygame.__file__), "..", "pygame.libs", "libSDL2-*.so*")
        )
        if not found:
            pytest.skip("no bundled SDL2 beside pygame to attach a virtual controller to")
        sdl = ctypes.CDLL(found[0])  # the same library pygame has loaded
        if not hasattr(sdl, "SDL_JoystickAttachVirtual"):
            pytest.skip("SDL older than 2.0.14: no virtual joysticks")
        sdl.SDL_JoystickOpen.restype = ctypes.c_void_p
        sdl.SDL_JoystickSetVirtualAxis.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int16]
        sdl.SDL_JoystickSetVirtualButton.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint8]
        self.sdl = sdl
        self.index = sdl.SDL_JoystickAttachVirtual(1, len(AXES), 15, 0)  # 1: game controller
        assert self.index >= 0
        self.joystick = sdl.SDL_JoystickOpen(self.index)

    def set(self, axes=None, buttons=None):
        for name, value in (axes or {}).items():
            self.sdl.SDL_JoystickSetVirtualAxis(self.joystick, AXES[name], int(value))
        for name, down in (buttons or {}).items():
            self.sdl.SDL_JoystickSetVirtualButton(self.joystick, BUTTONS[name], int(down))
        self.sdl.SDL_JoystickUpdate()

    def unplug(self):
        self.sdl.SDL_JoystickClose(ctypes.c_void_p(self.joystick))
        self.sdl.SDL_JoystickDetachVirtual(self.index)


def test_a_virtual_pad_drives_the_demo_and_unplugging_hands_over_to_the_keyboard(
    tiny_model, tmp_path
):
    pytest.importorskip("pyglet")
    from canis.demo.app import DemoApp
    from canis.demo.devices import GamepadReader

    reader = GamepadReader.open()
    if reader is None:
        pytest.skip("pygame's SDL game controller API is not usable here")
    pad = VirtualPad()
    try:
        app = DemoApp({"tiny": tiny_model}, headless=True, width=320, height=200, gamepad=False)
    except Exception as error:
        pad.unplug()
        pytest.skip(f"no off-screen OpenGL here: {error}")
    app.gamepad = reader
    pad.set(axes={"triggerleft": -32768, "triggerright": -32768})  # triggers at rest
    app.input_frame()
    pad.set(axes={"lefty": -32768, "triggerright": 32767})  # stick up, trigger down
    frame = app.input_frame()
    assert app.input_source == "gamepad" and "gamepad connected" in app.notice.current
    assert frame.move == pytest.approx((0.0, 1.0)) and frame.boost == pytest.approx(1.0)
    app.out_dir = tmp_path
    app.toggle_recording()
    pad.set(buttons={"a": True})
    for _ in range(40):  # A held: one jump
        app.step()
    assert app.player.jumps == 1
    pad.set(axes={"lefty": 0}, buttons={"a": False, "b": True})  # stick released, B
    app.step()
    assert app.player.action == "sit"
    pad.unplug()
    app.step()
    assert app.input_source == "keyboard" and "keyboard drives the dog" in app.notice.current
    assert app.recorder is not None and app.recorder.frame == 42  # the recording goes on
    assert app.toggle_recording().parent == tmp_path

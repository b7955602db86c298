import math

import numpy as np
import pytest
from canis.demo.input import (
    CANTER_TOP_SPEED_MPS,
    DEAD_ZONE,
    WALK_TOP_SPEED_MPS,
    InputFrame,
    PlayerControl,
)
from canis.runtime.features import ACTIONS

DT = 1 / 60


def speed_and_yaw(control):
    v = control.velocity_mps[0]
    return float(np.linalg.norm(v)), math.atan2(v[0], v[1])


def test_dead_zone_then_walk_then_canter():
    player = PlayerControl()
    assert speed_and_yaw(player.update(InputFrame(move=(0.0, DEAD_ZONE * 0.9)), 0.0, DT))[0] == 0
    walk = player.update(InputFrame(move=(0.0, 1.0)), 0.0, DT)
    assert speed_and_yaw(walk)[0] == pytest.approx(WALK_TOP_SPEED_MPS)
    assert ACTIONS[walk.action[0]] == "move"
    canter = player.update(InputFrame(move=(0.0, 1.0), boost=1.0), 0.0, DT)
    assert speed_and_yaw(canter)[0] == pytest.approx(CANTER_TOP_SPEED_MPS)
    half = player.update(InputFrame(move=(0.0, (1 + DEAD_ZONE) / 2)), 0.0, DT)
    assert speed_and_yaw(half)[0] == pytest.approx(WALK_TOP_SPEED_MPS / 2)


def test_movement_is_camera_relative():
    player = PlayerControl()
    # Stick right with the camera looking along +z: the dog goes to screen-right, which is
    # world -x (the dog's left is +x when facing +z).
    _, yaw = speed_and_yaw(player.update(InputFrame(move=(1.0, 0.0)), 0.0, DT))
    assert yaw == pytest.approx(-math.pi / 2)
    # The same stick with the camera turned a quarter left now means world +z.
    _, yaw = speed_and_yaw(player.update(InputFrame(move=(1.0, 0.0)), math.pi / 2, DT))
    assert yaw == pytest.approx(0.0, abs=1e-9)
    assert player.facing_yaw_rad == pytest.approx(0.0, abs=1e-9)


def test_turning_on_the_spot_and_postures():
    player = PlayerControl()
    control = player.update(InputFrame(turn=1.0), 0.0, 0.5)
    assert np.allclose(control.velocity_mps, 0) and control.facing_yaw_rad[0] > 0.9
    sit = player.update(InputFrame(action="sit"), 0.0, DT)
    assert ACTIONS[sit.action[0]] == "sit"
    assert ACTIONS[player.update(InputFrame(), 0.0, DT).action[0]] == "sit"  # a posture holds
    moving = player.update(InputFrame(move=(0.0, 1.0)), 0.0, DT)
    assert ACTIONS[moving.action[0]] == "move"
    assert ACTIONS[player.update(InputFrame(), 0.0, DT).action[0]] == "idle"


def test_one_press_is_one_jump_even_while_moving():
    from canis.demo.input import JUMP_HOLD_S

    player = PlayerControl()
    forward = InputFrame(move=(0.0, 1.0))
    actions = [ACTIONS[player.update(forward, 0.0, DT).action[0]] for _ in range(10)]
    actions += [
        ACTIONS[player.update(InputFrame(move=(0.0, 1.0), action="jump"), 0.0, DT).action[0]]
    ]
    # The move key stays held for two seconds, and Space is pressed again mid-leap.
    for frame in range(120):
        again = "jump" if frame == 5 else None
        actions.append(
            ACTIONS[player.update(InputFrame(move=(0.0, 1.0), action=again), 0.0, DT).action[0]]
        )
    jumping = np.array(actions) == "jump"
    assert player.jumps == 1
    assert jumping.sum() == round(JUMP_HOLD_S / DT)  # one stretch of the hold, not the key's
    assert (
        np.all(np.diff(jumping.astype(int)) >= -1)
        and np.sum(np.diff(jumping.astype(int)) == 1) == 1
    )
    assert actions[-1] == "move"
    player.update(InputFrame(action="jump"), 0.0, DT)  # from a stand: a jump, then idle
    assert ACTIONS[player.update(InputFrame(), 0.0, DT).action[0]] == "jump"
    for _ in range(round(JUMP_HOLD_S / DT)):
        last = player.update(InputFrame(), 0.0, DT)
    assert ACTIONS[last.action[0]] == "idle" and player.jumps == 2


def test_non_finite_axes_count_as_released():
    player = PlayerControl()
    control = player.update(InputFrame(move=(float("nan"), 1.0), boost=float("inf")), 0.0, DT)
    assert np.all(np.isfinite(control.velocity_mps)) and player.rejected_inputs == 1
    assert speed_and_yaw(control)[0] == pytest.approx(WALK_TOP_SPEED_MPS)
    with pytest.raises(ValueError, match="unknown action 'roll'"):
        player.update(InputFrame(action="roll"), 0.0, DT)


def test_gamepad_mapping_from_raw_sdl_values():
    from canis.demo.devices import frame_from_pad

    axes = {"leftx": 0.0, "lefty": -32768.0, "triggerright": 32767.0, "rightx": 16384.0}
    frame, (yaw_rate, pitch_rate) = frame_from_pad(axes, {"a", "leftshoulder"}, set())
    assert frame.move == pytest.approx((0.0, 1.0))  # stick up is forward
    assert frame.boost == pytest.approx(1.0) and frame.turn == 1.0
    assert frame.action == "jump" and yaw_rate < 0 and pitch_rate == 0
    held, _ = frame_from_pad(axes, {"a"}, {"a"})
    assert held.action is None  # an action fires on the press, not while held
    assert not held.next_transition
    start, _ = frame_from_pad(axes, {"start"}, set())
    assert (
        start.next_transition and not frame_from_pad(axes, {"start"}, {"start"})[0].next_transition
    )


def test_unplugged_gamepad_falls_back_to_the_keyboard_within_a_frame(tiny_model, tmp_path):
    pytest.importorskip("pyglet")
    from canis.demo.app import DemoApp
    from canis.demo.devices import frame_from_pad

    class FakePad:
        def __init__(self):
            self.attached = True

        def poll(self):
            if not self.attached:
                return None
            return frame_from_pad({"lefty": -32768.0}, set(), set())

    try:
        app = DemoApp(
            {"tiny": tiny_model},
            headless=True,
            width=320,
            height=200,
            gamepad=False,
            out_dir=tmp_path,
        )
    except Exception as error:
        pytest.skip(f"no off-screen OpenGL here: {error}")
    app.gamepad = FakePad()
    app.toggle_recording()
    for _ in range(5):
        app.step()
    assert app.input_source == "gamepad" and app.player.action == "move"
    app.gamepad.attached = False  # unplugged mid-drive, while recording
    assert app.input_frame().move == (0.0, 0.0) and app.input_source == "keyboard"
    assert "keyboard drives the dog" in app.notice.current
    assert "recording goes on" in app.notice.current
    app.step()
    assert app.recorder is not None and app.recorder.frame == 6  # nothing lost
    app.gamepad.attached = True  # plugged back in
    app.input_frame()
    assert app.input_source == "gamepad"

import math

import numpy as np
import pytest

from demo.input import (
    CANTER_TOP_SPEED_MPS,
    DEAD_ZONE,
    WALK_TOP_SPEED_MPS,
    InputFrame,
    PlayerControl,
)
from runtime.features import ACTIONS

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
    player.update(InputFrame(action="jump"), 0.0, DT)
    assert ACTIONS[player.update(InputFrame(), 0.0, DT).action[0]] == "idle"  # jump is a press


def test_non_finite_axes_count_as_released():
    player = PlayerControl()
    control = player.update(InputFrame(move=(float("nan"), 1.0), boost=float("inf")), 0.0, DT)
    assert np.all(np.isfinite(control.velocity_mps)) and player.rejected_inputs == 1
    assert speed_and_yaw(control)[0] == pytest.approx(WALK_TOP_SPEED_MPS)
    with pytest.raises(ValueError, match="unknown action 'roll'"):
        player.update(InputFrame(action="roll"), 0.0, DT)

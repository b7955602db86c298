import numpy as np
import pytest

from runtime.features import ACTIONS
from runtime.trajectory import (
    FUTURE_TIMES_S,
    ControlState,
    bias_weights,
    blend,
    extrapolate,
    path_speed_mps,
    smoothing_factor,
)


def test_smoothing_halves_the_gap_every_half_life():
    assert smoothing_factor(0.15, 0.15) == pytest.approx(0.5)
    assert smoothing_factor(0.30, 0.15) == pytest.approx(0.25)


def test_bias_weights_rise_from_now_to_the_horizon():
    weights = bias_weights(FUTURE_TIMES_S)
    assert np.all(np.diff(weights) > 0) and weights[-1] == pytest.approx(1.0)
    assert bias_weights(np.array([0.0]))[0] == 0.0
    assert weights[0] > FUTURE_TIMES_S[0]  # a bias above 1 reaches the command early


def state(velocity_xz=(0.0, 1.0), yaw=0.0, command_xz=(0.0, 1.0), command_yaw=0.0):
    idle = np.eye(6)[[0]]
    move = np.eye(6)[[1]]
    return dict(
        root_position_m=np.zeros((1, 3)),
        root_velocity_mps=np.array([[velocity_xz[0], 0.0, velocity_xz[1]]]),
        root_yaw_rad=np.array([yaw]),
        action_weights=idle,
        commanded_velocity_mps=np.array([command_xz]),
        commanded_yaw_rad=np.array([command_yaw]),
        commanded_actions=move,
    )


def test_steady_motion_extrapolates_to_a_straight_line():
    future = extrapolate(**state())
    assert np.allclose(future.positions_m[0, :, 2], FUTURE_TIMES_S)
    assert np.allclose(future.positions_m[0, :, [0, 1]], 0.0)
    assert np.allclose(future.speeds_mps, 1.0)
    assert path_speed_mps(np.zeros((1, 3)), future.positions_m)[0] == pytest.approx(1.0)
    # Actions move from the current weights to the commanded ones along the second.
    assert future.actions[0, -1, ACTIONS.index("move")] == pytest.approx(1.0)
    assert np.all(np.diff(future.actions[0, :, ACTIONS.index("move")]) > 0)


def test_starting_from_rest_the_path_accelerates_and_turns_toward_the_command():
    future = extrapolate(**state(velocity_xz=(0, 0), command_xz=(1.0, 0.0), command_yaw=np.pi / 2))
    step = np.diff(np.concatenate([[[0, 0, 0]], future.positions_m[0]]), axis=0)[:, 0]
    assert np.all(np.diff(step) > 0)  # speeding up toward +x
    yaw = np.arctan2(future.directions[0, :, 0], future.directions[0, :, 2])
    assert np.all(np.diff(yaw) > 0) and yaw[-1] == pytest.approx(np.pi / 2)


def test_blend_by_tau():
    a = extrapolate(**state(command_xz=(0.0, 1.0)))
    b = extrapolate(**state(command_xz=(0.0, 3.0), velocity_xz=(0.0, 3.0)))
    mixed = blend(a, b, tau=0.25)
    assert np.allclose(mixed.positions_m, 0.25 * a.positions_m + 0.75 * b.positions_m)
    assert np.allclose(np.linalg.norm(mixed.directions, axis=-1), 1.0)
    assert blend(a, None, 0.5) is a


def test_control_validation():
    with pytest.raises(ValueError, match="non-finite"):
        ControlState.single((np.nan, 1.0)).validated(1)
    with pytest.raises(ValueError, match="must index 6 actions"):
        ControlState(np.zeros((1, 2)), np.zeros(1), np.array([9])).validated(1)
    fast = ControlState.single((0.0, 50.0), action="move").validated(1)
    assert np.linalg.norm(fast.velocity_mps) == pytest.approx(6.0)

import numpy as np
import pytest
from canis.runtime.features import ACTIONS
from canis.runtime.root import damp, damp_angle_rad, smoothing_factor
from canis.runtime.trajectory import (
    FUTURE_TIMES_S,
    ControlState,
    along_path,
    bias_weights,
)
from reference_frame import blend, extrapolate


def test_smoothing_halves_the_gap_every_half_life():
    assert smoothing_factor(0.15, 0.15) == pytest.approx(0.5)
    assert smoothing_factor(0.30, 0.15) == pytest.approx(0.25)
    assert damp(np.array([2.0, -2.0]), 1.0, 0.15, 0.15) == pytest.approx([1.5, -0.5])
    # Angles close the gap the short way round: from 3.0 rad to -2.9 rad is 0.38 rad across
    # +-pi, not 5.9 rad back through 0.
    halfway = damp_angle_rad(np.array([3.0]), np.array([-2.9]), 0.15, 0.15)[0]
    assert halfway == pytest.approx(-2.9 - 0.5 * (2 * np.pi - 5.9))


def test_bias_weights_rise_from_now_to_the_horizon():
    weights = bias_weights(FUTURE_TIMES_S)
    assert np.all(np.diff(weights) > 0) and weights[-1] == pytest.approx(1.0)
    assert bias_weights(np.array([0.0]))[0] == 0.0
    assert weights[0] > FUTURE_TIMES_S[0]  # a bias above 1 reaches the command early


def state(velocity_xz=(0.0, 1.0), yaw=0.0, command_xz=(0.0, 1.0), command_yaw=0.0):
    return dict(
        root_xz_m=np.zeros((1, 2)),
        root_velocity_xz_mps=np.array([velocity_xz]),
        root_yaw_rad=np.array([yaw]),
        action_weights=np.eye(6)[[0]],
        commanded_velocity_xz_mps=np.array([command_xz]),
        commanded_yaw_rad=np.array([command_yaw]),
        commanded_actions=np.eye(6)[[1]],
    )


def test_steady_motion_extrapolates_to_a_straight_line():
    future = extrapolate(**state())
    assert np.allclose(future.positions_xz_m[0, :, 1], FUTURE_TIMES_S)
    assert np.allclose(future.positions_xz_m[0, :, 0], 0.0)
    assert np.allclose(future.speeds_mps, 1.0)
    # Actions move from the current weights to the commanded ones along the second.
    assert future.actions[0, -1, ACTIONS.index("move")] == pytest.approx(1.0)
    assert np.all(np.diff(future.actions[0, :, ACTIONS.index("move")]) > 0)


def test_desired_speed_is_the_command_not_the_current_motion():
    future = extrapolate(**state(velocity_xz=(0.0, 3.0), command_xz=(0.0, 0.5)))
    assert np.allclose(future.speeds_mps, 0.5)
    assert future.velocities_xz_mps[0, 0, 1] > 1.0  # while the path still starts fast


def test_starting_from_rest_the_path_accelerates_and_turns_toward_the_command():
    future = extrapolate(**state(velocity_xz=(0, 0), command_xz=(1.0, 0.0), command_yaw=np.pi / 2))
    steps = np.diff(np.concatenate([[[0, 0]], future.positions_xz_m[0]]), axis=0)[:, 0]
    assert np.all(np.diff(steps) > 0)  # speeding up toward +x
    yaw = np.arctan2(future.directions_xz[0, :, 0], future.directions_xz[0, :, 1])
    assert np.all(np.diff(yaw) > 0) and yaw[-1] == pytest.approx(np.pi / 2)


def test_blend_by_tau():
    a = extrapolate(**state(command_xz=(0.0, 1.0)))
    b = extrapolate(**state(command_xz=(0.0, 3.0), velocity_xz=(0.0, 3.0)))
    mixed = blend(a, b, tau=0.25)
    assert np.allclose(mixed.positions_xz_m, 0.25 * a.positions_xz_m + 0.75 * b.positions_xz_m)
    assert np.allclose(np.linalg.norm(mixed.directions_xz, axis=-1), 1.0)
    assert blend(a, None, 0.5) is a


def test_control_validation():
    with pytest.raises(ValueError, match=r"velocity_mps is not finite \(NaN or inf\) in row"):
        ControlState.single((np.nan, 1.0)).validated(1)
    with pytest.raises(ValueError, match="must index 6 actions"):
        ControlState(np.zeros((1, 2)), np.zeros(1), np.array([9])).validated(1)
    fast = ControlState.single((0.0, 50.0), action="move").validated(1)
    assert np.linalg.norm(fast.velocity_mps) == pytest.approx(6.0)


def test_the_usual_controls_fast_check_gives_the_full_checks_values(rng):
    """validated()'s few-call path for the usual per-frame control gives the same bits as the
    full checks, and hands every other control to them."""
    n = 64
    usual = ControlState(
        rng.uniform(-4.0, 4.0, (n, 2)), rng.uniform(-20, 20, n), rng.integers(0, 6, n)
    )
    fast, full = usual._validated_usual(n), usual._validated_checked(n)
    for name in ("velocity_mps", "facing_yaw_rad", "action"):
        got, want = getattr(fast, name), getattr(full, name)
        assert got.dtype == want.dtype and np.array_equal(got, want), name
        assert not np.shares_memory(got, getattr(usual, name)), "a copy, safe to act on"
    others = {
        "a NaN velocity": ControlState(np.array([[np.nan, 0.0]]), np.zeros(1), np.ones(1, int)),
        "an infinite yaw": ControlState(np.zeros((1, 2)), np.array([np.inf]), np.ones(1, int)),
        "past 4 m/s": ControlState(np.array([[0.0, 4.5]]), np.zeros(1), np.ones(1, int)),
        "an action out of range": ControlState(np.zeros((1, 2)), np.zeros(1), np.array([6])),
        "float32": ControlState(np.zeros((1, 2), np.float32), np.zeros(1), np.ones(1, int)),
        "lists": ControlState([[0.0, 1.0]], [0.0], [1]),
        "action names": ControlState(np.zeros((1, 2)), np.zeros(1), np.array(["move"])),
        "another count": ControlState(np.zeros((2, 2)), np.zeros(2), np.ones(2, int)),
    }
    path = ControlState.single((0.0, 1.0), action="move")
    path.future_xz_m = np.zeros((1, 6, 2))
    others["a path"] = path
    for why, control in others.items():
        assert control._validated_usual(1) is None, why


@pytest.mark.parametrize("speed_mps", [1.5e154, 1e200, 1.7e308])
def test_speeds_whose_square_overflows_are_clamped_not_zeroed(speed_mps):
    """A script asking 1e200 m/s gave a standing dog: the norm overflowed to inf."""
    with np.errstate(over="raise"):  # and without an overflow on the way
        fast = ControlState.single((0.6 * speed_mps, 0.8 * speed_mps), action="move").validated(1)
    assert fast.velocity_mps[0] == pytest.approx([0.6 * 6.0, 0.8 * 6.0])


def test_a_path_future_replaces_the_desired_samples_where_given():
    """Row 0 follows a quarter circle; row 1 (NaN) keeps the extrapolated samples."""
    desired = extrapolate(**{k: np.repeat(v, 2, axis=0) for k, v in state().items()})
    angles = np.linspace(0.1, np.pi / 2, len(FUTURE_TIMES_S))
    arc = np.stack([2 - 2 * np.cos(angles), 2 * np.sin(angles)], axis=-1)
    future = np.stack([arc, np.full_like(arc, np.nan)])
    onto = along_path(desired, np.zeros((2, 2)), future)
    assert np.allclose(onto.positions_xz_m[0], arc)
    steps = np.diff(np.concatenate([[[0.0, 0.0]], arc]), axis=0)
    assert np.allclose(onto.velocities_xz_mps[0], steps / FUTURE_TIMES_S[0])
    # Facings turn along the arc: from nearly +z toward +x.
    assert onto.directions_xz[0, 0, 1] > 0.9 and onto.directions_xz[0, -1, 0] > 0.9
    assert np.allclose(np.linalg.norm(onto.directions_xz, axis=-1), 1.0)
    for name in ("positions_xz_m", "directions_xz", "velocities_xz_mps"):
        assert np.array_equal(getattr(onto, name)[1], getattr(desired, name)[1])


def test_a_path_that_barely_moves_keeps_the_commands_facing():
    """A path whose samples sway by millimetres about a standing dog (a clip's root at rest)
    has no heading: the facings stay the command's, not the sway's; a path that moves on at
    a walk faces along it; between, a blend."""
    from canis.runtime.trajectory import PATH_FACING_FULL_STEP_M

    desired = extrapolate(**{k: np.repeat(v, 3, axis=0) for k, v in state().items()})
    samples = len(FUTURE_TIMES_S)
    sway = np.random.default_rng(0).normal(0.0, 0.002, (samples, 2))  # metres
    step = PATH_FACING_FULL_STEP_M
    sideways = np.stack([np.arange(1, samples + 1) * step, np.zeros(samples)], axis=-1)
    future = np.stack([sway, sideways * 1.0, sideways * 0.5])
    onto = along_path(desired, np.zeros((3, 2)), future)
    facing = desired.directions_xz
    assert np.abs(onto.directions_xz[0] - facing[0]).max() < 0.05  # the sway is ignored
    assert np.allclose(onto.directions_xz[1], [1.0, 0.0])  # along the path (+x)
    half = onto.directions_xz[2]  # half the full step: between +x and the command's facing
    assert (half[:, 0] > 0.3).all() and (half @ facing[2][0] > 0.3).all()
    assert np.allclose(np.linalg.norm(onto.directions_xz, axis=-1), 1.0)


def test_path_future_validation():
    control = ControlState.single((0.0, 1.0), action="move")
    control.future_xz_m = np.zeros((1, 5, 2))
    with pytest.raises(ValueError, match=r"future_xz_m must have shape \(1, 6, 2\) for 1 dog"):
        control.validated(1)
    half = np.zeros((1, 6, 2))
    half[0, 3] = np.nan
    control.future_xz_m = half
    with pytest.raises(ValueError, match="all finite or all NaN"):
        control.validated(1)

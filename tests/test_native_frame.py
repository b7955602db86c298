"""The native per-frame math, the runtime's one path (runtime/pose.py,
native/src/root_motion.cpp, native/src/display_pose.cpp), pinned to its numpy definition
(tests/reference_frame.py: extrapolate, trajectory, advance_root, shown_pose):
each call on random states, and the closed loop of tests/fixtures/record_step_trace.py
(walking, trotting past the speed limit, turning, a path, transitions, hills with the foot
lock). They may differ only by rounding: a sine, a cosine or numpy's matmul rounds
differently from the C++ (measured: 2.2e-16 m on the roots over the 240 frames, the shown
pose bit for bit); a wrong field, sign or order differs by many orders of magnitude more."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import numpy as np
import pytest
from canis.runtime import _kinematics, pose
from canis.runtime.controller import DT_S, Controller
from canis.runtime.features import INPUT, OUTPUT, decode_output, write_input
from canis.runtime.inference import MotionModel
from canis.runtime.root import yaw_direction_xz
from canis.runtime.trajectory import ControlState, write_trajectory_rows
from canis.runtime.trajectory import extrapolate as native_extrapolate
from reference_frame import ReferenceController, advance_root, extrapolate, trajectory

sys.path.insert(0, str(Path(__file__).resolve().parent / "fixtures"))
import record_step_trace  # noqa: E402

ATOL = 1e-12  # float64 state: rounding is ~1e-16 of values of order 1-10


@pytest.fixture(scope="module")
def model(tiny_model):
    return MotionModel(tiny_model)


def moving_controller(model, count=3, frames=40) -> Controller:
    """Dogs walking and turning for `frames` steps (the numpy reference), so every field of
    the state (history, predicted future, commanded actions) holds something."""
    controller = ReferenceController(model, count=count)
    for frame in range(frames):
        facing = 0.9 * np.sin(frame / 9.0) + np.arange(count)
        speed = np.linspace(0.5, 3.0, count)[:, None]
        action = np.where((np.arange(count) == 1) & (frame > 20), 0, 1)  # dog 1 stops
        controller.step(ControlState(speed * yaw_direction_xz(facing), facing, action))
    return controller


def assert_close(got, expected, name, atol=ATOL):
    assert got.shape == expected.shape, name
    np.testing.assert_allclose(got, expected, rtol=0, atol=atol, err_msg=name)


def test_extrapolate_matches_numpy(rng):
    n = 9
    args = (
        rng.normal(size=(n, 2)) * 20,  # root (x, z)
        rng.normal(size=(n, 2)) * 2,  # root velocity
        rng.uniform(-np.pi, np.pi, n),  # root yaw
        rng.dirichlet(np.ones(6), n),  # action weights
        rng.normal(size=(n, 2)) * 3,  # commanded velocity
        rng.uniform(-np.pi, np.pi, n),  # commanded yaw: turns across +-pi included
        rng.dirichlet(np.ones(6), n),
    )
    expected, got = extrapolate(*args), native_extrapolate(*args)
    for name in ("positions_xz_m", "directions_xz", "velocities_xz_mps", "speeds_mps", "actions"):
        assert_close(getattr(got, name), getattr(expected, name), name)


@pytest.mark.parametrize("blended", [True, False])
def test_trajectory_rows_are_write_inputs(model, blended):
    controller = moving_controller(model)
    if not blended:
        controller.tau = 1.0  # the desired trajectory alone, as before a first prediction
    s = controller.state
    expected = write_input(trajectory(controller), s.pose)
    got = np.zeros_like(expected)
    write_trajectory_rows(
        s, controller.desired_future, controller.predicted_future, controller.tau, got
    )
    rows = INPUT.block_slice("trajectory")
    assert np.abs(expected[:, rows]).max() > 0.1  # something to compare
    # float32 x: the float64 values' rounding may flip the last bit of a float32
    assert_close(got[:, rows], expected[:, rows], "trajectory rows", atol=1e-6)
    assert not got[:, rows.stop :].any(), "wrote past the trajectory rows"


def test_advance_root_is_apply(model, rng):
    controller = moving_controller(model)
    y = rng.normal(size=(controller.count, OUTPUT.size))
    speed_now = rng.uniform(0, 3, controller.count)
    before = copy.deepcopy(controller.state)
    advance_root(controller.state, decode_output(y), speed_now, DT_S)
    expected, controller.state = controller.state, before
    history_arrays = [before.history.positions_xz_m, before.history.speeds_mps]
    pose.advance_root(before, decode_output(y), speed_now, DT_S)
    # the history is pushed in place (its arrays kept), the rest is new
    assert before.history.positions_xz_m is history_arrays[0]
    assert before.history.speeds_mps is history_arrays[1]
    for name in ("root_xz_m", "root_yaw_rad", "root_velocity_xz_mps", "action_weights"):
        assert_close(getattr(before, name), getattr(expected, name), name)
    for group in ("pose", "predicted_future", "history"):
        got, want = getattr(before, group), getattr(expected, group)
        for name in vars(want):
            assert_close(getattr(got, name), getattr(want, name), f"{group}.{name}")


def test_advance_root_takes_a_history_that_is_not_contiguous(model, rng):
    """A state built elsewhere (a game's, a snapshot's) may hold strided arrays: the call
    makes them contiguous rather than refusing or writing into a temporary copy."""
    controller = moving_controller(model, count=2, frames=5)
    s = controller.state
    s.history.positions_xz_m = np.asfortranarray(s.history.positions_xz_m)
    expected = copy.deepcopy(s)
    y = rng.normal(size=(2, OUTPUT.size))
    advance_root(expected, decode_output(y), np.ones(2), DT_S)
    pose.advance_root(s, decode_output(y), np.ones(2), DT_S)
    assert_close(s.history.positions_xz_m, expected.history.positions_xz_m, "history")


@pytest.mark.parametrize(
    "terrain_name, foot_lock", [("flat", None), ("hills", None), ("hills", False)]
)
def test_the_closed_loop_is_the_numpy_one(terrain_name, foot_lock):
    """The trace's scenario; on the hills without the foot lock the shown pose is the one
    native call (display._shown_pose_native) except through the transitions' hand-backs."""
    numpy_run = record_step_trace.run_scenario(terrain_name, False, foot_lock)
    native_run = record_step_trace.run_scenario(terrain_name, True, foot_lock)
    for name, expected in numpy_run.items():
        # x and the shown pose are float32; the roots float64, summed over 240 frames
        atol = 1e-10 if name.endswith("roots") else 1e-6
        assert_close(native_run[name], expected, name, atol=atol)


def test_a_wrong_shape_is_named():
    n, frames = 2, 51
    zeros = lambda *shape: np.zeros(shape)  # noqa: E731
    with pytest.raises(ValueError, match="history_actions"):
        _kinematics.trajectory_input(
            5, 0, 10,
            zeros(n, frames, 2), zeros(n, frames, 2), zeros(n, frames, 2),
            zeros(n, frames), zeros(n, frames - 1, 6),
            zeros(n, 2), zeros(n), zeros(n, 2), zeros(n, 6),
            zeros(n, 6, 2), zeros(n, 6, 2), zeros(n, 6, 2), zeros(n, 6), zeros(n, 6, 6),
            zeros(n, 6, 2), zeros(n, 6, 2), zeros(n, 6, 2),
            0.5, np.zeros((n, INPUT.size), np.float32), np.array([0, 2, 4, 6, 7], np.int32), 13,
        )  # fmt: skip
    with pytest.raises(ValueError, match="inside a row"):
        _kinematics.trajectory_input(
            5, 0, 10,
            zeros(n, frames, 2), zeros(n, frames, 2), zeros(n, frames, 2),
            zeros(n, frames), zeros(n, frames, 6),
            zeros(n, 2), zeros(n), zeros(n, 2), zeros(n, 6),
            zeros(n, 6, 2), zeros(n, 6, 2), zeros(n, 6, 2), zeros(n, 6), zeros(n, 6, 6),
            zeros(n, 6, 2), zeros(n, 6, 2), zeros(n, 6, 2),
            0.5, np.zeros((n, INPUT.size), np.float32), np.array([0, 2, 4, 6, 9], np.int32), 13,
        )  # fmt: skip


@pytest.mark.parametrize("offsets", [False, True], ids=["", "hand-back offsets"])
@pytest.mark.parametrize("locked", [False, True], ids=["no lock", "foot lock"])
@pytest.mark.parametrize("ground", ["hills", "flat", "flat, a paw below it"])
def test_the_shown_pose_in_one_call_is_shown_pose(model, ground, locked, offsets, rng):
    import reference_frame
    from canis.runtime.pose import shown_pose
    from canis.runtime.terrain import procedural

    controller = moving_controller(model)
    s = controller.state
    if ground.startswith("flat"):  # the hips high (no paw under), or low (paws pushed under)
        s.pose.positions_m[:, 0, 1] += -0.25 if ground.endswith("below it") else 0.25
    terrain = procedural("hills") if ground == "hills" else None
    lockable = np.ones(controller.count, dtype=bool)
    controller.foot_lock.enabled = locked
    if offsets:  # as start_handback_offsets leaves them: the hips' position, every axis
        offset = s.display_offset
        offset.positions_m[:, 0] = rng.normal(0, 0.05, (controller.count, 3))
        offset.forwards[:] = rng.normal(0, 0.05, offset.forwards.shape)
        offset.ups[:] = rng.normal(0, 0.05, offset.ups.shape)
    # The paws shown a frame ago: some 2 mm away (planted), some 2 cm (moving).
    s.paw_xz_m += rng.choice([0.002, 0.02], s.paw_xz_m.shape) * rng.choice([-1, 1], (1, 4, 2))
    results, states = {}, {}
    for native in (False, True):
        controller.ik.weight = np.full(controller.count, 0.5)  # easing in: the weight moves
        lock = copy.deepcopy(controller.foot_lock)  # each path from the same lock state
        states[native] = s.copy()  # each path updates the paws' tracked motion
        args = (controller.paws, states[native], offsets, lockable, controller.ik, lock)
        shown_with = shown_pose if native else reference_frame.shown_pose
        shown = shown_with(controller.skeleton, *args, terrain, DT_S)
        results[native] = shown + (controller.ik.weight.copy(),)
        if locked:
            assert lock.holding.any(), "some paw planted: the lock is at work"
    (positions, rotations, contacts, weight), expected = results[True], results[False]
    assert_close(positions, expected[0], "positions", atol=2e-6)
    assert_close(np.abs(rotations), np.abs(expected[1]), "rotations", atol=2e-6)
    assert contacts.dtype == bool and np.array_equal(contacts, expected[2])
    assert 0 < contacts.sum() < contacts.size, "planted and moving paws both"
    for name in ("paw_xz_m", "paw_speed_mps"):
        assert_close(getattr(states[True], name), getattr(states[False], name), name)
    assert not np.array_equal(states[False].paw_speed_mps, s.paw_speed_mps), "speeds updated"
    assert_close(weight, expected[3], "the IK's weight")
    if ground == "flat":
        assert weight[0] == 0.5, "no paw below flat ground: no IK, no easing"
    else:
        assert weight[0] > 0.5

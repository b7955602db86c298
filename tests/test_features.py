"""The feature contract: sizes, named parts, gating indices, and what y means."""

import numpy as np
import pytest
from canis.runtime import features as f
from canis.runtime.root import (
    body_facing,
    from_root_frame,
    to_root_frame,
    yaw_from_direction,
    yaw_quaternion,
)
from canis.runtime.rotations import quat_from_forward_up, quat_multiply, quat_normalize, quat_rotate


def test_sizes_follow_the_paper():
    assert f.INPUT.size == 12 * 13 + 27 * 12 == 480
    assert f.OUTPUT.size == 6 * 6 + 27 * 12 + 3 == 363
    assert len(f.gating_indices()) == 19
    assert f.TRAJECTORY_OFFSETS_FRAMES[f.CURRENT_SAMPLE] == 0
    assert f.FUTURE_OFFSETS_FRAMES == (10, 20, 30, 40, 50, 60)


def test_named_fields_are_writable_views_in_the_documented_order():
    x = np.zeros((2, f.INPUT.size), dtype=np.float32)
    f.INPUT.field(x, "trajectory", "speed")[:] = 7.0
    f.INPUT.field(x, "joints", "velocity")[1, 3] = [1, 2, 3]
    # Trajectory sample i's speed is its 7th value; joint 3's velocity its last three.
    assert np.flatnonzero(x[0] == 7.0).tolist() == [13 * i + 6 for i in range(12)]
    assert x[1, 156 + 12 * 3 + 9 : 156 + 12 * 4].tolist() == [1, 2, 3]
    with pytest.raises(KeyError, match="no field 'colour'"):
        f.INPUT.field(x, "joints", "colour")


def test_gating_input_is_paw_velocities_action_and_speed():
    x = np.arange(f.INPUT.size, dtype=np.float32)[None]
    gate = x[0, f.gating_indices()]
    paws_velocity = f.INPUT.field(x, "joints", "velocity")[0, list(f.PAW_ROWS)].reshape(-1)
    assert np.array_equal(gate[:12], paws_velocity)
    assert np.array_equal(gate[12:18], f.INPUT.field(x, "trajectory", "action")[0, 5])
    assert gate[18] == f.INPUT.field(x, "trajectory", "speed")[0, 5, 0]


def test_layout_hash_is_stable_and_tracks_the_contract(monkeypatch):
    first = f.layout_hash()
    assert first == f.layout_hash() and len(first) == 16
    monkeypatch.setattr(f, "ACTIONS", f.ACTIONS + ("swim",))
    assert f.layout_hash() != first


def random_world_state(rng, n, samples=12):
    yaw = rng.uniform(-np.pi, np.pi, size=n)
    root_rotation = yaw_quaternion(yaw)
    root_position = rng.normal(size=(n, 3)) * [3, 0, 3]
    trajectory = f.Trajectory(
        positions_m=rng.normal(size=(n, samples, 3)),
        directions=np.repeat(
            np.stack([np.sin(yaw), np.zeros(n), np.cos(yaw)], -1)[:, None], samples, axis=1
        ),
        velocities_mps=rng.normal(size=(n, samples, 3)),
        speeds_mps=rng.uniform(0, 3, size=(n, samples)),
        actions=np.full((n, samples, 6), 1 / 6),
    )
    pose = f.Pose(
        rng.normal(size=(n, 27, 3)),
        quat_normalize(rng.normal(size=(n, 27, 4))),
        rng.normal(size=(n, 27, 3)),
    )
    return root_position, root_rotation, trajectory, pose


def test_input_is_relative_to_the_root(rng):
    root_position, root_rotation, trajectory, pose = random_world_state(rng, 3)
    x = f.build_input(root_position, root_rotation, trajectory, pose)
    # Positions read back into the world through the root give the world positions.
    joints_local = f.INPUT.field(x, "joints", "position").astype(np.float64)
    assert np.allclose(
        from_root_frame(joints_local, root_position, root_rotation), pose.positions_m, atol=1e-5
    )
    # The sample directions were the root's own facing, so they read (0, 1): straight ahead.
    assert np.allclose(f.INPUT.field(x, "trajectory", "direction"), [0, 1], atol=1e-6)
    # Forward/up give back the joint rotations once composed with the root.
    forward = f.INPUT.field(x, "joints", "forward").astype(np.float64)
    up = f.INPUT.field(x, "joints", "up").astype(np.float64)
    world = quat_multiply(root_rotation[:, None], quat_from_forward_up(forward, up))
    assert np.allclose(np.abs(np.sum(world * pose.rotations, axis=-1)), 1.0, atol=1e-5)


def test_output_root_update_moves_the_old_root_onto_the_new(rng):
    previous_position, previous_rotation, future, pose = random_world_state(rng, 4, samples=6)
    step_local = np.array([[0.3, 0.0, 1.2]]) / 60  # a step in the previous root's frame
    position = (
        previous_position
        + quat_rotate(previous_rotation[:, None], step_local[None].repeat(4, 0))[:, 0]
    )
    rotation = quat_multiply(previous_rotation, yaw_quaternion(np.full(4, 0.02)))
    y = f.build_output(
        previous_position, previous_rotation, position, rotation, future, pose, dt_s=1 / 60
    )
    prediction = f.decode_output(y)
    assert np.allclose(prediction.root_velocity_mps, [[0.3, 1.2]] * 4, atol=1e-5)
    assert np.allclose(prediction.root_yaw_velocity_radps, 0.02 * 60, atol=1e-4)
    future_local = to_root_frame(future.positions_m, position, rotation)[..., [0, 2]]
    assert np.allclose(prediction.future_positions_m, future_local, atol=1e-5)


def test_body_facing_is_left_cross_up():
    from canis.runtime.skeleton import Skeleton, shipped_dog_skeleton_path

    dog = Skeleton.from_json(shipped_dog_skeleton_path())
    positions = np.zeros((1, 27, 3))
    for name, x in (
        ("LeftShoulder", 0.05),
        ("RightShoulder", -0.05),
        ("LeftUpLeg", 0.05),
        ("RightUpLeg", -0.05),
    ):
        positions[0, dog.index(name), 0] = x
    facing = body_facing(positions, dog)  # left toward +x, so facing +z
    assert np.allclose(facing, [[0, 0, 1]])
    assert yaw_from_direction(facing)[0] == pytest.approx(0.0)


def test_planar_root_frame_matches_the_quaternion_one(rng):
    from canis.runtime.root import from_root_xz, to_root_xz

    root_position, root_rotation, trajectory, _ = random_world_state(rng, 4)
    yaw = 2 * np.arctan2(root_rotation[:, 2], root_rotation[:, 0])
    planar = to_root_xz(trajectory.positions_m[..., [0, 2]], root_position[:, [0, 2]], yaw)
    full = to_root_frame(trajectory.positions_m, root_position, root_rotation)[..., [0, 2]]
    assert np.allclose(planar, full)
    back = from_root_xz(planar, root_position[:, [0, 2]], yaw)
    assert np.allclose(back, trajectory.positions_m[..., [0, 2]])

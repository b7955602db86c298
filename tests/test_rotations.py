import numpy as np
import pytest
from canis.runtime import rotations as r


def rotation_matrix(axis: str, angle: float) -> np.ndarray:
    c, s = np.cos(angle), np.sin(angle)
    return {
        "X": np.array([[1, 0, 0], [0, c, -s], [0, s, c]]),
        "Y": np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]]),
        "Z": np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]]),
    }[axis]


def test_euler_zxy_is_the_product_of_the_bvh_channel_rotations():
    angles = np.radians([30.0, -50.0, 110.0])
    expected = (
        rotation_matrix("Z", angles[0])
        @ rotation_matrix("X", angles[1])
        @ rotation_matrix("Y", angles[2])
    )
    assert np.allclose(r.quat_to_matrix(r.quat_from_euler(angles, "ZXY")), expected)


def test_quarter_turn_about_z_takes_x_to_y():
    q = r.quat_from_euler(np.radians([90.0, 0.0, 0.0]), "ZXY")
    assert np.allclose(r.quat_rotate(q, np.array([1.0, 0, 0])), [0, 1, 0])


@pytest.mark.parametrize("order", ["XYZ", "XZY", "YXZ", "YZX", "ZXY", "ZYX"])
def test_euler_round_trip_for_every_tait_bryan_order(order, rng):
    angles = rng.uniform(-np.pi, np.pi, size=(500, 3))
    angles[:, 1] = rng.uniform(-1.5, 1.5, size=500)  # away from gimbal lock for a unique answer
    q = r.quat_from_euler(angles, order)
    assert np.allclose(r.quat_to_euler(q, order), angles, atol=1e-9)
    # At gimbal lock the angles are not unique but the rotation must still be exact.
    locked = angles.copy()
    locked[:, 1] = np.pi / 2
    q_locked = r.quat_from_euler(locked, order)
    again = r.quat_from_euler(r.quat_to_euler(q_locked, order), order)
    assert np.max(r.quat_angle_rad(q_locked, again)) < 1e-6


def test_matrix_round_trip_including_half_turns(rng):
    q = r.quat_normalize(rng.normal(size=(1000, 4)))
    half_turns = r.quat_from_axis_angle(rng.normal(size=(20, 3)), np.full(20, np.pi))
    q = np.concatenate([q, half_turns])
    back = r.quat_from_matrix(r.quat_to_matrix(q))
    assert np.max(r.quat_angle_rad(q, back)) < 1e-7
    assert np.all(back[:, 0] >= 0)


def test_rotate_agrees_with_matrix(rng):
    q = r.quat_normalize(rng.normal(size=(100, 4)))
    v = rng.normal(size=(100, 3))
    assert np.allclose(r.quat_rotate(q, v), np.einsum("nij,nj->ni", r.quat_to_matrix(q), v))


def test_multiply_composes_rotations(rng):
    a, b = r.quat_normalize(rng.normal(size=(2, 50, 4)))
    assert np.allclose(
        r.quat_to_matrix(r.quat_multiply(a, b)), r.quat_to_matrix(a) @ r.quat_to_matrix(b)
    )
    assert np.allclose(r.quat_multiply(a, r.quat_conjugate(a)), r.quat_identity((50,)))


def test_forward_up_round_trip(rng):
    q = r.quat_normalize(rng.normal(size=(200, 4)))
    forward, up = r.quat_to_forward_up(q)
    assert np.max(r.quat_angle_rad(q, r.quat_from_forward_up(forward, up))) < 1e-7
    # Non-orthogonal, non-unit inputs: forward is kept, up is the closest orthogonal vector.
    q2 = r.quat_from_forward_up(np.array([0.0, 0.0, 3.0]), np.array([0.5, 1.0, 0.3]))
    f2, u2 = r.quat_to_forward_up(q2)
    assert np.allclose(f2, [0, 0, 1])
    assert np.allclose(u2, np.array([0.5, 1.0, 0]) / np.hypot(0.5, 1.0))


def test_slerp_endpoints_and_midpoint(rng):
    a, b = r.quat_normalize(rng.normal(size=(2, 30, 4)))
    assert np.max(r.quat_angle_rad(r.quat_slerp(a, b, 0.0), a)) < 1e-6
    assert np.max(r.quat_angle_rad(r.quat_slerp(a, b, 1.0), b)) < 1e-6
    middle = r.quat_slerp(a, b, 0.5)
    assert np.allclose(r.quat_angle_rad(a, middle), r.quat_angle_rad(middle, b), atol=1e-6)
    assert np.allclose(r.quat_angle_rad(a, middle), 0.5 * r.quat_angle_rad(a, b), atol=1e-6)


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_mirrored_quaternion_is_reflection_conjugated_rotation(axis, rng):
    q = r.quat_normalize(rng.normal(size=(100, 4)))
    m = np.diag(np.where(np.arange(3) == axis, -1.0, 1.0))
    assert np.allclose(r.quat_to_matrix(r.mirror_quaternions(q, axis)), m @ r.quat_to_matrix(q) @ m)
    assert np.allclose(
        r.mirror_positions(np.array([1.0, 2.0, 3.0]), axis), m @ np.array([1.0, 2.0, 3.0])
    )


def test_float32_stays_float32():
    q = r.quat_identity((3,), dtype=np.float32)
    assert r.quat_multiply(q, q).dtype == np.float32
    assert r.quat_rotate(q, np.ones((3, 3), dtype=np.float32)).dtype == np.float32

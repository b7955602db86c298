"""Rotation math, vectorised over any leading axes. The one implementation in the project.

Conventions (shared with the native core, native/include/canis/kinematics.h):
- quaternions are (..., 4) arrays ordered (w, x, y, z), Hamilton product, active rotations of
  column vectors: ``quat_rotate(q, v) == quat_to_matrix(q) @ v``;
- Euler orders name intrinsic rotations left to right as BVH lists its channels:
  ``"ZXY"`` means ``R = Rz @ Rx @ Ry``;
- a rotation's forward/up pair is its local +z and +y axes (the MANN feature encoding);
- y is up.
Functions keep the input's float dtype.
"""

from __future__ import annotations

import numpy as np

AXIS_INDEX = {"X": 0, "Y": 1, "Z": 2}
LOCAL_FORWARD = np.array([0.0, 0.0, 1.0])
LOCAL_UP = np.array([0.0, 1.0, 0.0])


def cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cross products of 3-vectors (..., 3), broadcasting. Written out because np.cross
    spends most of its time on axis bookkeeping, which dominates for the runtime's small
    per-frame arrays."""
    a0, a1, a2 = a[..., 0], a[..., 1], a[..., 2]
    b0, b1, b2 = b[..., 0], b[..., 1], b[..., 2]
    return np.stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], axis=-1)


def quat_identity(shape: tuple[int, ...] = (), dtype=np.float64) -> np.ndarray:
    q = np.zeros((*shape, 4), dtype=dtype)
    q[..., 0] = 1.0
    return q


def quat_multiply(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    aw, ax, ay, az = a[..., 0], a[..., 1], a[..., 2], a[..., 3]
    bw, bx, by, bz = b[..., 0], b[..., 1], b[..., 2], b[..., 3]
    return np.stack(
        [
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ],
        axis=-1,
    )


def quat_conjugate(q: np.ndarray) -> np.ndarray:
    """The inverse of a unit quaternion."""
    return q * np.array([1.0, -1.0, -1.0, -1.0], dtype=q.dtype)


def quat_normalize(q: np.ndarray) -> np.ndarray:
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


def quat_rotate(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Rotates vectors v (..., 3) by unit quaternions q (..., 4), broadcasting."""
    u = q[..., 1:]
    t = 2.0 * cross(u, v)
    return v + q[..., :1] * t + cross(u, t)


def quat_from_axis_angle(axis: np.ndarray, angle_rad: np.ndarray) -> np.ndarray:
    axis = np.asarray(axis)
    half = 0.5 * np.asarray(angle_rad)
    unit = axis / np.linalg.norm(axis, axis=-1, keepdims=True)
    return np.concatenate([np.cos(half)[..., None], np.sin(half)[..., None] * unit], axis=-1)


def quat_from_euler(angles_rad: np.ndarray, order: str) -> np.ndarray:
    """Quaternions from Euler angles (..., len(order)), intrinsic, applied in `order`."""
    angles_rad = np.asarray(angles_rad)
    if angles_rad.shape[-1] != len(order):
        raise ValueError(f"{len(order)} angles expected for order {order!r}")
    q = quat_identity(angles_rad.shape[:-1], dtype=angles_rad.dtype)
    for i, axis_name in enumerate(order):
        axis = np.zeros(3, dtype=angles_rad.dtype)
        axis[AXIS_INDEX[axis_name]] = 1.0
        q = quat_multiply(q, quat_from_axis_angle(axis, angles_rad[..., i]))
    return q


def quat_to_euler(q: np.ndarray, order: str) -> np.ndarray:
    """Euler angles (..., 3) in radians with ``quat_from_euler(result, order)`` == ±q.

    Works for the six Tait-Bryan orders (three distinct axes). Near gimbal lock the split
    between the first and last angle is arbitrary but the rotation is still exact.
    """
    if len(order) != 3 or len(set(order)) != 3:
        raise ValueError(f"quat_to_euler needs three distinct axes, got {order!r}")
    i, j, k = (AXIS_INDEX[a] for a in order)
    m = quat_to_matrix(q)
    # Cyclic orders (XYZ, YZX, ZXY) and their reverses differ only in signs.
    sign = 1.0 if (j - i) % 3 == 1 else -1.0
    middle = np.arcsin(np.clip(sign * m[..., i, k], -1.0, 1.0))
    first = np.arctan2(-sign * m[..., j, k], m[..., k, k])
    last = np.arctan2(-sign * m[..., i, j], m[..., i, i])
    # Gimbal lock (middle = ±90°): the first and last axes coincide and the formulas above
    # divide zero by zero. Put the whole turn in the first angle: with last = 0,
    # R_i(first) = R R_j(middle)^-1, a rotation about axis i read straight off its quaternion.
    locked = np.abs(m[..., i, k]) > 1.0 - 1e-12
    if np.any(locked):
        middle_axis = np.zeros(3)
        middle_axis[j] = 1.0
        about_i = quat_multiply(q, quat_conjugate(quat_from_axis_angle(middle_axis, middle)))
        first = np.where(locked, 2.0 * np.arctan2(about_i[..., 1 + i], about_i[..., 0]), first)
        last = np.where(locked, 0.0, last)
    return np.stack([first, middle, last], axis=-1)


def quat_to_matrix(q: np.ndarray) -> np.ndarray:
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    return np.stack(
        [
            np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
            np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
            np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1),
        ],
        axis=-2,
    )


def quat_from_matrix(m: np.ndarray) -> np.ndarray:
    """Unit quaternions (w >= 0) from rotation matrices (..., 3, 3).

    Picks, per matrix, the largest of 4w², 4x², 4y², 4z² to divide by (Shepperd's method), so
    the result is accurate for every rotation, including those near 180 degrees.
    """
    m00, m11, m22 = m[..., 0, 0], m[..., 1, 1], m[..., 2, 2]
    candidates = np.stack(
        [
            np.stack(
                [
                    1 + m00 + m11 + m22,
                    m[..., 2, 1] - m[..., 1, 2],
                    m[..., 0, 2] - m[..., 2, 0],
                    m[..., 1, 0] - m[..., 0, 1],
                ],
                -1,
            ),
            np.stack(
                [
                    m[..., 2, 1] - m[..., 1, 2],
                    1 + m00 - m11 - m22,
                    m[..., 0, 1] + m[..., 1, 0],
                    m[..., 0, 2] + m[..., 2, 0],
                ],
                -1,
            ),
            np.stack(
                [
                    m[..., 0, 2] - m[..., 2, 0],
                    m[..., 0, 1] + m[..., 1, 0],
                    1 - m00 + m11 - m22,
                    m[..., 1, 2] + m[..., 2, 1],
                ],
                -1,
            ),
            np.stack(
                [
                    m[..., 1, 0] - m[..., 0, 1],
                    m[..., 0, 2] + m[..., 2, 0],
                    m[..., 1, 2] + m[..., 2, 1],
                    1 - m00 - m11 + m22,
                ],
                -1,
            ),
        ],
        axis=-2,
    )  # (..., 4 candidates, 4 components); candidate c is 4 q_c * q
    best = np.argmax(
        np.stack(
            [1 + m00 + m11 + m22, 1 + m00 - m11 - m22, 1 - m00 + m11 - m22, 1 - m00 - m11 + m22], -1
        ),
        axis=-1,
    )
    q = np.take_along_axis(candidates, best[..., None, None], axis=-2)[..., 0, :]
    q = quat_normalize(q)
    return np.where(q[..., :1] < 0, -q, q)


def matrix_from_forward_up(forward: np.ndarray, up: np.ndarray) -> np.ndarray:
    """The rotation matrix (..., 3, 3) whose local +z is `forward` and whose local +y is as
    close to `up` as orthogonality allows (Gram-Schmidt: forward wins). Inputs need not be
    unit length."""
    z = forward / np.linalg.norm(forward, axis=-1, keepdims=True)
    x = cross(np.broadcast_to(up, z.shape), z)
    x = x / np.linalg.norm(x, axis=-1, keepdims=True)
    y = cross(z, x)
    return np.stack([x, y, z], axis=-1)


def quat_from_forward_up(forward: np.ndarray, up: np.ndarray) -> np.ndarray:
    """The rotation whose local +z is `forward` and whose local +y is as close to `up` as
    orthogonality allows (matrix_from_forward_up)."""
    return quat_from_matrix(matrix_from_forward_up(forward, up))


def quat_to_forward_up(q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The local +z (forward) and +y (up) axes of rotations q, in the parent frame."""
    return quat_rotate(q, LOCAL_FORWARD.astype(q.dtype)), quat_rotate(q, LOCAL_UP.astype(q.dtype))


def quat_slerp(a: np.ndarray, b: np.ndarray, t: np.ndarray | float) -> np.ndarray:
    """Shortest-path spherical interpolation from a (t = 0) to b (t = 1)."""
    t = np.asarray(t, dtype=a.dtype)[..., None] if np.ndim(t) else np.asarray(t, dtype=a.dtype)
    cos_angle = np.sum(a * b, axis=-1, keepdims=True)
    b = np.where(cos_angle < 0, -b, b)
    cos_angle = np.abs(cos_angle)
    angle = np.arccos(np.clip(cos_angle, -1.0, 1.0))
    sin_angle = np.sin(angle)
    nearly_parallel = sin_angle < 1e-6
    safe_sin = np.where(nearly_parallel, 1.0, sin_angle)
    wa = np.where(nearly_parallel, 1.0 - t, np.sin((1.0 - t) * angle) / safe_sin)
    wb = np.where(nearly_parallel, t, np.sin(t * angle) / safe_sin)
    return quat_normalize(wa * a + wb * b)


def quat_angle_rad(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The angle of the rotation taking a to b, in [0, pi]. atan2 of the relative rotation's
    parts stays accurate for tiny angles, where arccos of a dot product does not."""
    relative = quat_multiply(quat_conjugate(a), b)
    return 2.0 * np.arctan2(np.linalg.norm(relative[..., 1:], axis=-1), np.abs(relative[..., 0]))


def mirror_positions(p: np.ndarray, axis: int) -> np.ndarray:
    """Reflects points (..., 3) through the plane whose normal is coordinate `axis`."""
    sign = np.ones(3, dtype=p.dtype)
    sign[axis] = -1.0
    return p * sign


def mirror_quaternions(q: np.ndarray, axis: int) -> np.ndarray:
    """The rotation M R M for a reflection M through the plane normal to `axis`.

    A reflected rotation keeps its angle and turns about the reflected axis with the
    handedness flipped: the quaternion's component along `axis` stays, the other two flip.
    """
    sign = -np.ones(4, dtype=q.dtype)
    sign[0] = 1.0
    sign[1 + axis] = 1.0
    return q * sign

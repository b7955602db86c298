"""runtime/pose.trusted_rotations: a joint whose predicted axes shrink (the network torn between
two poses) keeps the previous frame's rotation, seen from the new root; well-formed axes pass
as predicted; and the native core (the runtime's path) computes the same as the numpy
definition."""

from types import SimpleNamespace

import numpy as np
import pytest
from canis.runtime import _kinematics
from canis.runtime.features import LocalPose
from canis.runtime.pose import ROTATION_TRUSTED_AT, ROTATION_TRUSTED_FROM, trusted_rotations
from canis.runtime.root import rotate_xz

DT_S = 1 / 60


def _axes(generator, dogs, joints, scale):
    """Unit-ish orthogonal (forward, up) pairs times `scale` (dogs, joints)."""
    forward = generator.normal(size=(dogs, joints, 3))
    forward /= np.linalg.norm(forward, axis=-1, keepdims=True)
    up = np.cross(forward, generator.normal(size=(dogs, joints, 3)))
    up /= np.linalg.norm(up, axis=-1, keepdims=True)
    return forward * scale[..., None], up * scale[..., None]


def _case(seed=0, dogs=3, joints=27):
    generator = np.random.default_rng(seed)
    before = _axes(generator, dogs, joints, np.ones((dogs, joints)))
    scale = generator.choice([1.0, 0.8, 0.45, 0.35, 0.2, 0.05], size=(dogs, joints))
    forward, up = _axes(generator, dogs, joints, scale)
    previous = LocalPose(np.zeros_like(forward), *before, np.zeros_like(forward))
    turn_radps = generator.uniform(-3, 3, dogs)
    prediction = SimpleNamespace(
        joint_forwards=forward, joint_ups=up, root_yaw_velocity_radps=turn_radps
    )
    return previous, prediction, scale


def test_well_formed_axes_pass_and_shrunk_ones_keep_the_previous_turned():
    previous, p, scale = _case()
    forward, up = trusted_rotations(previous, p, DT_S)
    area = scale**2  # orthogonal pairs: |f x u| = |f| |u|
    kept = area >= ROTATION_TRUSTED_AT
    assert kept.any() and (area <= ROTATION_TRUSTED_FROM).any()
    np.testing.assert_array_equal(forward[kept], p.joint_forwards[kept])
    np.testing.assert_array_equal(up[kept], p.joint_ups[kept])
    held = area <= ROTATION_TRUSTED_FROM
    turned = previous.forwards.copy()
    turned[..., ::2] = rotate_xz(previous.forwards[..., ::2], -p.root_yaw_velocity_radps * DT_S)
    np.testing.assert_allclose(forward[held], turned[held], atol=1e-12)
    between = ~kept & ~held
    assert between.any()
    share = (scale[between] ** 2 - ROTATION_TRUSTED_FROM) / (
        ROTATION_TRUSTED_AT - ROTATION_TRUSTED_FROM
    )
    expected = turned[between] + share[:, None] * (p.joint_forwards[between] - turned[between])
    np.testing.assert_allclose(forward[between], expected, atol=1e-12)


def test_every_axis_well_formed_returns_copies_of_the_prediction():
    previous, p, _ = _case()
    p.joint_forwards, p.joint_ups = _axes(np.random.default_rng(1), 3, 27, np.ones((3, 27)))
    forward, up = trusted_rotations(previous, p, DT_S)
    assert forward is not p.joint_forwards and np.array_equal(forward, p.joint_forwards)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_native_core_keeps_what_numpy_keeps(seed):
    previous, p, _ = _case(seed)
    expected = trusted_rotations(previous, p, DT_S)
    forward, up = p.joint_forwards.copy(), p.joint_ups.copy()
    _kinematics.trusted_axes(
        DT_S,
        ROTATION_TRUSTED_FROM,
        ROTATION_TRUSTED_AT,
        p.root_yaw_velocity_radps,
        previous.forwards,
        previous.ups,
        forward,
        up,
    )
    np.testing.assert_allclose(forward, expected[0], atol=1e-12)
    np.testing.assert_allclose(up, expected[1], atol=1e-12)


def test_the_native_core_names_a_wrong_shape():
    previous, p, _ = _case()
    forward, up = p.joint_forwards.copy(), p.joint_ups.copy()
    with pytest.raises(ValueError, match="previous_ups"):
        _kinematics.trusted_axes(
            DT_S, 0.1, 0.3, p.root_yaw_velocity_radps, previous.forwards,
            previous.ups[:, :5], forward, up,
        )  # fmt: skip

"""The RTN's "rotations" residual: joint axes moved along their rotation (the torch conversions
held equal to the runtime's), never through zero, and the fresh network's rollout that
rotation blend."""

import numpy as np
import torch
from canis.runtime.rotations import quat_from_forward_up, quat_slerp, quat_to_forward_up
from canis.runtime.transition_frames import CONTEXT_FRAMES, FORWARDS, FRAME_SIZE, UPS
from canis.training.axis_interpolation import (
    axes_from_quaternions,
    interpolate_axes,
    quaternions_from_axes,
)
from canis.training.rtn import empty_rtn, rollout


def _random_axes(rng, n):
    return rng.normal(size=(n, 3)), rng.normal(size=(n, 3))


def test_quaternions_from_axes_are_the_runtimes():
    rng = np.random.default_rng(0)
    forward, up = _random_axes(rng, 500)
    forward *= rng.uniform(0.2, 2.0, size=(500, 1))  # not unit length, as a network's are
    ours = quaternions_from_axes(torch.as_tensor(forward), torch.as_tensor(up)).numpy()
    runtime = quat_from_forward_up(forward, up)
    same_sign = np.where((ours * runtime).sum(1, keepdims=True) < 0, -ours, ours)  # q ~ -q
    np.testing.assert_allclose(same_sign, runtime, atol=1e-9)


def test_near_half_turns_convert_accurately():
    """Rotations by nearly 180 degrees (w near 0), where a formula dividing by w fails."""
    angles = np.pi - np.array([0.0, 1e-7, 1e-4])
    axis = np.array([1.0, 1.0, 0.0]) / np.sqrt(2)
    q = np.concatenate([np.cos(angles / 2)[:, None], np.sin(angles / 2)[:, None] * axis], 1)
    forward, up = quat_to_forward_up(q)
    back = quaternions_from_axes(torch.as_tensor(forward), torch.as_tensor(up)).numpy()
    assert np.all(np.abs(np.abs((back * q).sum(1)) - 1) < 1e-9)


def test_axes_from_quaternions_are_the_runtimes():
    rng = np.random.default_rng(1)
    q = rng.normal(size=(200, 4))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    forward, up = axes_from_quaternions(torch.as_tensor(q))
    expected = quat_to_forward_up(q)
    np.testing.assert_allclose(forward.numpy(), expected[0], atol=1e-12)
    np.testing.assert_allclose(up.numpy(), expected[1], atol=1e-12)


def test_a_half_turn_of_roll_keeps_unit_axes_where_the_channels_pass_zero():
    """Up reversed about a fixed forward: the channels' blend of the ups is zero half way; the
    rotations' blend turns the up a quarter turn and keeps the forward."""
    forward = torch.tensor([[0.0, 0.0, 1.0]], dtype=torch.float64)
    up, reversed_up = torch.tensor([[0.0, 1.0, 0.0]]).double(), torch.tensor([[0.0, -1.0, 0.0]])
    half = torch.tensor([0.5], dtype=torch.float64)
    f, u = interpolate_axes(forward, up, forward, reversed_up.double(), half)
    torch.testing.assert_close(f, forward)
    assert abs(float(u.norm()) - 1) < 1e-12 and abs(float(u[0, 1])) < 1e-12
    assert torch.equal(up + (reversed_up - up) * 0.5, torch.zeros(1, 3, dtype=torch.float64))


def test_interpolate_axes_follows_the_runtimes_slerp_path_and_ends_on_the_target():
    rng = np.random.default_rng(2)
    forward, up = _random_axes(rng, 100)
    target_forward, target_up = _random_axes(rng, 100)
    args = [torch.as_tensor(a) for a in (forward, up, target_forward, target_up)]
    end = interpolate_axes(*args, torch.ones(100, dtype=torch.float64))
    expected = quat_to_forward_up(quat_from_forward_up(target_forward, target_up))
    np.testing.assert_allclose(end[0].numpy(), expected[0], atol=1e-9)
    np.testing.assert_allclose(end[1].numpy(), expected[1], atol=1e-9)
    # Normalised linear blending differs from slerp only in speed along the same arc: the
    # half-way rotation is slerp's half-way one.
    middle = interpolate_axes(*args, torch.full((100,), 0.5, dtype=torch.float64))
    a, b = quat_from_forward_up(forward, up), quat_from_forward_up(target_forward, target_up)
    slerped = quat_to_forward_up(quat_slerp(a, b, 0.5))
    np.testing.assert_allclose(middle[0].numpy(), slerped[0], atol=1e-9)
    np.testing.assert_allclose(middle[1].numpy(), slerped[1], atol=1e-9)


def test_a_fresh_rotations_rtn_moves_the_axes_along_their_rotations():
    """Zero correction: the axes step by step along each joint's rotation to the target's
    (unit length on the way), the positions as the interpolation residual moves them."""
    torch.manual_seed(0)
    model = empty_rtn("rotations").double()
    interpolation = empty_rtn("interpolation").double()
    context = torch.randn(2, CONTEXT_FRAMES, FRAME_SIZE, dtype=torch.float64)
    places = torch.tensor([[1.0, -2.0, 0.0, 1.0]] * 2, dtype=torch.float64)
    places = places[:, None].expand(2, CONTEXT_FRAMES, 4).clone()
    target = torch.randn(2, FRAME_SIZE, dtype=torch.float64)
    with torch.no_grad():
        frames, _ = rollout(model, context, places, target, 9)
        linear, _ = rollout(interpolation, context, places, target, 9)
    torch.testing.assert_close(frames[..., : FORWARDS.start], linear[..., : FORWARDS.start])
    forward = frames[..., FORWARDS].reshape(2, 10, -1, 3)
    up = frames[..., UPS].reshape(2, 10, -1, 3)
    torch.testing.assert_close(forward.norm(dim=-1), torch.ones(forward.shape[:-1]).double())
    torch.testing.assert_close(up.norm(dim=-1), torch.ones(up.shape[:-1]).double())
    n = target.shape[0]
    end = quaternions_from_axes(
        target[:, FORWARDS].reshape(n, -1, 3), target[:, UPS].reshape(n, -1, 3)
    )
    last = quaternions_from_axes(forward[:, -1], up[:, -1])
    torch.testing.assert_close((last * end).sum(-1).abs(), torch.ones(end.shape[:-1]).double())


def test_bf16_autocast_does_not_round_the_axes():
    """Training runs under bf16 autocast; the base axes stay float32 (an axis channel's standard
    deviation is 3e-3 in the mocap, a bf16 MatMul's error 1e-2)."""
    rng = np.random.default_rng(3)
    args = [torch.as_tensor(a, dtype=torch.float32) for a in (*_random_axes(rng, 50),)]
    args += [torch.as_tensor(a, dtype=torch.float32) for a in _random_axes(rng, 50)]
    share = torch.full((50,), 0.3)
    plain = interpolate_axes(*args, share)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        autocast = interpolate_axes(*args, share)
    for a, b in zip(plain, autocast, strict=True):
        assert b.dtype == torch.float32
        torch.testing.assert_close(a, b, atol=1e-6, rtol=0)

"""The RTN's "rotations" residual: joint axes moved along their rotation where they are far
apart (the torch conversions held equal to the runtime's), never through zero, the channels'
blend kept where they are close, and a fresh network's rollout made of that base."""

import numpy as np
import torch
from canis.runtime.rotations import (
    quat_from_forward_up,
    quat_multiply,
    quat_slerp,
    quat_to_forward_up,
)
from canis.runtime.transition_frames import CONTEXT_FRAMES, FORWARDS, FRAME_SIZE, ROTATED_COUNT, UPS
from canis.training.rtn import ARC_JOINTS, empty_rtn, rollout
from canis.training.torch_runtime import (
    ARC_FROM_DEG,
    ARC_FULL_DEG,
    axes_from_quaternions,
    interpolate_axes,
    quaternions_from_axes,
)


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


def _rotations_apart(rng, n, angle_deg):
    """Axis pairs of n random rotations and of each turned by angle_deg about a random axis."""
    a = rng.normal(size=(n, 4))
    a /= np.linalg.norm(a, axis=1, keepdims=True)
    axis = rng.normal(size=(n, 3))
    axis /= np.linalg.norm(axis, axis=1, keepdims=True)
    half = np.radians(angle_deg) / 2
    turn = np.concatenate([np.full((n, 1), np.cos(half)), np.sin(half) * axis], axis=1)
    b = quat_multiply(turn, a)
    return a, b, (*quat_to_forward_up(a), *quat_to_forward_up(b))


def test_far_apart_rotations_follow_the_runtimes_slerp_path_and_end_on_the_target():
    rng = np.random.default_rng(2)
    a, b, axes = _rotations_apart(rng, 100, 150.0)
    args = [torch.as_tensor(v) for v in axes]
    end = interpolate_axes(*args, torch.ones(100, dtype=torch.float64))
    np.testing.assert_allclose(end[0].numpy(), axes[2], atol=1e-9)
    np.testing.assert_allclose(end[1].numpy(), axes[3], atol=1e-9)
    # Normalised linear blending differs from slerp only in speed along the same arc: the
    # half-way rotation is slerp's half-way one.
    middle = interpolate_axes(*args, torch.full((100,), 0.5, dtype=torch.float64))
    slerped = quat_to_forward_up(quat_slerp(a, b, 0.5))
    np.testing.assert_allclose(middle[0].numpy(), slerped[0], atol=1e-9)
    np.testing.assert_allclose(middle[1].numpy(), slerped[1], atol=1e-9)


def test_close_rotations_keep_the_channels_blend_and_the_blend_is_continuous():
    """Within ARC_FROM_DEG the base is the channels' own (what the interpolation residual
    does); between ARC_FROM_DEG and ARC_FULL_DEG it moves to the arc without a step."""
    rng = np.random.default_rng(4)
    _, _, axes = _rotations_apart(rng, 50, ARC_FROM_DEG - 1)
    args = [torch.as_tensor(v) for v in axes]
    share = torch.full((50,), 0.4, dtype=torch.float64)
    forward, up = interpolate_axes(*args, share)
    torch.testing.assert_close(forward, args[0] + (args[2] - args[0]) * 0.4)
    torch.testing.assert_close(up, args[1] + (args[3] - args[1]) * 0.4)
    angles = np.linspace(ARC_FROM_DEG - 5, ARC_FULL_DEG + 5, 400)
    path = []
    for angle in angles:
        _, _, axes = _rotations_apart(np.random.default_rng(5), 1, angle)
        f, _ = interpolate_axes(*[torch.as_tensor(v) for v in axes], share[:1])
        path.append(f.numpy()[0])
    assert np.abs(np.diff(path, axis=0)).max() < 0.01  # no jump as the weight moves


def test_a_fresh_rotations_rtn_moves_far_turned_axes_along_their_arc():
    """Zero correction: positions move as the interpolation residual moves them, the axes
    arrive on the target's, and a joint that must turn half a circle keeps its axes long on
    the way where the channels' blend shrinks them to nothing (the tail's joints excepted)."""
    torch.manual_seed(0)
    model = empty_rtn("rotations").double()
    interpolation = empty_rtn("interpolation").double()
    rng = np.random.default_rng(6)
    _, _, axes = _rotations_apart(rng, 2 * ROTATED_COUNT, 170.0)
    context = torch.randn(2, CONTEXT_FRAMES, FRAME_SIZE, dtype=torch.float64)
    target = torch.randn(2, FRAME_SIZE, dtype=torch.float64)
    for frame, (f, u) in ((context[:, -1], axes[:2]), (target, axes[2:])):
        frame[:, FORWARDS] = torch.as_tensor(f).reshape(2, -1)
        frame[:, UPS] = torch.as_tensor(u).reshape(2, -1)
    places = torch.tensor([[1.0, -2.0, 0.0, 1.0]] * 2, dtype=torch.float64)
    places = places[:, None].expand(2, CONTEXT_FRAMES, 4).clone()
    with torch.no_grad():
        frames, _ = rollout(model, context, places, target, 9)
        linear, _ = rollout(interpolation, context, places, target, 9)
    torch.testing.assert_close(frames[..., : FORWARDS.start], linear[..., : FORWARDS.start])
    torch.testing.assert_close(frames[:, -1, 3:], target[:, 3:])  # 0:3 the root's motion
    up = frames[:, :-1, UPS].reshape(2, 9, -1, 3).norm(dim=-1)
    linear_up = linear[:, :-1, UPS].reshape(2, 9, -1, 3).norm(dim=-1)
    arc = ARC_JOINTS.bool()  # the tail's joints keep the channels' blend (training/rtn.py)
    assert up[..., arc].min() > 0.5 and linear_up[..., arc].min() < 0.2
    torch.testing.assert_close(up[..., ~arc], linear_up[..., ~arc])


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

"""The bone term (training/bone_loss.py): 0 where the predicted positions and rotations agree
(the mocap's own frames), the squared distance of a bone moved off its rotation, and axes
turned into rotations as the runtime turns them."""

import numpy as np
import torch
from canis.runtime.features import OUTPUT
from canis.training.bone_loss import bone_loss, joint_axes


def _trot_y() -> torch.Tensor:
    from canis.training.clips import clip_pairs, process_clip
    from synthetic_dog import gait, to_motion

    roots, rotations, _ = gait("trot", 1.5, 3.0)
    _, y, _ = clip_pairs(process_clip(to_motion(roots, rotations, "trot")))
    return torch.as_tensor(y[10:40], dtype=torch.float32)


def test_the_mocaps_frames_agree_and_a_moved_joint_costs_its_squared_distance():
    from canis.runtime.skeleton import DOG_JOINT_NAMES, Skeleton, shipped_dog_skeleton_path

    y = _trot_y()
    assert bone_loss(y).item() < 1e-6
    # A leaf (an end site) moved 2 cm: one bone of all is off by 2 cm.
    skeleton = Skeleton.from_json(shipped_dog_skeleton_path())
    leaf = DOG_JOINT_NAMES.index("HeadSite")
    assert leaf not in skeleton.parents
    moved = y.clone()
    moved[:, OUTPUT.field(np.arange(OUTPUT.size), "joints", "position")[leaf][0]] += 0.02
    bones = int((skeleton.parents >= 0).sum())
    np.testing.assert_allclose(bone_loss(moved).item(), 2.0**2 / bones, rtol=1e-3)


def test_its_gradient_brings_a_bone_back_to_its_rotation():
    y = _trot_y()
    column = OUTPUT.field(np.arange(OUTPUT.size), "joints", "position")[5][1]
    moved = y.clone()
    moved[:, column] += 0.03
    moved.requires_grad_()
    loss = bone_loss(moved)
    loss.backward()
    stepped = (moved - 1e-3 * moved.grad).detach()
    assert bone_loss(stepped).item() < loss.item()


def test_positions_only_moves_the_positions_and_leaves_the_rotations():
    y = _trot_y()
    moved = y.clone()
    moved[:, OUTPUT.field(np.arange(OUTPUT.size), "joints", "position")[5][1]] += 0.03
    both, alone = moved.clone().requires_grad_(), moved.clone().requires_grad_()
    bone_loss(both).backward()
    loss = bone_loss(alone, positions_only=True)
    loss.backward()
    np.testing.assert_allclose(loss.item(), bone_loss(moved).item(), rtol=1e-6)
    axes = np.concatenate(
        [OUTPUT.field(np.arange(OUTPUT.size), "joints", f).reshape(-1) for f in ("forward", "up")]
    )
    positions = OUTPUT.field(np.arange(OUTPUT.size), "joints", "position").reshape(-1)
    assert both.grad[:, axes].abs().max() > 0  # the whole term turns the rotations too
    assert alone.grad[:, axes].abs().max() == 0
    np.testing.assert_allclose(alone.grad[:, positions], both.grad[:, positions], atol=1e-7)


def test_axes_become_the_rotation_the_runtime_draws():
    from canis.runtime.rotations import quat_from_forward_up, quat_to_matrix

    rng = np.random.default_rng(0)
    forward, up = rng.normal(size=(50, 3)), rng.normal(size=(50, 3))
    ours = joint_axes(torch.as_tensor(forward), torch.as_tensor(up)).numpy()
    np.testing.assert_allclose(ours, quat_to_matrix(quat_from_forward_up(forward, up)), atol=1e-6)

"""training/torch_runtime.py is the runtime's own shown pose in torch: the hips by
runtime/pose.next_local_pose, the joints by the runtime's forward kinematics of the
predicted axes; and the moving-skating term's paws are those."""

import numpy as np
import pytest
import torch
from canis.runtime.features import FPS, INPUT, OUTPUT, PAW_ROWS, decode_output
from canis.runtime.kinematics import forward_kinematics, rotations_from_directions
from canis.runtime.pose import next_local_pose
from canis.runtime.skeleton import Skeleton, shipped_dog_skeleton_path
from canis.training.finetune_losses import paw_world_velocity_mps, step_skating_cm
from canis.training.finetune_stretches import local_pose_of
from canis.training.moving_skating import shown_paw_steps
from canis.training.torch_runtime import (
    kept_axes,
    shown_hips_m,
    shown_positions_m,
    shown_step_m,
)


def _rows(layout, count: int, generator: np.random.Generator) -> np.ndarray:
    """Rows of `layout` whose axes are tilted unit-ish vectors (the forward near +z, the up
    near +y, as a dog's joints are), everything else random."""
    values = generator.normal(0.0, 0.3, (count, layout.size))
    joints = len(Skeleton.from_json(shipped_dog_skeleton_path()).parents)
    for field, axis in (("forward", 2), ("up", 1)):
        index = layout.field(np.arange(layout.size), "joints", field)  # (J, 3)
        direction = generator.normal(0.0, 0.4, (count, joints, 3))
        direction[..., axis] += 1.0
        values[:, index] = direction
    return values.astype(np.float32)


def test_the_shown_pose_is_the_runtimes():
    generator = np.random.default_rng(3)
    x_raw, y_raw = _rows(INPUT, 6, generator), _rows(OUTPUT, 6, generator)
    # Row 0's left forearm predicted torn between two poses: its axes shrunk (|f x u| < 0.01),
    # so the runtime keeps x's rotation for it (pose.trusted_rotations); row 1's half-shrunk.
    forearm = Skeleton.from_json(shipped_dog_skeleton_path()).joint_names.index("LeftForeArm")
    for row, scale in ((0, 0.05), (1, 0.45)):
        for field in ("forward", "up"):
            y_raw[row, OUTPUT.field(np.arange(OUTPUT.size), "joints", field)[forearm]] *= scale
    skeleton = Skeleton.from_json(shipped_dog_skeleton_path())
    pose = next_local_pose(local_pose_of(x_raw), decode_output(y_raw.astype(np.float64)), 1 / FPS)
    hips = shown_hips_m(torch.as_tensor(x_raw), torch.as_tensor(y_raw))
    np.testing.assert_allclose(hips.numpy(), pose.positions_m[:, 0], atol=1e-5)
    axes = kept_axes(torch.as_tensor(x_raw), torch.as_tensor(y_raw))
    np.testing.assert_allclose(axes[0].numpy(), pose.forwards, atol=1e-5)
    np.testing.assert_allclose(axes[1].numpy(), pose.ups, atol=1e-5)
    predicted = decode_output(y_raw.astype(np.float64)).joint_forwards
    kept, before = pose.forwards[0, forearm], local_pose_of(x_raw).forwards[0, forearm]
    assert np.linalg.norm(kept) == pytest.approx(np.linalg.norm(before))  # x's, turned
    assert np.linalg.norm(kept - predicted[0, forearm]) > 0.1
    # The runtime's drawing of that pose (runtime/pose.py, root at the origin, yaw 0).
    local, _ = rotations_from_directions(skeleton, pose.forwards, pose.ups, np.zeros(6))
    drawn, _ = forward_kinematics(skeleton, local, pose.positions_m[:, 0])
    shown = shown_positions_m(OUTPUT, torch.as_tensor(y_raw), hips, axes)
    np.testing.assert_allclose(shown.numpy(), drawn, atol=1e-4)
    # Before the step: x's own pose drawn, its hips where x says.
    before, after = shown_step_m(torch.as_tensor(x_raw), torch.as_tensor(y_raw), PAW_ROWS)
    x_pose = local_pose_of(x_raw)
    local, _ = rotations_from_directions(skeleton, x_pose.forwards, x_pose.ups, np.zeros(6))
    drawn_before, _ = forward_kinematics(skeleton, local, x_pose.positions_m[:, 0])
    np.testing.assert_allclose(before.numpy(), drawn_before[:, list(PAW_ROWS)], atol=1e-4)
    np.testing.assert_allclose(after.numpy(), drawn[:, list(PAW_ROWS)], atol=1e-4)


def _still_and_moved_rows():
    """x, y rows of a dog in its axes' rest pose, standing still, its highest paw 1 cm up; and
    y with the predicted hips 1 cm forward, the predicted paws where they were."""
    generator = np.random.default_rng(4)
    x_raw = _rows(INPUT, 4, generator)
    x_raw[:, INPUT.block_slice("joints")] = 0.0
    y_raw = np.zeros((4, OUTPUT.size), np.float32)
    for layout, values in ((INPUT, x_raw), (OUTPUT, y_raw)):
        for field, axis in (("forward", 2), ("up", 1)):
            index = layout.field(np.arange(layout.size), "joints", field)
            values[:, index[:, axis]] = 1.0
    # The hips placed so that the highest paw of the axes' rest pose is 1 cm up.
    rest = shown_positions_m(OUTPUT, torch.as_tensor(y_raw), torch.zeros(4, 3))
    hips_y = 0.01 - rest[:, list(PAW_ROWS), 1].max().item()
    for layout, values in ((INPUT, x_raw), (OUTPUT, y_raw)):
        values[:, layout.field(np.arange(layout.size), "joints", "position")[0, 1]] = hips_y
    x, y = torch.as_tensor(x_raw), torch.as_tensor(y_raw)
    hips_z = OUTPUT.field(np.arange(OUTPUT.size), "joints", "position")[0, 2]
    y_moved = y.clone()
    y_moved[:, hips_z] = 0.01
    return x, y, y_moved


def test_shown_skating_follows_the_axes_not_the_predicted_positions():
    """Paws predicted in place but drawn sliding skate when shown, and not otherwise."""
    x, y, y_moved = _still_and_moved_rows()
    assert shown_paw_steps(x, y)[0].abs().max() < 1e-5  # nothing moves
    # The predicted hips move 1 cm forward, the predicted paws stay: only the drawn paws slide.
    paws = OUTPUT.field(np.arange(OUTPUT.size), "joints", "position")[list(PAW_ROWS)]
    predicted = step_skating_cm(paw_world_velocity_mps(x, y_moved), y_moved[:, paws])
    shown = shown_paw_steps(x, y_moved)[0]
    assert predicted.abs().max() < 1e-6
    heights = shown_step_m(x, y_moved, PAW_ROWS)[1][..., 1]
    low = heights < 0.025
    # Half the centimetre (the blend), weighted by the paw's height: 0.5 cm at the ground.
    assert low.any() and (shown[low] > 0.2).all() and (shown[low] < 0.5 + 1e-4).all()


def test_the_pose_fed_back_is_the_runtimes():
    """fed_back_input is finetune_stretches.next_input (the runtime's next_local_pose and
    write_joints) in torch, and its gradient reaches the prediction."""
    from canis.training.finetune_stretches import next_input
    from canis.training.torch_runtime import fed_back_input

    generator = np.random.default_rng(5)
    x_raw, y_raw = _rows(INPUT, 6, generator), _rows(OUTPUT, 6, generator)
    x_next_raw = _rows(INPUT, 6, generator)
    expected = next_input(x_raw, y_raw, x_next_raw)
    y = torch.as_tensor(y_raw).requires_grad_()
    fed = fed_back_input(torch.as_tensor(x_raw), y, torch.as_tensor(x_next_raw))
    np.testing.assert_allclose(fed.detach().numpy(), expected, atol=1e-5)
    trajectory = INPUT.block_slice("trajectory")
    assert (fed[:, trajectory] == torch.as_tensor(x_next_raw)[:, trajectory]).all()
    fed[:, INPUT.block_slice("joints")].sum().backward()
    assert y.grad.abs().sum() > 0

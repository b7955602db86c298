"""training/pose_drift: the bone-length measure and the study's command line."""

import numpy as np
from canis.runtime.kinematics import forward_kinematics
from canis.runtime.rotations import quat_from_axis_angle
from canis.training.pose_drift import bone_length_error_m, main


def test_a_posed_skeleton_keeps_its_bones_and_a_stretched_one_does_not(dog, rng):
    """Any rotations keep every bone's length (error ~0); moving one joint by 5 cm along
    its bone (a leaf: no child moves with it) changes that one bone by 5 cm."""
    axes = rng.normal(size=(2, dog.joint_count, 3))
    rotations = quat_from_axis_angle(axes, rng.uniform(-1, 1, size=(2, dog.joint_count)))
    positions, _ = forward_kinematics(dog, rotations, np.zeros((2, 3)))
    assert np.all(bone_length_error_m(dog, positions) < 1e-5)
    leaf = next(j for j in range(dog.joint_count) if j not in dog.parents)
    stretched = positions.copy()
    bone = positions[:, leaf] - positions[:, dog.parents[leaf]]
    stretched[:, leaf] += 0.05 * bone / np.linalg.norm(bone, axis=-1, keepdims=True)
    expected = 0.05 / (dog.joint_count - 1)
    assert np.allclose(bone_length_error_m(dog, stretched), expected, atol=1e-5)


def test_the_study_drives_a_model_and_prints_every_second(tiny_model, capsys):
    assert main(["--models", f"TINY={tiny_model}", "--speeds", "1.1", "--seconds", "2"]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith("TINY at 1.10 m/s, bone length error cm")
    assert line.count("(") == 2 + 1  # two seconds, and the header's parenthesis

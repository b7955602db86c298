import numpy as np
from canis.runtime.kinematics import forward_kinematics
from canis.runtime.rotations import mirror_positions
from canis.runtime.skeleton import LATERAL_AXIS, Skeleton
from canis.training.bvh import read_bvh
from canis.training.mirror import mirror_clip, mirror_motion
from conftest import random_quaternions


def symmetric_dog(dog: Skeleton) -> Skeleton:
    """The dog with each right bone made the exact mirror image of its left twin."""
    offsets = dog.offsets_m.copy()
    for j, name in enumerate(dog.joint_names):
        if name.startswith("Right"):
            offsets[j] = mirror_positions(offsets[dog.mirror_index[j]], LATERAL_AXIS)
    return Skeleton(dog.joint_names, dog.parents, offsets)


def test_mirror_pairs_of_the_dog(dog):
    assert dog.joint_names[dog.mirror_index[dog.index("LeftForeArm")]] == "RightForeArm"
    assert dog.joint_names[dog.mirror_index[dog.index("RightFootSite")]] == "LeftFootSite"
    assert dog.mirror_index[dog.index("Tail1")] == dog.index("Tail1")
    assert np.array_equal(dog.mirror_index[dog.mirror_index], np.arange(dog.joint_count))


def test_mirroring_twice_returns_the_original(dog, rng):
    roots = rng.normal(size=(40, 3))
    rotations = random_quaternions(rng, (40, dog.joint_count)).astype(np.float64)
    once = mirror_motion(dog, roots, rotations)
    twice = mirror_motion(dog, *once)
    assert np.array_equal(twice[0], roots) and np.array_equal(twice[1], rotations)
    assert not np.allclose(once[1], rotations)


def test_mirrored_pose_is_the_reflected_pose(dog, rng):
    skeleton = symmetric_dog(dog)
    roots = rng.normal(size=(10, 3)).astype(np.float32)
    rotations = random_quaternions(rng, (10, dog.joint_count))
    positions, _ = forward_kinematics(skeleton, rotations, roots)
    mirrored_roots, mirrored_rotations = mirror_motion(skeleton, roots, rotations)
    mirrored_positions, _ = forward_kinematics(skeleton, mirrored_rotations, mirrored_roots)
    expected = mirror_positions(positions, LATERAL_AXIS)[:, skeleton.mirror_index]
    assert np.allclose(mirrored_positions, expected, atol=1e-5)


def test_mirrored_dog_clip_within_two_millimetres_of_the_reflection(mocap_dir):
    motion = read_bvh(mocap_dir / "D1_047_KAN01_001.bvh")  # turning: asymmetric on purpose
    mirrored = mirror_clip(motion)
    skeleton = motion.skeleton()
    positions, _ = forward_kinematics(skeleton, motion.local_rotations, motion.root_positions_m())
    mirrored_positions, _ = forward_kinematics(
        skeleton, mirrored.local_rotations, mirrored.root_positions_m()
    )
    expected = mirror_positions(positions, LATERAL_AXIS)[:, skeleton.mirror_index]
    # The dog's offsets are symmetric but for RightArm's 1.5 mm lateral offset.
    assert np.abs(mirrored_positions - expected).max() < 0.002
    twice = mirror_clip(mirrored)
    assert np.array_equal(twice.local_rotations, motion.local_rotations)
    assert np.array_equal(twice.root_positions_cm, motion.root_positions_cm)

import numpy as np
import pytest
from canis.runtime.ik import FullBodyIk
from canis.runtime.kinematics import forward_kinematics
from canis.runtime.poses import load_keyframes
from canis.runtime.root import yaw_quaternion
from canis.runtime.rotations import quat_multiply
from canis.runtime.terrain import procedural


def standing(dog, yaw, xz=(1.3, 0.7)):
    stand = load_keyframes()["stand"]
    local = stand.local_rotations[None].astype(np.float32).copy()
    local[:, 0] = quat_multiply(yaw_quaternion(np.array([yaw])), local[:, 0])
    hips = np.array([[xz[0], stand.hips_height_m, xz[1]]])
    return local, hips


@pytest.mark.parametrize("terrain", ["slope", "hills", "steps"])
@pytest.mark.parametrize("yaw", [0.0, np.pi / 2, np.pi])
def test_paws_land_on_the_terrain_and_bones_keep_their_length(dog, terrain, yaw):
    local, hips = standing(dog, yaw)
    flat, _ = forward_kinematics(dog, local, hips)
    wanted = flat[0, dog.group("paws"), 1]  # the paws' height above flat ground
    heightmap = procedural(terrain)
    facing = np.array([[np.sin(yaw), 0.0, np.cos(yaw)]])
    ik = FullBodyIk(dog, 1)
    local2, hips2, _ = ik.solve(local, hips, np.zeros(1), facing, heightmap, 1 / 60)
    positions, _ = forward_kinematics(dog, local2, hips2)
    paws = positions[0, dog.group("paws")]
    above = paws[:, 1] - heightmap.sample(paws[:, [0, 2]])[0]
    assert np.abs(above - wanted).max() < 0.01
    bones = np.linalg.norm(positions[0, 1:] - positions[0, dog.parents[1:]], axis=-1)
    assert np.allclose(bones, dog.bone_lengths_m()[1:], atol=1e-5)


def test_ik_eases_out_when_switched_off(dog):
    local, hips = standing(dog, 0.0)
    slope = procedural("slope")
    ik = FullBodyIk(dog, 1)
    ik.enabled = False
    lifts = []
    for _ in range(30):
        _, hips2, _ = ik.solve(local, hips, np.zeros(1), np.array([[0, 0, 1.0]]), slope, 1 / 60)
        lifts.append(hips2[0, 1] - hips[0, 1])
    assert np.all(np.diff(np.abs(lifts)) <= 1e-9)  # monotone, no pop
    assert ik.weight[0] == pytest.approx(0.5 ** (30 / 60 / 0.15), rel=1e-6)


def test_contact_estimate():
    from canis.runtime.ik import estimate_contacts

    heights = np.array([[0.01, 0.2, 0.01, 0.01]])
    velocities = np.zeros((1, 4, 3))
    velocities[0, 2] = [1.0, 0.0, 0.0]  # a low paw that slides fast is not planted
    assert estimate_contacts(heights, velocities).tolist() == [[True, False, False, True]]


@pytest.mark.parametrize("terrain", ["flat", "hills", "slope"])
def test_a_paw_the_pose_sinks_below_the_ground_is_lifted_onto_it(dog, terrain):
    """The network's own lie sinks a front paw up to 24 cm below flat ground (issue 20's
    penetration tail): a lying dog 10 cm too low keeps its front paws on or above the ground
    (hind paws are not lifted yet: native/src/ik.cpp says why)."""
    from canis.runtime.ik import FLAT_GROUND

    lie = load_keyframes()["lie"]
    local = lie.local_rotations[None].astype(np.float32).copy()
    hips = np.array([[1.3, lie.hips_height_m - 0.10, 0.7]])
    heightmap = FLAT_GROUND if terrain == "flat" else procedural(terrain)
    sunk, _ = forward_kinematics(dog, local, hips)  # the network's pose, on its flat ground
    front = dog.group("paws")[:2]
    assert sunk[0, front, 1].min() < -0.05  # really sunk
    ik = FullBodyIk(dog, 1)
    local2, hips2, _ = ik.solve(local, hips, np.zeros(1), np.array([[0, 0, 1.0]]), heightmap, 0)
    positions, _ = forward_kinematics(dog, local2, hips2)
    paws = positions[0, front]
    assert (paws[:, 1] - heightmap.sample(paws[:, [0, 2]])[0]).min() > -0.01

"""The dog's body mesh (runtime/body.py, made by tools/dog_mesh.py) and its skinning."""

import numpy as np
import pytest
from canis.runtime.body import load_body_mesh, skin_vertices, skinning_matrices
from canis.runtime.kinematics import forward_kinematics
from canis.runtime.skeleton import Skeleton, shipped_dog_skeleton_path


@pytest.fixture(scope="module")
def mesh():
    return load_body_mesh()


@pytest.fixture(scope="module")
def skeleton():
    return Skeleton.from_json(shipped_dog_skeleton_path())


def _edges(triangles):
    edges = np.sort(
        np.concatenate([triangles[:, [0, 1]], triangles[:, [1, 2]], triangles[:, [2, 0]]]), axis=1
    )
    _, counts = np.unique(edges, axis=0, return_counts=True)
    return counts


def test_shipped_mesh_is_a_small_closed_skinned_surface(mesh, skeleton):
    assert mesh.joint_names == skeleton.joint_names
    assert 2000 <= mesh.vertex_count <= 6000
    assert np.all(_edges(mesh.triangles) == 2), "not closed: an edge without exactly 2 faces"
    tri = mesh.positions_m[mesh.triangles].astype(np.float64)
    volume = np.einsum("ij,ij->i", tri[:, 0], np.cross(tri[:, 1], tri[:, 2])).sum() / 6
    assert volume > 0, "triangles face inward"
    assert np.allclose(mesh.weights.sum(axis=1), 1.0, atol=1e-5)
    assert np.all(mesh.weights >= 0)
    # Every vertex leans mostly on a joint that carries a bone (end sites carry none).
    has_children = np.zeros(skeleton.joint_count, bool)
    has_children[skeleton.parents[1:]] = True
    assert np.all(has_children[mesh.joints[:, 0]])


def test_body_is_shaped_like_a_dog(mesh, skeleton):
    """Standing in its bind pose facing +z: paws on the ground, the head in front, the tail
    behind, longer than wide, the ears the highest points."""
    p = mesh.positions_m
    size = p.max(axis=0) - p.min(axis=0)
    assert -0.01 < p[:, 1].min() < 0.01  # paws on the ground
    assert 0.45 < size[1] < 0.8 and 0.7 < size[2] < 1.2 and 0.15 < size[0] < 0.35
    weight_of = lambda name: mesh.weights[:, 0] * (mesh.joints[:, 0] == skeleton.index(name))  # noqa: E731
    front = p[:, 2] > p[:, 2].max() - 0.05
    assert np.mean(weight_of("Head")[front] > 0.5) > 0.9, "the frontmost part is not the head"
    back = p[:, 2] < p[:, 2].min() + 0.05
    tail = weight_of("Tail")[back] + weight_of("Tail1")[back]
    assert np.mean(tail > 0.5) > 0.9, "the rearmost part is not the tail"
    top = p[:, 1] > p[:, 1].max() - 0.03
    assert np.mean(weight_of("Head")[top] > 0.5) > 0.9, "the ears are not on top"
    # Four legs: below the belly the body splits into four separate columns of vertices.
    low = p[(p[:, 1] > 0.12) & (p[:, 1] < 0.16)]
    quadrants = {(x > 0, z > p[:, 2].mean() - 0.1) for x, _, z in low}
    assert len(quadrants) == 4


def test_bind_pose_skins_to_itself(mesh):
    matrices = skinning_matrices(mesh, mesh.bind_positions_m, mesh.bind_rotations)
    assert np.allclose(matrices, np.eye(4), atol=1e-5)
    assert np.allclose(skin_vertices(mesh, matrices), mesh.positions_m, atol=1e-5)


def test_skinned_body_follows_a_pose(mesh, skeleton):
    """Pose the skeleton (the hips moved and turned, a front leg swung at the shoulder): the
    lower leg turns as one piece, so its vertices keep their distances from the paw."""
    from canis.runtime.rotations import quat_from_axis_angle, quat_multiply

    local = mesh.bind_local_rotations.copy()
    turn = quat_from_axis_angle(np.array([0.0, 1.0, 0.0]), np.array(1.2))
    local[0] = quat_multiply(turn, local[0])
    arm = skeleton.index("LeftArm")
    local[arm] = quat_multiply(
        local[arm], quat_from_axis_angle(np.array([0.0, 0.0, 1.0]), np.array(0.7))
    )
    positions, rotations = forward_kinematics(skeleton, local[None], np.array([[2.0, 0.6, -1.0]]))
    skinned = skin_vertices(mesh, skinning_matrices(mesh, positions[0], rotations[0]))
    hand = skeleton.index("LeftHand")
    lower_leg = skeleton.indices(["LeftForeArm", "LeftHand", "LeftHandSite"])
    on_paw = (np.isin(mesh.joints, lower_leg) * mesh.weights).sum(axis=1) > 0.999
    assert on_paw.sum() > 50
    before = np.linalg.norm(mesh.positions_m[on_paw] - mesh.bind_positions_m[hand], axis=1)
    after = np.linalg.norm(skinned[on_paw] - positions[0, hand], axis=1)
    assert np.allclose(before, after, atol=1e-4)
    assert np.linalg.norm(positions[0, hand] - mesh.bind_positions_m[hand]) > 1.0  # it moved


def test_a_bad_mesh_file_gets_a_clear_error(tmp_path):
    bad = tmp_path / "body.npz"
    np.savez(bad, positions_m=np.zeros((3, 3)))
    with pytest.raises(ValueError, match="body.npz: not a valid body mesh file"):
        load_body_mesh(bad)


def test_canis_mesh_regenerates_the_shipped_mesh(tmp_path, mesh, skeleton):
    """The shipped asset is what its command makes (same size and shape)."""
    pytest.importorskip("skimage")
    pytest.importorskip("fast_simplification")
    from canis.cli import main

    out = tmp_path / "dog_body.npz"
    assert main(["mesh", "--out", str(out)]) == 0
    made = load_body_mesh(out)
    assert abs(made.vertex_count - mesh.vertex_count) <= 0.02 * mesh.vertex_count
    for axis in range(3):
        assert made.positions_m[:, axis].min() == pytest.approx(
            mesh.positions_m[:, axis].min(), abs=0.003
        )
        assert made.positions_m[:, axis].max() == pytest.approx(
            mesh.positions_m[:, axis].max(), abs=0.003
        )
    assert np.allclose(made.bind_rotations, mesh.bind_rotations, atol=1e-6)

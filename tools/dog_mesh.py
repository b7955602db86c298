"""`canis mesh`: makes the dog's body mesh (assets/mesh/dog_body.npz) from the skeleton.

There is no licensed dog mesh to ship, so the body is built from the bones: an implicit
surface, the smooth union of tapered capsules and ellipsoids placed along the bones of a
symmetric standing bind pose, sampled on a grid and meshed by scikit-image's marching cubes,
then smoothed (Taubin) and decimated by fast-simplification's quadric decimation. Skin
weights come from the same primitives: each vertex is weighted to the joints whose primitives
are nearest to it (up to 4), so joints blend where their shapes blend.

Needs the `mesh` extra (scikit-image, fast-simplification); the runtime only reads the result.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from canis.runtime.body import INFLUENCES_PER_VERTEX, BodyMesh
from canis.runtime.skeleton import Skeleton
from canis.tools.dog_shape import Primitive, bind_pose, dog_primitives, smooth_min

GRID_STEP_M = 0.004
TARGET_VERTICES = 4000
WEIGHT_FALLOFF_M = 0.02  # how far past its nearest primitive a joint's influence reaches


# --- meshing -----------------------------------------------------------------------------


def _grid(prims: list[Primitive], step_m: float):
    lower = np.min([p.lower_m for p in prims], axis=0) - 3 * step_m
    upper = np.max([p.upper_m for p in prims], axis=0) + 3 * step_m
    axes = [np.arange(lo, hi + step_m, step_m) for lo, hi in zip(lower, upper, strict=True)]
    return lower, axes


def sample_field(prims: list[Primitive], step_m: float) -> tuple[np.ndarray, np.ndarray]:
    """The smooth union's distance on a grid (X, Y, Z), and the grid's origin."""
    origin, axes = _grid(prims, step_m)
    field = np.full([len(a) for a in axes], 1.0, dtype=np.float32)
    for prim in prims:
        if not prim.shape:
            continue
        margin = prim.blend_m + 2 * step_m
        lo = np.maximum(((prim.lower_m - margin - origin) / step_m).astype(int), 0)
        hi = np.minimum(((prim.upper_m + margin - origin) / step_m).astype(int) + 2, field.shape)
        box = tuple(slice(a, b) for a, b in zip(lo, hi, strict=True))
        points = np.stack(
            np.meshgrid(*(ax[s] for ax, s in zip(axes, box, strict=True)), indexing="ij"), -1
        )
        field[box] = smooth_min(field[box], prim.distance(points), prim.blend_m)
    return field, origin


def _taubin(vertices: np.ndarray, faces: np.ndarray, iterations: int = 10) -> np.ndarray:
    """Taubin smoothing (lambda/mu): removes the marching-cubes staircase without shrinking."""
    from scipy.sparse import coo_matrix, diags

    n = len(vertices)
    edges = np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]])
    edges = np.concatenate([edges, edges[:, ::-1]])
    adjacency = coo_matrix((np.ones(len(edges)), (edges[:, 0], edges[:, 1])), shape=(n, n)).tocsr()
    adjacency.data[:] = 1.0
    average = diags(1.0 / np.asarray(adjacency.sum(axis=1)).ravel()) @ adjacency
    v = vertices.copy()
    for _ in range(iterations):
        for factor in (0.5, -0.53):
            v = v + factor * (average @ v - v)
    return v


def _signed_volume(vertices: np.ndarray, faces: np.ndarray) -> float:
    tri = vertices[faces]
    return float(np.einsum("ij,ij->i", tri[:, 0], np.cross(tri[:, 1], tri[:, 2])).sum() / 6.0)


def vertex_normals(vertices: np.ndarray, faces: np.ndarray) -> np.ndarray:
    """Area-weighted vertex normals of a counter-clockwise mesh."""
    tri = vertices[faces]
    face_normals = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    normals = np.zeros_like(vertices)
    for corner in range(3):
        np.add.at(normals, faces[:, corner], face_normals)
    return normals / np.maximum(np.linalg.norm(normals, axis=1, keepdims=True), 1e-12)


def skin_weights(
    prims: list[Primitive], vertices: np.ndarray, joints: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Up to 4 joints per vertex from the primitives' distances: exp(-(d - d_min) / falloff)
    summed per joint, the 4 largest kept and normalised. Also each vertex's colour, from the
    nearest primitive."""
    shapes = [p for p in prims if p.shape]
    distances = np.stack([p.distance(vertices) for p in shapes], axis=1)  # (V, P)
    influence = np.exp(-(distances - distances.min(axis=1, keepdims=True)) / WEIGHT_FALLOFF_M)
    per_joint = np.zeros((len(vertices), joints))
    for i, prim in enumerate(shapes):
        per_joint[:, prim.joint] += influence[:, i]
    order = np.argsort(-per_joint, axis=1)[:, :INFLUENCES_PER_VERTEX]
    weights = np.take_along_axis(per_joint, order, axis=1)
    weights[weights < 0.02 * weights[:, :1]] = 0.0  # drop negligible influences
    weights /= weights.sum(axis=1, keepdims=True)
    palette = np.array([p.colour for p in prims], dtype=float)
    # Colours blend over a short distance so patches have soft edges.
    distances = np.stack([p.distance(vertices) for p in prims], axis=1)
    tint = np.exp(-(distances - distances.min(axis=1, keepdims=True)) / 0.008)
    colours = (tint @ palette) / tint.sum(axis=1, keepdims=True)
    return order.astype(np.uint8), weights.astype(np.float32), colours.round().astype(np.uint8)


def make_dog_mesh(
    skeleton: Skeleton,
    step_m: float = GRID_STEP_M,
    target_vertices: int = TARGET_VERTICES,
    chest_depth: float = 1.0,
) -> BodyMesh:
    from fast_simplification import simplify
    from skimage.measure import marching_cubes

    local, positions, rotations = bind_pose(skeleton)
    prims = dog_primitives(skeleton, positions, chest_depth)
    field, origin = sample_field(prims, step_m)
    vertices, faces, _, _ = marching_cubes(field, 0.0, spacing=(step_m,) * 3)
    vertices = vertices + origin
    if _signed_volume(vertices, faces) < 0:  # the viewer and glTF want outward fronts CCW
        faces = faces[:, ::-1]
    vertices = _taubin(vertices, faces)
    reduction = 1.0 - target_vertices / len(vertices)
    vertices, faces = simplify(vertices.astype(np.float32), faces.astype(np.int64), reduction)
    vertices = _taubin(vertices.astype(np.float64), faces, iterations=3)
    normals = vertex_normals(vertices, faces)
    joints, weights, colours = skin_weights(prims, vertices, skeleton.joint_count)
    return BodyMesh(
        joint_names=skeleton.joint_names,
        positions_m=vertices.astype(np.float32),
        normals=normals.astype(np.float32),
        colours=colours,
        triangles=faces.astype(np.uint32),
        joints=joints,
        weights=weights,
        bind_local_rotations=local,
        bind_positions_m=positions,
        bind_rotations=rotations,
    )


def write_dog_mesh(out: Path, skeleton: Skeleton) -> BodyMesh:
    mesh = make_dog_mesh(skeleton)
    out.parent.mkdir(parents=True, exist_ok=True)
    mesh.save(out)
    return mesh

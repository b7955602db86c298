"""A game's own dog: a skinned glTF 2.0 quadruped the controller's motion is retargeted onto
(runtime/retarget.py), of any proportions, joint names and joint count.

Rig.load reads the file (runtime/rig_gltf.py), maps its joints to the controller's
(runtime/rig_mapping.py), and puts it in the controller's frame of reference: the rig's hips
become joint 0 (joints above or beside them follow the hips rigidly), it is turned about +y to
face +z (hips to chest) and placed with its hips above the origin and its lowest paw tip on
y = 0. Its bone offsets are its rest pose's own, so the pose drawn has the rig's bone lengths
exactly. A rig is refused, naming the file and the joint, when it has no skin (or several and
none is chosen), a joint cycle, a non-finite transform, a zero-length leg bone, a mapping
naming a joint it lacks, a required chain missing, or a leg that does not reach the ground in
the rest pose.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from canis.runtime.body import joint_matrices
from canis.runtime.rig_gltf import GltfSkin, RigError, load_gltf
from canis.runtime.rig_mapping import LEGS, resolve
from canis.runtime.root import yaw_from_direction, yaw_quaternion
from canis.runtime.rotations import quat_conjugate, quat_from_matrix, quat_multiply
from canis.runtime.skeleton import DOG_LEG_GROUPS

__all__ = ["Rig", "RigError", "RigMesh", "RigSkeleton"]

# A leg bone shorter than this is refused: the IK divides by leg bones' lengths.
MIN_LEG_BONE_M = 1e-4
# A paw tip this far above the lowest paw tip, as a share of its leg's length from its first
# joint, does not stand on the ground in the rest pose.
MAX_PAW_LIFT = 0.25


@dataclass(frozen=True)
class RigSkeleton:
    """The rig's joints as runtime/kinematics.py reads a skeleton: parents first, offsets in
    each parent's frame (metres), and the dog's groups (paws, legs) by the rig's joints."""

    joint_names: tuple[str, ...]
    parents: np.ndarray  # (J,) int32, -1 for the hips
    offsets_m: np.ndarray  # (J, 3) float32
    groups: dict = field(repr=False)  # group name -> rig joint indices
    controller_joints: dict = field(default_factory=dict, repr=False)  # dog joint -> index

    @property
    def joint_count(self) -> int:
        return len(self.joint_names)

    def index(self, name: str) -> int:
        """A joint by the rig's name or, failing that, by the controller's joint it plays
        (what code written for the dog, such as the viewer's, asks for)."""
        if name in self.joint_names:
            return self.joint_names.index(name)
        if name in self.controller_joints:
            return self.controller_joints[name]
        raise KeyError(f"rig has no joint named {name!r}")

    def group(self, group_name: str) -> np.ndarray:
        if group_name not in self.groups:
            raise KeyError(f"rig has no joint group {group_name!r}")
        return np.asarray(self.groups[group_name], dtype=np.int32)

    def bone_lengths_m(self) -> np.ndarray:
        return np.linalg.norm(self.offsets_m, axis=-1)


@dataclass(frozen=True)
class RigMesh:
    """The rig's skinned mesh: bind-space vertices, joint influences by rig joint index, and
    each rig joint's inverse bind matrix (4x4, row-major), as runtime/body.py's skinning reads."""

    positions_m: np.ndarray  # (V, 3) float32
    normals: np.ndarray  # (V, 3) float32
    colours: np.ndarray  # (V, 3) uint8, sRGB
    triangles: np.ndarray  # (T, 3) uint32
    joints: np.ndarray  # (V, 4) uint8 or uint16, rig joint indices
    weights: np.ndarray  # (V, 4) float32
    inverse_bind_matrices: np.ndarray  # (J, 4, 4) float64
    joint_names: tuple[str, ...] = ()

    @property
    def vertex_count(self) -> int:
        return len(self.positions_m)


@dataclass(frozen=True)
class Rig:
    path: Path
    skeleton: RigSkeleton
    mapping: dict  # controller joint name -> rig joint index
    rest_local_rotations: np.ndarray  # (J, 4) (w, x, y, z); the hips' is in the root frame
    rest_positions_m: np.ndarray  # (J, 3) in the root frame: facing +z, lowest paw on y = 0
    rest_rotations: np.ndarray  # (J, 4) in the root frame
    mesh: RigMesh | None

    @property
    def joint_names(self) -> tuple[str, ...]:
        return self.skeleton.joint_names

    @property
    def leg_lengths_m(self) -> np.ndarray:
        """(4,) each leg's length along its bones, first joint to paw tip (DOG_LEG_GROUPS)."""
        p = self.rest_positions_m
        chains = [self.skeleton.group(leg) for leg in DOG_LEG_GROUPS]
        return np.array([np.linalg.norm(np.diff(p[c], axis=0), axis=1).sum() for c in chains])

    @property
    def hips_height_m(self) -> float:
        return float(self.rest_positions_m[0, 1])

    def skinning_matrices(self, positions_m: np.ndarray, rotations: np.ndarray) -> np.ndarray:
        """(..., J, 4, 4) float32 matrices taking the mesh's bind-space vertices to a pose."""
        if self.mesh is None:
            raise ValueError(f"{self.path}: the rig has no skinned mesh")
        pose = joint_matrices(positions_m, rotations)
        return (pose @ self.mesh.inverse_bind_matrices).astype(np.float32)

    @classmethod
    def load(cls, path: str | Path, mapping=None, skin: int | str | None = None) -> Rig:
        """The rig in the glTF file at `path`; `mapping`: a mapping file's path or a dict of
        its entries, over the proposal (runtime/rig_mapping.py); `skin`: which skin (index or
        name) of a file with several. RigError (a ValueError) naming the file and joint when
        it cannot be used."""
        source = load_gltf(path, skin)
        positions = source.rest_world[:, :3, 3]
        chosen = resolve(source.path, source.joint_names, source.parents, positions, mapping)
        return _build(source, chosen)


def _reroot(parents: np.ndarray, hips: int) -> tuple[list[int], dict[int, int]]:
    """The joints in an order starting at the hips, parents first, and each one's new parent:
    the hips' subtree keeps its hierarchy; a joint above the hips, or beside them with no
    joint between it and them, hangs from the hips."""
    above = set()
    j = int(parents[hips])
    while j >= 0:
        above.add(j)
        j = int(parents[j])
    new_parent = {}
    for j, p in enumerate(parents):
        if j == hips:
            continue
        new_parent[j] = hips if (p < 0 or p in above or j in above) else int(p)
    children = {j: [] for j in range(len(parents))}
    for j in range(len(parents)):  # siblings in the skin's order
        if j != hips:
            children[new_parent[j]].append(j)
    order, stack = [], [hips]
    while stack:  # depth first, as BVH lists joints (an export then keeps this order)
        j = stack.pop()
        order.append(j)
        stack.extend(reversed(children[j]))
    return order, new_parent


def _build(source: GltfSkin, chosen: dict) -> Rig:
    path, names = source.path, source.joint_names
    order, new_parent = _reroot(source.parents, chosen["Hips"])
    new_index = {old: new for new, old in enumerate(order)}
    parents = np.array([-1] + [new_index[new_parent[j]] for j in order[1:]], dtype=np.int32)
    mapping = {dog: new_index[j] for dog, j in chosen.items()}
    world = source.rest_world[order]
    paws = [mapping[LEGS[leg][-1]] for leg in DOG_LEG_GROUPS]
    axes = world[:, :3, :3]
    scales = np.linalg.norm(axes, axis=1, keepdims=True)  # a scaled joint: its rotation only
    positions, rotations = standing_frame(
        world[:, :3, 3], axes / np.maximum(scales, 1e-12), mapping["Spine1"], paws
    )
    local = rotations.copy()
    local[1:] = quat_multiply(quat_conjugate(rotations[parents[1:]]), rotations[1:])
    offsets = np.zeros((len(order), 3))
    offsets[1:] = np.einsum(
        "jki,jk->ji", _matrix(rotations[parents[1:]]), positions[1:] - positions[parents[1:]]
    )
    new_names = tuple(names[j] for j in order)
    groups = {leg: tuple(mapping[j] for j in LEGS[leg]) for leg in DOG_LEG_GROUPS}
    groups["paws"] = tuple(paws)
    groups["tail"] = _tail_chain(mapping, parents)
    skeleton = RigSkeleton(new_names, parents, offsets.astype(np.float32), groups, dict(mapping))
    _check_legs(path, skeleton, positions)
    mesh = None
    scale_matrices = np.repeat(np.eye(4)[None], len(order), axis=0)
    scale_matrices[:, [0, 1, 2], [0, 1, 2]] = scales[:, 0, :]
    if source.mesh is not None:
        m = source.mesh
        old_to_new = np.array([new_index[j] for j in range(len(order))])
        if m["joints"].max(initial=0) >= len(order):
            raise RigError(f"{path}: the mesh names joint {m['joints'].max()}, past the skin's")
        joints = old_to_new[m["joints"]].astype(np.uint8 if len(order) < 256 else np.uint16)
        mesh = RigMesh(
            m["positions_m"],
            m["normals"],
            m["colours"],
            m["triangles"],
            joints,
            m["weights"],
            # The pose's joint matrices carry no scale: a scaled joint's scale moves into its
            # inverse bind matrix, which is where the mesh meets it.
            scale_matrices @ source.inverse_bind[order],
            new_names,
        )
    return Rig(path, skeleton, mapping, local, positions, rotations, mesh)


def standing_frame(
    positions_m: np.ndarray, rotations: np.ndarray, chest: int, paws
) -> tuple[np.ndarray, np.ndarray]:
    """A standing pose (joint 0 the hips; world positions (J, 3) and rotation matrices
    (J, 3, 3)) in the frame the retargeting compares rest poses in: turned about +y so that the
    hips-to-chest direction faces +z, the hips above the origin, the lowest paw on y = 0.
    Returns positions (J, 3) and rotations (J, 4). The rig's rest pose and the dog's standing
    keyframe both go through it, so two poses that differ only there retarget to each other
    unchanged."""
    turn = _matrix(yaw_quaternion(-yaw_from_direction(positions_m[chest] - positions_m[0])))
    positions = positions_m @ turn.T
    positions -= [positions[0, 0], positions[list(paws), 1].min(), positions[0, 2]]
    return positions, quat_from_matrix(turn @ rotations)


def _matrix(q: np.ndarray) -> np.ndarray:
    from canis.runtime.rotations import quat_to_matrix

    return quat_to_matrix(np.asarray(q, dtype=np.float64))


def _tail_chain(mapping: dict, parents: np.ndarray) -> tuple[int, ...]:
    """The rig's tail as the IK keeps it above the ground (runtime/kinematics.py): its joints
    from the one playing Tail to the furthest mapped one, every rig joint between included
    (a chain the IK can bend); none when the rig has no tail."""
    root = mapping.get("Tail")
    tips = [mapping.get(name) for name in ("Tail1Site", "Tail1") if mapping.get(name) is not None]
    if root is None or not tips:
        return ()
    chain = [tips[0]]
    while chain[-1] != root and parents[chain[-1]] >= 0:
        chain.append(int(parents[chain[-1]]))
    return tuple(reversed(chain)) if chain[-1] == root else ()


def _check_legs(path: Path, skeleton: RigSkeleton, positions: np.ndarray) -> None:
    """Zero-length leg bones and legs that do not reach the ground, named."""
    for leg in DOG_LEG_GROUPS:
        chain = skeleton.group(leg)
        steps = np.linalg.norm(np.diff(positions[chain], axis=0), axis=1)
        short = np.flatnonzero(~(steps >= MIN_LEG_BONE_M))
        if len(short):
            joint = skeleton.joint_names[chain[short[0] + 1]]
            raise RigError(
                f"{path}: joint {joint!r} ({leg.replace('_', ' ')}) has a zero-length bone"
            )
        reach = steps.sum()
        top, paw = positions[chain[0], 1], positions[chain[-1], 1]
        if paw > MAX_PAW_LIFT * reach or top > reach:
            raise RigError(
                f"{path}: its {leg.replace('_', ' ')} ({skeleton.joint_names[chain[0]]} to "
                f"{skeleton.joint_names[chain[-1]]}) does not reach the ground in the rest pose "
                f"(paw tip {paw * 100:.1f} cm up, leg {reach * 100:.1f} cm long)"
            )

"""Reading a skinned glTF 2.0 file (.glb or .gltf, through pygltflib) for runtime/rig.py: the
skin's joints, their hierarchy, their rest transforms in the file's world and the skinned
mesh. Everything that makes the file unusable is refused here, before any other work, as one
line naming the file and, where there is one, the joint.

The rest pose is the pose the nodes' own transforms (translation, rotation, scale or matrix)
put the joints in: what a modelling tool shows with no animation playing. The mesh is drawn
through the skin's inverse bind matrices, so it may be bound in another pose.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from canis.runtime.rotations import quat_to_matrix

# glTF accessor component types and element sizes (the specification's table).
_COMPONENTS = {
    5120: np.int8,
    5121: np.uint8,
    5122: np.int16,
    5123: np.uint16,
    5125: np.uint32,
    5126: np.float32,
}
_WIDTHS = {"SCALAR": 1, "VEC2": 2, "VEC3": 3, "VEC4": 4, "MAT4": 16}


class RigError(ValueError):
    """A rig file or mapping that cannot be used: one line naming the file and the joint."""


@dataclass(frozen=True)
class GltfSkin:
    """One skin of a file: its joints in the skin's order, each joint's parent (an index into
    the same order; -1 for a joint with no joint above it), their rest transforms in the
    file's world frame (4x4, metres), the inverse bind matrices, and the skinned mesh (None
    when no node draws one with this skin)."""

    path: Path
    joint_names: tuple[str, ...]
    parents: np.ndarray  # (J,) int
    rest_world: np.ndarray  # (J, 4, 4) float64
    inverse_bind: np.ndarray  # (J, 4, 4) float64, row-major
    mesh: dict | None  # positions, normals, triangles, joints, weights, colours (or None)


def _node_matrix(node) -> np.ndarray:
    """A node's local transform (4x4) from its matrix or its translation/rotation/scale."""
    if node.matrix is not None:
        return np.array(node.matrix, dtype=np.float64).reshape(4, 4).T  # column-major
    m = np.eye(4)
    if node.rotation is not None:
        x, y, z, w = node.rotation
        m[:3, :3] = quat_to_matrix(np.array([w, x, y, z], dtype=np.float64))
    if node.scale is not None:
        m[:3, :3] = m[:3, :3] * np.array(node.scale, dtype=np.float64)[None, :]
    if node.translation is not None:
        m[:3, 3] = node.translation
    return m


def _buffers(gltf, path: Path) -> list[bytes]:
    """Every buffer's bytes: the .glb's binary chunk, a data URI, or a file beside the .gltf."""
    data = []
    for i, buffer in enumerate(gltf.buffers or []):
        if not buffer.uri:
            data.append(gltf.binary_blob() or b"")
        elif buffer.uri.startswith("data:"):
            data.append(gltf.decode_data_uri(buffer.uri))
        else:
            try:
                data.append((path.parent / buffer.uri).read_bytes())
            except OSError as error:
                raise RigError(
                    f"{path}: buffer {i} ({buffer.uri}) cannot be read: {error}"
                ) from None
    return data


def read_accessor(gltf, buffers: list[bytes], index: int) -> np.ndarray:
    """An accessor's elements as an (count, width) array (normalised integers kept raw)."""
    accessor = gltf.accessors[index]
    dtype = np.dtype(_COMPONENTS[accessor.componentType])
    width = _WIDTHS[accessor.type]
    if accessor.bufferView is None:
        return np.zeros((accessor.count, width), dtype)
    view = gltf.bufferViews[accessor.bufferView]
    data = buffers[view.buffer]
    start = (view.byteOffset or 0) + (accessor.byteOffset or 0)
    stride = view.byteStride or dtype.itemsize * width
    rows = np.lib.stride_tricks.as_strided(
        np.frombuffer(data, dtype=np.uint8, offset=start),
        shape=(accessor.count, dtype.itemsize * width),
        strides=(stride, 1),
    )
    return np.ascontiguousarray(rows).view(dtype).reshape(accessor.count, width)


def load_gltf(path: str | Path, skin: int | str | None = None) -> GltfSkin:
    """The skin of the file at `path` (by index or name when the file has several)."""
    import pygltflib

    path = Path(path)
    if not path.is_file():
        raise RigError(f"{path}: no such rig file")
    try:
        gltf = pygltflib.GLTF2().load(str(path))
    except Exception as error:  # pygltflib raises whatever its parser met
        raise RigError(f"{path}: not a glTF 2.0 file ({type(error).__name__}: {error})") from None
    if gltf is None:
        raise RigError(f"{path}: not a glTF 2.0 file")
    skins = gltf.skins or []
    if not skins:
        raise RigError(f"{path}: has no skin (a rig needs a skinned joint hierarchy)")
    if skin is None and len(skins) > 1:
        names = ", ".join(repr(s.name or str(i)) for i, s in enumerate(skins))
        raise RigError(f"{path}: has {len(skins)} skins ({names}); choose one (skin=)")
    chosen = _choose_skin(path, skins, skin)
    nodes = gltf.nodes or []
    parent_of = _node_parents(path, nodes)
    joints = list(skins[chosen].joints or [])
    if not joints:
        raise RigError(f"{path}: skin {chosen} has no joints")
    names = [nodes[j].name or f"node{j}" for j in joints]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise RigError(f"{path}: joint name {duplicated[0]!r} is used twice")
    world = {}

    def world_of(node: int) -> np.ndarray:
        if node not in world:
            local = _node_matrix(nodes[node])
            above = parent_of.get(node)
            world[node] = local if above is None else world_of(above) @ local
        return world[node]

    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is refused just below
        rest_world = np.stack([world_of(j) for j in joints])
    bad = ~np.isfinite(rest_world).all(axis=(1, 2))
    if bad.any():
        raise RigError(f"{path}: joint {names[int(np.argmax(bad))]!r} has a non-finite transform")
    in_skin = {node: k for k, node in enumerate(joints)}
    parents = np.full(len(joints), -1)
    for k, node in enumerate(joints):
        above = parent_of.get(node)
        while above is not None and above not in in_skin:  # a plain node between two joints
            above = parent_of.get(above)
        parents[k] = -1 if above is None else in_skin[above]
    buffers = _buffers(gltf, path)
    if skins[chosen].inverseBindMatrices is not None:
        flat = read_accessor(gltf, buffers, skins[chosen].inverseBindMatrices).astype(np.float64)
        inverse_bind = flat.reshape(-1, 4, 4).transpose(0, 2, 1)
    else:  # the specification's default: identity matrices
        inverse_bind = np.repeat(np.eye(4)[None], len(joints), axis=0)
    if len(inverse_bind) != len(joints) or not np.isfinite(inverse_bind).all():
        raise RigError(f"{path}: skin {chosen}'s inverse bind matrices do not fit its joints")
    mesh = _skinned_mesh(gltf, buffers, nodes, chosen)
    return GltfSkin(path, tuple(names), parents, rest_world, inverse_bind, mesh)


def _choose_skin(path: Path, skins, skin) -> int:
    if skin is None:
        return 0
    if isinstance(skin, str):
        for i, s in enumerate(skins):
            if s.name == skin:
                return i
        raise RigError(f"{path}: has no skin named {skin!r}")
    if not 0 <= int(skin) < len(skins):
        raise RigError(f"{path}: has no skin {skin} (it has {len(skins)})")
    return int(skin)


def _node_parents(path: Path, nodes) -> dict[int, int]:
    """Each node's parent; a node listed as the child of two nodes, or a cycle, is refused
    naming a node on it."""
    parent_of: dict[int, int] = {}
    for p, node in enumerate(nodes):
        for child in node.children or []:
            if not 0 <= child < len(nodes):
                raise RigError(
                    f"{path}: node {node.name or p!r} has a child {child} that is not a node"
                )
            if child in parent_of or child == p:
                name = nodes[child].name or f"node{child}"
                raise RigError(
                    f"{path}: joint cycle at {name!r} (it has two parents or is its own)"
                )
            parent_of[child] = p
    for start in range(len(nodes)):
        seen, node = set(), start
        while node in parent_of:
            if node in seen:
                name = nodes[node].name or f"node{node}"
                raise RigError(f"{path}: joint cycle through {name!r}")
            seen.add(node)
            node = parent_of[node]
    return parent_of


def _skinned_mesh(gltf, buffers: list[bytes], nodes, skin: int) -> dict | None:
    """The triangles of every primitive of the meshes drawn with `skin`, merged: positions
    and normals in the skin's bind space, up to 4 joint influences per vertex."""
    parts = []
    for node in nodes:
        if node.skin != skin or node.mesh is None:
            continue
        for primitive in gltf.meshes[node.mesh].primitives:
            a = primitive.attributes
            if a.POSITION is None or a.JOINTS_0 is None or a.WEIGHTS_0 is None:
                continue
            positions = read_accessor(gltf, buffers, a.POSITION).astype(np.float32)
            count = len(positions)
            weights = read_accessor(gltf, buffers, a.WEIGHTS_0)
            if weights.dtype != np.float32:  # normalised integers
                weights = weights / float(np.iinfo(weights.dtype).max)
            weights = weights.astype(np.float32)
            weights /= np.maximum(weights.sum(axis=1, keepdims=True), 1e-12)
            normals = (
                read_accessor(gltf, buffers, a.NORMAL).astype(np.float32)
                if a.NORMAL is not None
                else np.tile(np.float32([0, 1, 0]), (count, 1))
            )
            if a.COLOR_0 is not None:
                colour = read_accessor(gltf, buffers, a.COLOR_0)[:, :3]
                if colour.dtype == np.float32:  # linear: back to sRGB bytes
                    c = np.clip(colour, 0, 1)
                    srgb = np.where(c <= 0.0031308, 12.92 * c, 1.055 * c ** (1 / 2.4) - 0.055)
                    colour = (srgb * 255).round()
                colours = colour.astype(np.uint8)
            else:
                colours = np.full((count, 3), 200, np.uint8)
            triangles = (
                read_accessor(gltf, buffers, primitive.indices).reshape(-1, 3).astype(np.uint32)
                if primitive.indices is not None
                else np.arange(count, dtype=np.uint32).reshape(-1, 3)
            )
            parts.append(
                (
                    positions,
                    normals,
                    colours,
                    triangles,
                    read_accessor(gltf, buffers, a.JOINTS_0),
                    weights,
                )
            )
    if not parts:
        return None
    offset, merged = 0, {k: [] for k in ("positions_m", "normals", "colours", "triangles")}
    merged.update(joints=[], weights=[])
    for positions, normals, colours, triangles, joints, weights in parts:
        merged["positions_m"].append(positions)
        merged["normals"].append(normals)
        merged["colours"].append(colours)
        merged["triangles"].append(triangles + offset)
        merged["joints"].append(joints.astype(np.int64))
        merged["weights"].append(weights)
        offset += len(positions)
    return {k: np.concatenate(v) for k, v in merged.items()}

"""Exporting a run's displayed motion for other tools and engines: glTF 2.0 binary (.glb:
the dog's body mesh, its skin and the animation, written with pygltflib) or BVH (the
skeleton and the animation, through the project's one BVH writer, training/bvh.py, which
needs only numpy).

Motion comes in as Controller.display_pose() gives it, one frame per step: world joint
positions (F, J, 3) in metres and world rotations (F, J, 4) (w, x, y, z). Files are written
to a temporary name beside the target and renamed into place, so a failed export or run
leaves nothing partial behind.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
from canis.runtime.body import BodyMesh, load_body_mesh
from canis.runtime.kinematics import local_rotations
from canis.runtime.skeleton import Skeleton

EXPORT_SUFFIXES = (".glb", ".bvh")
BVH_ROTATION_ORDER = "ZXY"  # the dog mocap's own order


def check_export_path(path: str | Path) -> Path:
    """The path, or ValueError naming it when its kind is unknown or its folder missing:
    checked before a run starts, so a typo does not cost the run."""
    path = Path(path)
    if path.suffix.lower() not in EXPORT_SUFFIXES:
        raise ValueError(
            f"--export {path}: unknown file type {path.suffix or '(none)'!r}; "
            f"use one of {', '.join(EXPORT_SUFFIXES)}"
        )
    if not path.parent.is_dir():
        raise ValueError(f"--export {path}: folder {path.parent} does not exist")
    if path.suffix.lower() == ".glb":
        try:
            import pygltflib  # noqa: F401
        except ImportError:
            raise ValueError(
                f"--export {path}: glTF export needs pygltflib (pip install 'canis[gltf]')"
            ) from None
    return path


def _continuous(quaternions: np.ndarray) -> np.ndarray:
    """Flips signs along time (axis 0) so consecutive quaternions are in one hemisphere:
    readers that interpolate component-wise then take the short way."""
    q = quaternions.copy()
    for f in range(1, len(q)):
        flip = np.sum(q[f] * q[f - 1], axis=-1) < 0
        q[f][flip] *= -1
    return q


def export_motion(
    path: str | Path,
    skeleton: Skeleton,
    positions_m: np.ndarray,
    rotations: np.ndarray,
    fps: float,
    mesh: BodyMesh | None = None,
    rig=None,
) -> Path:
    """Writes the motion to path (.glb or .bvh, by its suffix) atomically. With `rig` (a
    runtime.rig.Rig, `skeleton` its RigSkeleton), the .glb holds the rig's own mesh and its
    rest pose as the nodes' transforms."""
    path = check_export_path(path)
    positions_m, rotations = np.asarray(positions_m), np.asarray(rotations)
    frames, joints = rotations.shape[:2]
    if positions_m.shape != (frames, joints, 3) or joints != skeleton.joint_count or frames < 1:
        raise ValueError(
            f"export needs positions (F, {skeleton.joint_count}, 3) and rotations "
            f"(F, {skeleton.joint_count}, 4), got {positions_m.shape} and {rotations.shape}"
        )
    if path.suffix.lower() == ".glb" and rig is not None:
        if rig.mesh is None:
            raise ValueError(f"--export {path}: the rig {rig.path} has no mesh to write")
        hips = rig.rest_positions_m[0]
        arrays = SkinnedMeshArrays.of(rig.mesh)
        args = (arrays, skeleton, rig.rest_local_rotations, hips, positions_m, rotations, fps)
        data = skinned_glb_bytes(*args)
        _write_atomically(path, lambda temporary: temporary.write_bytes(data))
    elif path.suffix.lower() == ".glb":
        data = glb_bytes(mesh or load_body_mesh(), skeleton, positions_m, rotations, fps)
        _write_atomically(path, lambda temporary: temporary.write_bytes(data))
    else:
        motion = bvh_motion(skeleton, positions_m, rotations, fps, str(path))
        from canis.training.bvh import write_bvh

        _write_atomically(path, lambda temporary: write_bvh(temporary, motion))
    return path


def _write_atomically(path: Path, write) -> None:
    handle, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    os.close(handle)
    temporary = Path(name)
    umask = os.umask(0)
    os.umask(umask)
    try:
        write(temporary)
        os.chmod(temporary, 0o666 & ~umask)  # mkstemp's file is private; an export is not
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


# --- BVH ---------------------------------------------------------------------------------


def bvh_motion(skeleton: Skeleton, positions_m, rotations, fps: float, path: str = ""):
    """The motion as training.bvh's BvhMotion, in the dog data's units (centimetres)."""
    from canis.runtime.skeleton import METRES_PER_CENTIMETRE
    from canis.training.bvh import BvhMotion

    has_children = np.zeros(skeleton.joint_count, dtype=bool)
    has_children[skeleton.parents[1:]] = True
    return BvhMotion(
        path=path,
        joint_names=skeleton.joint_names,
        parents=skeleton.parents,
        offsets_cm=skeleton.offsets_m.astype(np.float64) / METRES_PER_CENTIMETRE,
        rotation_orders=tuple(BVH_ROTATION_ORDER if c else "" for c in has_children),
        frame_time_s=1.0 / fps,
        root_positions_cm=np.asarray(positions_m, np.float64)[:, 0] / METRES_PER_CENTIMETRE,
        local_rotations=local_rotations(skeleton, rotations),
    )


# --- glTF --------------------------------------------------------------------------------


def _srgb_to_linear(colours_u8: np.ndarray) -> np.ndarray:
    c = colours_u8.astype(np.float32) / 255.0
    return np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4).astype(np.float32)


def glb_bytes(
    mesh: BodyMesh,
    skeleton: Skeleton,
    positions_m: np.ndarray | None = None,
    rotations: np.ndarray | None = None,
    fps: float = 60.0,
) -> bytes:
    """A .glb holding the body mesh skinned to a node per joint (the bind pose as the nodes'
    rest transforms) and, when a motion is given, one animation of it: each joint's local
    rotation and the hips' translation per frame, linearly interpolated."""
    if mesh.joint_names != skeleton.joint_names:
        raise ValueError("the body mesh was made for another skeleton (joint names differ)")
    return skinned_glb_bytes(
        SkinnedMeshArrays.of(mesh),
        skeleton,
        mesh.bind_local_rotations,
        mesh.bind_positions_m[0],
        positions_m,
        rotations,
        fps,
    )


@dataclass(frozen=True)
class SkinnedMeshArrays:
    """What a skinned glTF mesh holds: bind-space vertices, sRGB colours, up to 4 joint
    influences per vertex and each joint's inverse bind matrix (row-major)."""

    positions_m: np.ndarray
    normals: np.ndarray
    colours: np.ndarray
    triangles: np.ndarray
    joints: np.ndarray
    weights: np.ndarray
    inverse_bind_matrices: np.ndarray

    @classmethod
    def of(cls, mesh) -> SkinnedMeshArrays:
        """From a BodyMesh or a runtime.rig.RigMesh (the same fields)."""
        return cls(*(getattr(mesh, f.name) for f in fields(cls)))


def skinned_glb_bytes(
    mesh: SkinnedMeshArrays,
    skeleton,
    rest_local_rotations: np.ndarray,
    hips_position_m: np.ndarray,
    positions_m: np.ndarray | None = None,
    rotations: np.ndarray | None = None,
    fps: float = 60.0,
) -> bytes:
    """A .glb of a mesh skinned to a node per joint of `skeleton` (a Skeleton or a rig's
    RigSkeleton: names, parents first, offsets in each parent's frame), the nodes at
    `rest_local_rotations` with the hips at `hips_position_m`, and, when a motion is given
    (world positions (F, J, 3), rotations (F, J, 4)), one animation of it: each joint's local
    rotation and the hips' translation per frame."""
    import pygltflib as gl

    joint_names, parents, offsets_m = skeleton.joint_names, skeleton.parents, skeleton.offsets_m
    blob = bytearray()
    views, accessors = [], []

    def add(
        array: np.ndarray, kind: str, component: int, target=None, normalized=False, bounds=False
    ):
        while len(blob) % 4:
            blob.append(0)
        data = np.ascontiguousarray(array)
        views.append(
            gl.BufferView(buffer=0, byteOffset=len(blob), byteLength=data.nbytes, target=target)
        )
        blob.extend(data.tobytes())
        flat = data.reshape(len(data), -1)
        accessors.append(
            gl.Accessor(
                bufferView=len(views) - 1,
                componentType=component,
                count=len(data),
                type=kind,
                normalized=normalized or None,
                min=flat.min(axis=0).tolist() if bounds else None,
                max=flat.max(axis=0).tolist() if bounds else None,
            )
        )
        return len(accessors) - 1

    float32, u16, u32 = gl.FLOAT, gl.UNSIGNED_SHORT, gl.UNSIGNED_INT
    vertex, index = gl.ARRAY_BUFFER, gl.ELEMENT_ARRAY_BUFFER
    attributes = gl.Attributes(
        POSITION=add(mesh.positions_m.astype(np.float32), gl.VEC3, float32, vertex, bounds=True),
        NORMAL=add(mesh.normals.astype(np.float32), gl.VEC3, float32, vertex),
        COLOR_0=add(_srgb_to_linear(mesh.colours), gl.VEC3, float32, vertex),
        JOINTS_0=add(mesh.joints.astype(np.uint16), gl.VEC4, u16, vertex),
        WEIGHTS_0=add(mesh.weights.astype(np.float32), gl.VEC4, float32, vertex),
    )
    indices = add(mesh.triangles.reshape(-1).astype(np.uint32), gl.SCALAR, u32, index, bounds=True)
    # glTF matrices are column-major: numpy's row-major matrices transposed.
    inverse_bind = add(
        mesh.inverse_bind_matrices.transpose(0, 2, 1).astype(np.float32), gl.MAT4, float32
    )

    joints = len(joint_names)
    children = [[] for _ in range(joints)]
    for j in range(1, joints):
        children[int(parents[j])].append(j)
    xyzw = lambda q: np.asarray(q, np.float64)[..., [1, 2, 3, 0]]  # noqa: E731
    nodes = []
    for j, name in enumerate(joint_names):
        translation = hips_position_m if j == 0 else offsets_m[j]
        nodes.append(
            gl.Node(
                name=name,
                translation=[float(v) for v in translation],
                rotation=[float(v) for v in xyzw(rest_local_rotations[j])],
                children=children[j] or None,
            )
        )
    # One root over the joints and the skinned mesh, as engines expect an armature: the
    # shared ancestor becomes the character (panda3d-gltf makes none without it).
    body = len(nodes)
    nodes.append(gl.Node(name="dog_body", mesh=0, skin=0))
    nodes.append(gl.Node(name="dog", children=[0, body]))
    model = gl.GLTF2(
        asset=gl.Asset(generator="canis (pygltflib)", version="2.0"),
        scene=0,
        scenes=[gl.Scene(name="dog", nodes=[body + 1])],
        nodes=nodes,
        meshes=[
            gl.Mesh(
                name="dog_body",
                primitives=[gl.Primitive(attributes=attributes, indices=indices, material=0)],
            )
        ],
        materials=[
            gl.Material(
                name="coat",
                pbrMetallicRoughness=gl.PbrMetallicRoughness(
                    baseColorFactor=[1.0, 1.0, 1.0, 1.0], metallicFactor=0.0, roughnessFactor=0.9
                ),
            )
        ],
        skins=[
            gl.Skin(
                name="dog", joints=list(range(joints)), skeleton=0, inverseBindMatrices=inverse_bind
            )
        ],
    )
    if rotations is not None:
        frames = len(rotations)
        times = add(
            np.arange(frames, dtype=np.float32) / np.float32(fps), gl.SCALAR, float32, bounds=True
        )
        local = _continuous(local_rotations(skeleton, rotations))
        samplers, channels = [], []
        for j in range(joints):
            output = add(xyzw(local[:, j]).astype(np.float32), gl.VEC4, float32)
            samplers.append(gl.AnimationSampler(input=times, output=output, interpolation="LINEAR"))
            channels.append(
                gl.AnimationChannel(
                    sampler=len(samplers) - 1,
                    target=gl.AnimationChannelTarget(node=j, path="rotation"),
                )
            )
        hips = add(np.asarray(positions_m, np.float32)[:, 0], gl.VEC3, float32)
        samplers.append(gl.AnimationSampler(input=times, output=hips, interpolation="LINEAR"))
        channels.append(
            gl.AnimationChannel(
                sampler=len(samplers) - 1,
                target=gl.AnimationChannelTarget(node=0, path="translation"),
            )
        )
        model.animations = [gl.Animation(name="run", samplers=samplers, channels=channels)]
    model.bufferViews = views
    model.accessors = accessors
    model.buffers = [gl.Buffer(byteLength=len(blob))]
    model.set_binary_blob(bytes(blob))
    return b"".join(model.save_to_bytes())

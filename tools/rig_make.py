"""`canis rig make`: skinned glTF rigs of other breeds, made from the dog's skeleton and body
generator (tools/dog_mesh.py), to test the runtime's rigs (runtime/rig.py) with. Like a rig
from elsewhere, a made rig has its own joint names, a few joints the controller does not have
(the ears and the jaw) and its own proportions: each leg's bones (below the shoulder blade or
the hip joint) scaled by the breed's leg factor, every other bone by its body factor.

The nodes' rest pose is the shipped standing keyframe (runtime/poses.py), the pose the
retargeting maps to the rig's rest pose; the mesh is bound in the generator's symmetric
standing pose (its inverse bind matrices say so, as glTF allows).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from canis.runtime.body import joint_matrices
from canis.runtime.kinematics import forward_kinematics
from canis.runtime.poses import load_keyframes
from canis.runtime.rig import RigSkeleton
from canis.runtime.skeleton import DOG_LEG_GROUPS, Skeleton, shipped_dog_skeleton_path


@dataclass(frozen=True)
class Breed:
    leg_scale: float  # each leg bone's length, of the mocap dog's
    body_scale: float  # every other bone's (spine, neck, head, tail, shoulder and hip offsets)
    chest_depth: float  # the ribcage's depth in the body mesh, of the mocap dog's


BREEDS = {
    "shepherd": Breed(1.0, 1.0, 1.0),  # the mocap dog itself
    "corgi": Breed(0.55, 1.1, 1.0),
    "greyhound": Breed(1.3, 1.1, 1.3),
}

# Names as a game's rig might have them (the controller's joint -> the rig's).
RIG_NAMES = {
    "Hips": "pelvis",
    "Spine": "spine_01",
    "Spine1": "spine_02",
    "Neck": "neck_01",
    "Head": "head",
    "HeadSite": "nose_end",
    "Tail": "tail_01",
    "Tail1": "tail_02",
    "Tail1Site": "tail_end",
}
for _side, _s in (("Left", "l"), ("Right", "r")):
    RIG_NAMES.update(
        {
            f"{_side}Shoulder": f"scapula_{_s}",
            f"{_side}Arm": f"upperarm_{_s}",
            f"{_side}ForeArm": f"forearm_{_s}",
            f"{_side}Hand": f"hand_{_s}",
            f"{_side}HandSite": f"fingers_end_{_s}",
            f"{_side}UpLeg": f"thigh_{_s}",
            f"{_side}Leg": f"calf_{_s}",
            f"{_side}Foot": f"foot_{_s}",
            f"{_side}FootSite": f"toe_end_{_s}",
        }
    )
# Joints the controller does not have, under the head, offsets in its frame (x along the
# head, y up, z to the dog's left), metres at body scale 1: they follow the head.
EXTRA_JOINTS = (
    ("ear_l", "Head", (0.03, 0.07, 0.04)),
    ("ear_r", "Head", (0.03, 0.07, -0.04)),
    ("jaw", "Head", (0.07, -0.035, 0.0)),
)


def breed_skeleton(breed: Breed, skeleton: Skeleton | None = None) -> Skeleton:
    """The mocap dog's skeleton with the breed's proportions (joint names the dog's)."""
    skeleton = skeleton or Skeleton.from_json(shipped_dog_skeleton_path())
    scale = np.full(skeleton.joint_count, breed.body_scale)
    for leg in DOG_LEG_GROUPS:
        scale[skeleton.group(leg)[1:]] = breed.leg_scale  # the first joint's offset is body
    return Skeleton(skeleton.joint_names, skeleton.parents, skeleton.offsets_m * scale[:, None])


def rig_glb_bytes(breed: Breed, mesh_step_m: float | None = None) -> bytes:
    """The breed's rig as a .glb (joints renamed, extra joints added, body mesh skinned);
    `mesh_step_m`: the body generator's grid step (coarser is quicker: the tests')."""
    from canis.tools.dog_mesh import make_dog_mesh
    from canis.tools.motion_export import SkinnedMeshArrays, skinned_glb_bytes

    skeleton = breed_skeleton(breed)
    from canis.tools.dog_mesh import GRID_STEP_M

    mesh = make_dog_mesh(skeleton, mesh_step_m or GRID_STEP_M, chest_depth=breed.chest_depth)
    stand = load_keyframes()["stand"].local_rotations.astype(np.float64)
    positions, _ = forward_kinematics(skeleton, stand[None], np.zeros((1, 3)))
    hips_m = np.array([0.0, -positions[0, skeleton.group("paws"), 1].min(), 0.0])
    names = [RIG_NAMES[n] for n in skeleton.joint_names]
    parents = list(skeleton.parents)
    offsets = list(skeleton.offsets_m.astype(np.float64))
    rest = list(stand)
    bind = list(joint_matrices(mesh.bind_positions_m, mesh.bind_rotations))
    for name, parent, offset in EXTRA_JOINTS:
        j = skeleton.index(parent)
        names.append(name)
        parents.append(j)
        offsets.append(np.array(offset) * breed.body_scale)
        rest.append(np.array([1.0, 0.0, 0.0, 0.0]))
        child = np.eye(4)
        child[:3, 3] = offsets[-1]
        bind.append(bind[j] @ child)  # bound where its parent's bind pose carries it
    rig = RigSkeleton(tuple(names), np.array(parents), np.array(offsets, np.float32), {})
    arrays = SkinnedMeshArrays(
        mesh.positions_m,
        mesh.normals,
        mesh.colours,
        mesh.triangles,
        mesh.joints,
        mesh.weights,
        np.linalg.inv(np.array(bind)),
    )
    return skinned_glb_bytes(arrays, rig, np.array(rest), hips_m)


def make_rig(breed_name: str, out: Path, mesh_step_m: float | None = None) -> Path:
    """Writes the breed's rig to `out` (.glb) atomically."""
    import importlib.util

    from canis.tools.motion_export import _write_atomically

    if breed_name not in BREEDS:
        raise ValueError(f"unknown breed {breed_name!r}; known: {', '.join(BREEDS)}")
    if importlib.util.find_spec("fast_simplification") is None:  # the body's mesh decimation
        raise ValueError(
            "making a rig builds its body mesh, which needs the mesh extra: "
            "pip install 'canis[mesh]' (./run canis has it)"
        )
    out = Path(out)
    if out.suffix.lower() != ".glb":
        raise ValueError(f"--out {out}: a rig is written as .glb")
    if not out.parent.is_dir():
        raise ValueError(f"--out {out}: folder {out.parent} does not exist")
    data = rig_glb_bytes(BREEDS[breed_name], mesh_step_m)
    _write_atomically(out, lambda temporary: temporary.write_bytes(data))
    return out


def add_command(commands: argparse._SubParsersAction) -> None:
    rig = commands.add_parser("rig", help="rigs of other dogs for the controller to drive")
    actions = rig.add_subparsers(dest="rig_action", metavar="ACTION", required=True)
    make = actions.add_parser(
        "make", help="write a skinned glTF rig of a breed (needs canis[mesh])"
    )
    make.add_argument("--breed", choices=sorted(BREEDS), required=True)
    make.add_argument("--out", type=Path, required=True, help="the .glb to write")
    make.set_defaults(handler=run_make)
    info = actions.add_parser("info", help="load a rig and print its mapping and proportions")
    info.add_argument("rig", type=Path, help="a skinned .glb or .gltf")
    info.add_argument("--mapping", type=Path, help="a mapping file (docs/EMBEDDING.md)")
    info.set_defaults(handler=run_info)


def run_make(args) -> int:
    out = make_rig(args.breed, args.out)
    print(f"wrote {out}: the {args.breed} rig")
    return 0


def run_info(args) -> int:
    from canis.runtime.retarget import stride_scale
    from canis.runtime.rig import Rig

    rig = Rig.load(args.rig, mapping=args.mapping)
    names = rig.joint_names
    print(
        f"{rig.path}: {len(names)} joints, hips {rig.hips_height_m:.3f} m up, legs "
        f"{', '.join(f'{x:.3f}' for x in rig.leg_lengths_m)} m, stride scale "
        f"{stride_scale(rig):.3f}"
    )
    for dog, j in rig.mapping.items():
        print(f"  {dog:>14} -> {names[j]}")
    return 0

"""The dog's skeleton as the runtime needs it: joint names, parents, bone offsets (metres),
left/right mirror pairs and named joint groups.

The bone hierarchy is the one of the dog motion capture (21 joints + 6 end sites = 27),
in the BVH file's depth-first order, so parents always precede children (the native core
relies on that). Bone offsets are data: they come from a BVH file (training.bvh) or from the
JSON this module writes (assets/skeleton/dog.json ships one for the runtime).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from canis.runtime.assets import asset_path

DOG_JOINT_NAMES = (
    "Hips",
    "Spine",
    "Spine1",
    "Neck",
    "Head",
    "HeadSite",
    "LeftShoulder",
    "LeftArm",
    "LeftForeArm",
    "LeftHand",
    "LeftHandSite",
    "RightShoulder",
    "RightArm",
    "RightForeArm",
    "RightHand",
    "RightHandSite",
    "LeftUpLeg",
    "LeftLeg",
    "LeftFoot",
    "LeftFootSite",
    "RightUpLeg",
    "RightLeg",
    "RightFoot",
    "RightFootSite",
    "Tail",
    "Tail1",
    "Tail1Site",
)

# Groups by joint name. Paws are the end sites below the hands and feet (the toe tips that
# touch the ground); legs run from the shoulder/hip to the paw.
DOG_GROUPS = {
    "paws": ("LeftHandSite", "RightHandSite", "LeftFootSite", "RightFootSite"),
    "front_left_leg": ("LeftShoulder", "LeftArm", "LeftForeArm", "LeftHand", "LeftHandSite"),
    "front_right_leg": ("RightShoulder", "RightArm", "RightForeArm", "RightHand", "RightHandSite"),
    "back_left_leg": ("LeftUpLeg", "LeftLeg", "LeftFoot", "LeftFootSite"),
    "back_right_leg": ("RightUpLeg", "RightLeg", "RightFoot", "RightFootSite"),
    "spine": ("Hips", "Spine", "Spine1"),
    "head": ("Neck", "Head", "HeadSite"),
    "tail": ("Tail", "Tail1", "Tail1Site"),
}
DOG_LEG_GROUPS = ("front_left_leg", "front_right_leg", "back_left_leg", "back_right_leg")

# Every Left* bone is offset toward +z of its parent's frame where its Right* twin is offset
# toward -z, so a left/right mirror reflects z (in bone frames and, with them, the world).
LATERAL_AXIS = 2

METRES_PER_CENTIMETRE = 0.01


def mirror_name(name: str) -> str:
    """The joint on the other side: LeftArm <-> RightArm; centre joints map to themselves."""
    if name.startswith("Left"):
        return "Right" + name[len("Left") :]
    if name.startswith("Right"):
        return "Left" + name[len("Right") :]
    return name


@dataclass(frozen=True)
class Skeleton:
    joint_names: tuple[str, ...]
    parents: np.ndarray  # (J,) int32, -1 for the root; parents[j] < j
    offsets_m: np.ndarray  # (J, 3) float32, bone offset from the parent in the parent's frame
    mirror_index: np.ndarray = field(init=False)  # (J,) int32: the joint on the other side

    def __post_init__(self):
        names = tuple(self.joint_names)
        parents = np.ascontiguousarray(self.parents, dtype=np.int32)
        offsets = np.ascontiguousarray(self.offsets_m, dtype=np.float32)
        joints = len(names)
        if parents.shape != (joints,) or offsets.shape != (joints, 3):
            raise ValueError(
                f"skeleton with {joints} joints needs parents ({joints},) and offsets "
                f"({joints}, 3), got {parents.shape} and {offsets.shape}"
            )
        if (
            joints == 0
            or parents[0] != -1
            or any(not 0 <= parents[j] < j for j in range(1, joints))
        ):
            raise ValueError("skeleton joints must start at the root and list parents first")
        if len(set(names)) != joints:
            raise ValueError("skeleton joint names must be unique")
        index = {name: j for j, name in enumerate(names)}
        missing = [mirror_name(n) for n in names if mirror_name(n) not in index]
        if missing:
            raise ValueError(f"skeleton has no mirror joint named {', '.join(missing)}")
        object.__setattr__(self, "joint_names", names)
        object.__setattr__(self, "parents", parents)
        object.__setattr__(self, "offsets_m", offsets)
        mirror = np.array([index[mirror_name(n)] for n in names], dtype=np.int32)
        object.__setattr__(self, "mirror_index", mirror)

    @property
    def joint_count(self) -> int:
        return len(self.joint_names)

    def index(self, name: str) -> int:
        try:
            return self.joint_names.index(name)
        except ValueError:
            raise KeyError(f"skeleton has no joint named {name!r}") from None

    def indices(self, names) -> np.ndarray:
        return np.array([self.index(n) for n in names], dtype=np.int32)

    def group(self, group_name: str) -> np.ndarray:
        """Joint indices of a named group of the dog (see DOG_GROUPS)."""
        if group_name not in DOG_GROUPS:
            raise KeyError(f"unknown joint group {group_name!r}; known: {', '.join(DOG_GROUPS)}")
        return self.indices(DOG_GROUPS[group_name])

    def bone_lengths_m(self) -> np.ndarray:
        return np.linalg.norm(self.offsets_m, axis=-1)

    def to_json(self, path: str | Path) -> None:
        data = {
            "units": "metres",
            "joint_names": list(self.joint_names),
            "parents": self.parents.tolist(),
            "offsets_m": np.round(self.offsets_m.astype(np.float64), 7).tolist(),
        }
        Path(path).write_text(json.dumps(data, indent=1) + "\n")

    @classmethod
    def from_json(cls, path: str | Path) -> Skeleton:
        path = Path(path)
        try:
            data = json.loads(path.read_text())
            return cls(
                tuple(data["joint_names"]), np.array(data["parents"]), np.array(data["offsets_m"])
            )
        except (OSError, json.JSONDecodeError, KeyError, ValueError, TypeError) as error:
            raise ValueError(f"{path}: not a valid skeleton file: {error}") from error


def shipped_dog_skeleton_path() -> Path:
    return asset_path("skeleton/dog.json")


def is_dog(skeleton: Skeleton) -> bool:
    return skeleton.joint_names == DOG_JOINT_NAMES


def not_dog_reason(skeleton: Skeleton) -> str | None:
    """Why a skeleton is not the dog's, or None: everything here (groups, features, models)
    is built for the dog's joints, so another animal's BVH would fail later on a missing
    joint name."""
    if is_dog(skeleton):
        return None
    missing = [n for n in DOG_JOINT_NAMES if n not in skeleton.joint_names]
    extra = [n for n in skeleton.joint_names if n not in DOG_JOINT_NAMES]

    def listed(names):
        return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")

    details = [f"missing {listed(missing)}"] if missing else []
    details += [f"unexpected {listed(extra)}"] if extra else []
    return (
        f"not the dog's skeleton ({skeleton.joint_count} joints, the dog has "
        f"{len(DOG_JOINT_NAMES)}: {'; '.join(details) or 'the same joints in another order'})"
    )

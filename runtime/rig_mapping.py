"""Which joint of a rig plays which joint of the controller's dog (runtime/skeleton.py
DOG_JOINT_NAMES): proposed from the rig's names and topology, given or corrected by a JSON file.

The mapping file names the controller's joints and the rig's joint each one is (null: none):

    {"joints": {"Hips": "pelvis", "Spine1": "chest", "LeftArm": "upperarm.L", "Tail": null}}

Entries it has replace the proposal's; the others are kept. A rig whose joints carry the dog's
own names (a glTF written by `canis run --export`) is mapped by name; any other by topology:
the four lowest end joints of the rest pose are the paw tips; the pair of legs that meets
nearer the root is the hind pair (it meets at the hips), the other meets at the chest; the
hips-to-chest direction is forward and left is up x forward; the neck and head run from the
chest to its end joint furthest along the bones, the tail from the hips to its. A longer chain's
joints are taken from its end (its extra joints near the body follow the joint above them).

Required: the hips, the chest (Spine1), the neck and head, and the four legs, each joint of
them; the tail and the middle spine joint are optional (nothing drives a missing one).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from canis.runtime.rig_gltf import RigError
from canis.runtime.skeleton import DOG_GROUPS, DOG_JOINT_NAMES

LEGS = {
    "front_left_leg": DOG_GROUPS["front_left_leg"],
    "front_right_leg": DOG_GROUPS["front_right_leg"],
    "back_left_leg": DOG_GROUPS["back_left_leg"],
    "back_right_leg": DOG_GROUPS["back_right_leg"],
}
# The chains a rig must have, each in order from the body outward, and the optional joints.
LEG_JOINTS = tuple(j for joints in LEGS.values() for j in joints)
REQUIRED_CHAINS = {"hips": ("Hips",), "spine": ("Spine1",), "neck and head": ("Neck", "Head")}
REQUIRED_CHAINS.update(LEGS)
OPTIONAL_JOINTS = ("Spine", "HeadSite", "Tail", "Tail1", "Tail1Site")


def _children(parents: np.ndarray) -> list[list[int]]:
    children = [[] for _ in parents]
    for j, p in enumerate(parents):
        if p >= 0:
            children[p].append(j)
    return children


def _path_from_root(parents: np.ndarray, j: int) -> list[int]:
    path = [j]
    while parents[path[-1]] >= 0:
        path.append(int(parents[path[-1]]))
    return path[::-1]


def _below(parents: np.ndarray, top: int, joint: int) -> list[int]:
    """The joints from just below `top` down to `joint` (which is below it)."""
    path = _path_from_root(parents, joint)
    return path[path.index(top) + 1 :]


def _common_ancestor(parents: np.ndarray, a: int, b: int) -> int:
    pa, pb = _path_from_root(parents, a), _path_from_root(parents, b)
    common = [x for x, y in zip(pa, pb, strict=False) if x == y]
    return common[-1] if common else -1


def propose(path: Path, names, parents: np.ndarray, positions_m: np.ndarray) -> dict:
    """{dog joint: rig joint name} from the rig's names, else its topology (module docstring);
    RigError naming the file and what is missing when neither finds the legs."""
    by_name = {n.lower(): n for n in names}
    if all(d.lower() in by_name for d in ("Hips", "Spine1", "Neck", "Head", *LEG_JOINTS)):
        return {d: by_name[d.lower()] for d in DOG_JOINT_NAMES if d.lower() in by_name}
    parents = np.asarray(parents)
    children = _children(parents)
    leaves = [j for j in range(len(names)) if not children[j]]
    if len(leaves) < 4:
        raise RigError(f"{path}: has {len(leaves)} end joints; a dog needs four paw tips")
    paws = sorted(leaves, key=lambda j: positions_m[j, 1])[:4]
    pairings = [((0, 1), (2, 3)), ((0, 2), (1, 3)), ((0, 3), (1, 2))]

    def score(pairing):
        depth = sum(
            len(_path_from_root(parents, _common_ancestor(parents, paws[a], paws[b])))
            for a, b in pairing
        )
        spread = sum(
            np.linalg.norm((positions_m[paws[a]] - positions_m[paws[b]])[[0, 2]])
            for a, b in pairing
        )
        return depth, -spread  # legs of a pair meet deepest; across the body is nearest

    pair_a, pair_b = max(pairings, key=score)
    meet = [_common_ancestor(parents, paws[a], paws[b]) for a, b in (pair_a, pair_b)]
    depth = [len(_path_from_root(parents, m)) for m in meet]
    if -1 in meet or depth[0] == depth[1]:
        raise RigError(
            f"{path}: cannot tell its front legs from its hind legs by topology "
            "(they meet at the same joint); give a mapping file"
        )
    hind, front = (pair_a, pair_b) if depth[0] < depth[1] else (pair_b, pair_a)
    hips, chest = (meet[0], meet[1]) if depth[0] < depth[1] else (meet[1], meet[0])
    if hips not in _path_from_root(parents, chest):
        raise RigError(
            f"{path}: its hind legs meet at {names[hips]!r}, which is not above the chest "
            f"{names[chest]!r} where its front legs meet; the spine must hang from the hips"
        )
    forward = positions_m[chest] - positions_m[hips]
    forward[1] = 0.0
    forward /= max(np.linalg.norm(forward), 1e-9)
    left = np.cross([0.0, 1.0, 0.0], forward)
    mapping = {"Hips": names[hips], "Spine1": names[chest]}
    spine = _below(parents, hips, chest)
    if len(spine) >= 2:
        mapping["Spine"] = names[spine[0]]
    pairs = (
        (front, ("front_left_leg", "front_right_leg")),
        (hind, ("back_left_leg", "back_right_leg")),
    )
    for (a, b), sides in pairs:
        pa, pb = paws[a], paws[b]
        left_first = positions_m[pa] @ left >= positions_m[pb] @ left
        for leg, paw in zip(sides, (pa, pb) if left_first else (pb, pa), strict=True):
            top = chest if leg.startswith("front") else hips
            chain = _below(parents, top, paw)
            joints = LEGS[leg]
            if len(chain) < len(joints):
                raise RigError(
                    f"{path}: its {leg.replace('_', ' ')} chain has {len(chain)} joints from "
                    f"{names[top]!r} to {names[paw]!r}; it needs {len(joints)} "
                    f"({', '.join(joints)})"
                )
            mapping.update(zip(joints, (names[j] for j in chain[-len(joints) :]), strict=True))
    used = {j for leg in (*front, *hind) for j in _below(parents, hips, paws[leg])}
    _end_chain(path, names, parents, children, positions_m, chest, used, mapping, True)
    _end_chain(path, names, parents, children, positions_m, hips, used, mapping, False)
    return mapping


def _end_chain(path, names, parents, children, positions_m, top, used, mapping, head) -> None:
    """The neck and head (from the chest to the end joint furthest along the bones below it,
    the legs left out) or the tail (the same from the hips, the spine and legs left out):
    an ear or a jaw is a shorter branch than the head's end."""
    stack, ends = [c for c in children[top] if c not in used], []
    while stack:
        j = stack.pop()
        if j in used:
            continue
        if not children[j]:
            ends.append(j)
        stack.extend(children[j])
    if not ends:
        if head:
            raise RigError(f"{path}: has no neck and head chain below {names[top]!r}")
        return

    def along_bones(end):
        chain = [top, *_below(parents, top, end)]
        return np.linalg.norm(np.diff(positions_m[chain], axis=0), axis=1).sum()

    tip = max(ends, key=along_bones)
    chain = _below(parents, top, tip)
    joints = ("Neck", "Head", "HeadSite") if head else ("Tail", "Tail1", "Tail1Site")
    if len(chain) < 3:
        if head:
            raise RigError(
                f"{path}: its neck and head chain ({', '.join(names[j] for j in chain)}) has "
                f"{len(chain)} joints; it needs a neck, a head and the head's end"
            )
        return
    mapping.update({joints[0]: names[chain[0]], joints[1]: names[chain[-2]]})
    mapping[joints[2]] = names[chain[-1]]


def read_mapping_file(path: str | Path) -> dict:
    """The {dog joint: rig joint or None} entries of a mapping file."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as error:
        raise RigError(f"{path}: not a readable mapping file: {error}") from None
    joints = data.get("joints") if isinstance(data, dict) else None
    if not isinstance(joints, dict):
        raise RigError(f'{path}: a mapping file is {{"joints": {{dog joint: rig joint}}}}')
    for dog, rig in joints.items():
        if dog not in DOG_JOINT_NAMES:
            raise RigError(f"{path}: {dog!r} is not one of the controller's joints")
        if rig is not None and not isinstance(rig, str):
            raise RigError(f"{path}: joint {dog!r} maps to {rig!r}, not a joint name or null")
    return joints


def resolve(rig_path: Path, names, parents, positions_m, mapping=None) -> dict:
    """The checked mapping {dog joint: rig joint index}: the proposal with `mapping` (a file
    path or a dict of entries) over it. RigError naming the file and joint when a named joint
    is missing, a required chain is incomplete, or a chain is out of order."""
    source = rig_path
    entries = {}
    if mapping is not None:
        source = Path(mapping) if not isinstance(mapping, dict) else rig_path
        entries = read_mapping_file(mapping) if not isinstance(mapping, dict) else dict(mapping)
    try:
        proposed = propose(rig_path, names, parents, positions_m)
    except RigError:
        if not entries:
            raise
        proposed = {}
    proposed.update(entries)
    index = {n: j for j, n in enumerate(names)}
    resolved = {}
    for dog, rig in proposed.items():
        if rig is None:
            continue
        if rig not in index:
            raise RigError(
                f"{source}: maps {dog!r} to joint {rig!r}, which {rig_path} does not have"
            )
        resolved[dog] = index[rig]
    twice = [n for n in set(resolved.values()) if list(resolved.values()).count(n) > 1]
    if twice:
        dogs = [d for d, j in resolved.items() if j == twice[0]]
        raise RigError(f"{source}: joint {names[twice[0]]!r} is mapped twice ({', '.join(dogs)})")
    for chain, joints in REQUIRED_CHAINS.items():
        missing = [j for j in joints if j not in resolved]
        if missing:
            raise RigError(
                f"{rig_path}: has no {chain.replace('_', ' ')} chain (no joint for {missing[0]})"
            )
    order = ("Hips", "Spine", "Spine1", "Neck", "Head", "HeadSite")
    for chain in (order, *LEGS.values(), ("Hips", "Tail", "Tail1", "Tail1Site")):
        mapped = [d for d in chain if d in resolved]
        for upper, lower in zip(mapped, mapped[1:], strict=False):
            if resolved[upper] not in _path_from_root(np.asarray(parents), resolved[lower])[:-1]:
                raise RigError(
                    f"{source}: joint {names[resolved[lower]]!r} ({lower}) is not below "
                    f"{names[resolved[upper]]!r} ({upper})"
                )
    return resolved

"""Forward kinematics and CCD IK through the native core (runtime/_kinematics, built from
native/ by CMake). This wrapper allocates outputs and converts inputs only when they are not
already float32/int32 C-contiguous, so the runtime's preallocated state passes without copies.
Shapes are checked by the native binding, which names the offending argument.

Full-body IK onto uneven terrain, as a post-process of the network's flat-ground pose
(the MANN paper's approach; the data is flat). The work runs in the native core
(canis_fullbody_ik); this module holds the method's settings and the blend weight.

1. The hips rise with the terrain under the hind paws and the body pitches by the difference
   between the heights under the front and the hind paws, so legs are not outstretched up or
   down a slope. The pitch is about the torso's own direction (hind legs' first joints to
   the front legs'), not the root's facing: a lying dog's root can turn while its body stays.
   A chest the pose sinks under the ground (the network's lie sometimes dives nose first) is
   pitched further nose-up, by at most 60 degrees, and what is left of it lifts the body.
2. Each paw keeps the height above the ground that the network gave it, now above the terrain
   under it: paws in stance land on the terrain, swinging paws keep their lift. A paw the
   network's rotations put below its flat ground (its lie and sit sink a front paw up to
   24 cm; hind paws sink up to 13 cm in sits, lies, stands and strides) is lifted onto the
   ground. On flat ground the controller runs the IK only on frames whose shown pose has a
   joint under it (`joints_below_ground`), so the usual flat frame still costs nothing here.
3. Targets are clamped short of the leg's full reach. Each front leg keeps its paw's bone
   (wrist to paw) as it was in the world, and CCD bends the leg above it (the shoulder joint
   moves least) to put the wrist where that puts the paw on its target: CCD over the whole
   leg turned the paw's bone first, and a lying dog's paw lifted 7 cm onto a hill had its
   wrist swung ahead of it, then back, 13 cm in one frame. Each hind leg (hip, knee, hock) is
   solved in closed form, its knee kept in the plane it bends in and its hock-paw bone's
   rotation kept, so it cannot fold the other way between frames as CCD did
   (native/src/two_bone.h).
4. A front paw still under the ground after its leg's solve (a leg at its reach over a
   step's edge) lifts the body by its depth beyond 5 mm, and the hind legs are solved again.
5. Every other joint is kept less than 5 mm under the ground (BELOW_GROUND_M), each by a
   correction that starts from nothing at that depth (where flat ground's IK starts) and
   grows with it, so none pops when it starts:
   - the torso (not the legs past their first joint, not the tail past its root) lifts the
     body by its deepest joint's depth, before the legs reach down (a lie on its side);
   - a front leg's shoulder, elbow and wrist (the network's lie sinks an elbow 9 cm, its
     lying down a wrist 6.8 cm) are lifted from the top down: the bone below the joint
     pivots up about its end (a forearm on the ground tilts up from its wrist), CCD bends the
     leg above to it and the joints below turn back onto where they were, so the paw stays;
     what a leg cannot lift lifts the body as in 4;
   - a hind knee swings up about the hip-hock line (hip, hock and paw stay). A hock is left:
     the closed form keeps its hock-paw bone, so on a slope rising behind the paw the hock
     can be 1-2 cm under; pivoting that bone moved a sitting dog's folded knee 5 times as far;
   - the tail (its group in runtime/skeleton.py), which the network's sit and beg hold up to
     4.4 cm under flat ground, bends up: from the root out, each bone whose end is under
     pivots up about its first joint (CCD on that one joint) in the vertical plane it lies in.
6. Everything is scaled by a blend weight that eases in and out when IK is switched.

Foot locking: a paw the network puts down stays where it landed until it lifts.

A motion network's stance paws drift a little while they should be planted (the foot skating
the MANN paper measures). Games hide it by pinning each planted paw at its landing point and
bending the leg to it. Here: when a paw's contact starts (runtime/pose.py's contacts), its
world position on the ground plane, where it is shown, is kept; while the contact lasts, the
paw is held there; when it lifts, or when the network has carried it further than
MAX_SLIDE_M from the lock (a turn on the spot, a slip the leg cannot absorb), the weight eases
out so the paw rejoins the network's path without a pop (no faster than
LOCK_OUT_MAX_SPEED_MPS). The pull is the native CCD on that
leg (ccd_solve), so bone lengths stay exact; the paw keeps the height it had.

The controller gives it no contacts during a transition or a posture (sit, stand, lie): those
poses place the paws themselves, and a lock pulled through them popped when it let go.

Off unless asked for (Controller(foot_lock=True), or controller.foot_lock.enabled at any
time): it changes the network's motion, so measurements of the networks themselves (canis
evaluate controllers) run without it and report it apart.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from canis.runtime import _kinematics
from canis.runtime.root import damp
from canis.runtime.rotations import quat_conjugate, quat_multiply, quat_normalize
from canis.runtime.skeleton import DOG_LEG_GROUPS, Skeleton
from canis.runtime.terrain import Heightmap


def _f32(a) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float32)


def forward_kinematics(
    skeleton: Skeleton, local_rotations: np.ndarray, root_positions_m: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Global joint positions (N, J, 3) and rotations (N, J, 4) of N characters.

    local_rotations (N, J, 4) are (w, x, y, z) relative to each joint's parent (the root's is
    global); root_positions_m (N, 3) place joint 0. The root's own offset is not used.
    """
    local = _f32(local_rotations)
    roots = _f32(root_positions_m)
    positions = np.empty((*local.shape[:-1], 3), dtype=np.float32)
    rotations = np.empty_like(local)
    _kinematics.forward_kinematics(
        skeleton.parents, skeleton.offsets_m, local, roots, positions, rotations
    )
    return positions, rotations


def ccd_solve(
    skeleton: Skeleton,
    local_rotations: np.ndarray,
    root_positions_m: np.ndarray,
    chain: np.ndarray,
    targets_m: np.ndarray,
    joint_weights: np.ndarray | None = None,
    max_iterations: int = 16,
    tolerance_m: float = 1e-4,
) -> np.ndarray:
    """Moves each character's chain effector toward its target by cyclic coordinate descent.

    `local_rotations` (N, J, 4) float32 C-contiguous is updated in place (pass a copy to keep
    the original). `chain` lists joint indices from the first joint allowed to rotate to the
    effector, each an ancestor of the next. `joint_weights` (len(chain) - 1,) in [0, 1] scale
    each joint's correction per iteration (default 1). Returns the residual distances (N,) in
    metres. Only rotations change, so bone lengths are exactly those of the skeleton.
    """
    if not (
        isinstance(local_rotations, np.ndarray)
        and local_rotations.dtype == np.float32
        and local_rotations.flags.c_contiguous
    ):
        raise TypeError("local_rotations is updated in place: pass a float32 C-contiguous array")
    chain = np.ascontiguousarray(chain, dtype=np.int32)
    if joint_weights is None:
        joint_weights = np.ones(max(len(chain) - 1, 0), dtype=np.float32)
    residuals = np.empty(local_rotations.shape[0], dtype=np.float32)
    _kinematics.ccd_solve(
        skeleton.parents,
        skeleton.offsets_m,
        local_rotations,
        _f32(root_positions_m),
        chain,
        _f32(joint_weights),
        _f32(targets_m),
        int(max_iterations),
        float(tolerance_m),
        residuals,
    )
    return residuals


def rotations_from_directions(
    skeleton: Skeleton, forwards: np.ndarray, ups: np.ndarray, root_yaws_rad: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Local (N, J, 4) and global rotations from root-frame forward/up axes (N, J, 3), as the
    networks encode them, for characters whose root frames are yaws (N,). Native: the numpy
    equivalent (runtime.rotations.quat_from_forward_up, then parent-relative) is what the
    tests compare it with."""
    forwards, ups = _f32(forwards), _f32(ups)
    local = np.empty((*forwards.shape[:-1], 4), dtype=np.float32)
    world = np.empty_like(local)
    _kinematics.rotations_from_directions(
        skeleton.parents, forwards, ups, _f32(root_yaws_rad), local, world
    )
    return local, world


def local_rotations(skeleton: Skeleton, world_rotations: np.ndarray) -> np.ndarray:
    """Parent-relative rotations (..., J, 4) float64 from world rotations (..., J, 4): forward
    kinematics' inverse for rotations (the root's stays its world rotation)."""
    world = np.asarray(world_rotations, dtype=np.float64)
    local = world.copy()
    parents = skeleton.parents[1:]
    local[..., 1:, :] = quat_multiply(quat_conjugate(world[..., parents, :]), world[..., 1:, :])
    return quat_normalize(local)


ITERATIONS = 12
TOLERANCE_M = 0.002
MAX_REACH = 0.97  # of the leg's length: a fully straight leg cannot bend back smoothly
LEG_JOINT_WEIGHTS = (0.3, 1.0, 1.0, 1.0)  # shoulder/hip first: it moves least (CCD legs)
BLEND_HALF_LIFE_S = 0.15
FRONT_LEGS = 2  # DOG_LEG_GROUPS lists the front legs first
# A paw is in contact when the network holds it this low and this slow (its flat-ground
# pose; measured planted paws sit 0-4 cm up and under 0.2 m/s in the mocap).
CONTACT_HEIGHT_M = 0.05
CONTACT_SPEED_MPS = 0.35


# The terrain for the IK on flat ground: one cell, which the native sampler extends flat
# beyond its edges, so every point is at y = 0.
FLAT_GROUND = Heightmap(np.zeros((1, 1), dtype=np.float32), 1.0)
# A shown joint this far below flat ground makes the controller run the IK there; the IK
# leaves a joint other than a paw as deep (native/src/ik.cpp kJointSlack, the same 5 mm), so
# its correction starts from nothing where the IK starts.
BELOW_GROUND_M = 0.005


def joints_below_ground(joint_heights_m: np.ndarray) -> bool:
    """Whether any joint (world heights (N, J) on flat ground at y = 0) is under it."""
    return bool((joint_heights_m < -BELOW_GROUND_M).any())


@dataclass
class IkRows:
    """The IK's per-dog arrays, held in the dogs' state (runtime/state.py DogState.ik)."""

    weight: np.ndarray  # (N,) the IK's blend weight, easing toward on (or off)


@dataclass
class FootLockRows:
    """The foot lock's per-dog arrays, held in the dogs' state (DogState.foot_lock)."""

    locked_xz_m: np.ndarray  # (N, 4, 2) where each paw is held, world
    holding: np.ndarray  # (N, 4) bool: pinned now
    released: np.ndarray  # (N, 4) bool: let go during this contact
    weight: np.ndarray  # (N, 4) each lock's blend weight

    @classmethod
    def zeros(cls, count: int, legs: int = 4) -> FootLockRows:
        return cls(
            np.zeros((count, legs, 2)),
            np.zeros((count, legs), dtype=bool),
            np.zeros((count, legs), dtype=bool),
            np.zeros((count, legs)),
        )


def _rows_property(name: str) -> property:
    """An attribute of the solver that is its per-dog rows' array (self.rows.<name>)."""
    return property(
        lambda self: getattr(self.rows, name), lambda self, v: setattr(self.rows, name, v)
    )


class FullBodyIk:
    """The full-body terrain IK. Its per-dog blend weight lives in `rows` (IkRows), which
    the controller binds to its DogState's."""

    weight = _rows_property("weight")

    def __init__(self, skeleton: Skeleton, count: int):
        self.skeleton = skeleton
        chains = [skeleton.group(leg) for leg in DOG_LEG_GROUPS]
        self.leg_starts = np.cumsum([0] + [len(c) for c in chains]).astype(np.int32)
        self.leg_joints = np.concatenate(chains).astype(np.int32)
        self.leg_joint_weights = np.concatenate(
            [list(LEG_JOINT_WEIGHTS[: len(c) - 1]) + [0.0] for c in chains]
        ).astype(np.float32)
        # Reach from each leg's first joint to its paw along the bones.
        self.leg_lengths_m = np.array(
            [skeleton.bone_lengths_m()[c[1:]].sum() for c in chains], dtype=np.float32
        )
        self.tail_joints = skeleton.group("tail").astype(np.int32)
        self.enabled = True
        self.rows = IkRows(np.ones(count))

    def next_weight(self, dt_s: float) -> np.ndarray:
        """The blend weight after dt_s more of easing toward on (or off)."""
        target = 1.0 if self.enabled else 0.0
        return damp(self.weight, target, dt_s, BLEND_HALF_LIFE_S)

    def update_weight(self, dt_s: float) -> None:
        self.weight = self.next_weight(dt_s)

    def solve(
        self,
        local_rotations: np.ndarray,
        hips_m: np.ndarray,
        ground_y_m: np.ndarray,
        facing: np.ndarray,
        terrain: Heightmap,
        dt_s: float,
    ):
        """Fits poses to the terrain: (local rotations (N, J, 4), hips (N, 3), paw targets
        (N, 4, 3)) from the network's flat-ground local rotations and hips; ground_y_m (N,)
        is the height of that flat ground, facing (N, 3) the root's horizontal facing (it
        only breaks the tie of an upright torso). The inputs are not modified."""
        self.update_weight(dt_s)
        local = np.array(local_rotations, dtype=np.float32, order="C")
        hips = np.array(hips_m, dtype=np.float32, order="C")
        targets = np.empty((len(local), len(self.leg_lengths_m), 3), dtype=np.float32)
        f32 = lambda a: np.ascontiguousarray(a, dtype=np.float32)  # noqa: E731
        _kinematics.fullbody_ik(
            self.skeleton.parents,
            self.skeleton.offsets_m,
            local,
            hips,
            f32(ground_y_m),
            f32(facing),
            f32(self.weight),
            *self.native_settings(terrain),
            targets,
        )
        return local, hips, targets

    def native_settings(self, terrain: Heightmap) -> tuple:
        """The method's settings and the terrain as the native calls take them, after the
        weights (canis_fullbody_ik, and canis_display_pose: runtime/pose.py)."""
        return (
            FRONT_LEGS,
            self.leg_starts,
            self.leg_joints,
            self.leg_joint_weights,
            self.leg_lengths_m,
            self.tail_joints,
            MAX_REACH,
            ITERATIONS,
            TOLERANCE_M,
            terrain.heights_m,
            float(terrain.cell_size_m),
            float(terrain.origin_xz_m[0]),
            float(terrain.origin_xz_m[1]),
        )


LOCK_OUT_HALF_LIFE_S = 0.06
# Easing out moves the shown paw toward the network's by the gap times the weight's drop: a
# planted paw let go 12 cm from where the network carried it (MAX_SLIDE_M) would jump 2 cm in
# a frame on the half-life alone, so while it stays planted the drop is capped to move it no
# faster than this (a lifted paw, in the air, eases out on the half-life).
LOCK_OUT_MAX_SPEED_MPS = 0.35
MAX_SLIDE_M = 0.12
CCD_ITERATIONS = 8
CCD_TOLERANCE_M = 0.001


FOOT_LOCK_ROWS = ("locked_xz_m", "holding", "released", "weight")


class FootLock:
    """Its per-dog arrays live in `rows` (FootLockRows), which the controller binds to its
    DogState's."""

    locked_xz_m = _rows_property("locked_xz_m")
    holding = _rows_property("holding")
    released = _rows_property("released")
    weight = _rows_property("weight")

    def __init__(self, skeleton: Skeleton, count: int, enabled: bool = True):
        self.skeleton = skeleton
        self.legs = [skeleton.group(leg) for leg in DOG_LEG_GROUPS]
        self.paws = np.array([leg[-1] for leg in self.legs])
        self.joint_weights = [
            np.array(LEG_JOINT_WEIGHTS[: len(leg) - 1], np.float32) for leg in self.legs
        ]
        self.enabled = enabled  # off: every lock eases out, then nothing is solved
        # How far the network may carry a held paw from its lock before it is let go: a
        # rig's (runtime/retarget.py) is scaled with its legs.
        self.max_slide_m = MAX_SLIDE_M
        self.reset(count)

    def reset(self, count: int) -> None:
        legs = len(self.legs)
        fresh = FootLockRows.zeros(count, legs)
        if getattr(self, "rows", None) is None:
            self.rows = fresh
        else:  # in the rows bound (the dogs' state's), as new arrays
            for name in FOOT_LOCK_ROWS:
                setattr(self.rows, name, getattr(fresh, name))

    @property
    def idle(self) -> bool:
        """Off and eased out: apply changes nothing."""
        return not self.enabled and not self.weight.any()

    def apply(
        self,
        local_rotations: np.ndarray,
        hips_m: np.ndarray,
        contacts: np.ndarray,
        dt_s: float,
        terrain: Heightmap | None = None,
        paw_offsets_m: np.ndarray | None = None,
    ) -> np.ndarray:
        """Local rotations (N, J, 4) with planted paws pulled to their locks; `contacts`
        (N, 4) in DOG_LEG_GROUPS order. On a terrain a locked paw also takes the ground's
        height change between where the pose put it and its lock. `paw_offsets_m` (N, 4, 3)
        world: where each paw is to be shown, from where the pose puts it (a rig's paws
        following the dog's steps, runtime/retarget.py); its leg is bent there in the same
        solve, held or not. The input is not modified."""
        if self.idle and paw_offsets_m is None:
            return local_rotations  # off and eased out: costs nothing
        local = np.array(local_rotations, dtype=np.float32, order="C")
        positions, _ = forward_kinematics(self.skeleton, local, hips_m)
        drawn = positions[:, self.paws].astype(np.float64)  # (N, 4, 3)
        paws = drawn if paw_offsets_m is None else drawn + paw_offsets_m
        contacts = contacts & self.enabled
        landing = contacts & ~self.holding & ~self.released
        # A paw lands where it is shown, and is held there at once. Its last lock may still
        # be easing out (a walk's next step comes within a few half-lives): locking where the
        # network's paw is would drop that pull in one frame (a 3 cm jump, measured), and
        # easing in from there would pull it back.
        paws_xz = paws[..., [0, 2]]
        shown_xz = paws_xz + (self.locked_xz_m - paws_xz) * self.weight[..., None]
        self.locked_xz_m[landing] = shown_xz[landing]
        self.weight[landing] = 1.0
        self.holding |= landing
        gap_m = np.linalg.norm(paws_xz - self.locked_xz_m, axis=-1)
        slid = gap_m > self.max_slide_m
        self.released |= self.holding & slid
        self.holding &= contacts & ~slid
        self.released &= contacts  # a new contact may lock again
        target = self.holding.astype(np.float64)
        eased = damp(self.weight, target, dt_s, LOCK_OUT_HALF_LIFE_S)
        slowest = self.weight - LOCK_OUT_MAX_SPEED_MPS * dt_s / np.maximum(gap_m, 1e-9)
        self.weight = np.where(self.released, np.maximum(eased, slowest), eased)
        self.weight[self.weight < 1e-4] = 0.0
        if paw_offsets_m is None and (dt_s <= 0 or not np.any(self.weight > 1e-3)):
            return local
        goals = paws.copy()
        goals[..., [0, 2]] += (self.locked_xz_m - paws[..., [0, 2]]) * self.weight[..., None]
        if terrain is not None:
            rise = terrain.sample(goals[..., [0, 2]])[0] - terrain.sample(drawn[..., [0, 2]])[0]
            goals[..., 1] += rise
        moved = np.abs(goals - drawn).max(axis=(0, 2)) > CCD_TOLERANCE_M  # (4,) any dog's
        for k, leg in enumerate(self.legs):
            if moved[k] or (dt_s > 0 and np.any(self.weight[:, k] > 1e-3)):
                ccd_solve(
                    self.skeleton,
                    local,
                    hips_m,
                    leg,
                    goals[:, k],
                    self.joint_weights[k],
                    CCD_ITERATIONS,
                    CCD_TOLERANCE_M,
                )
        return local

"""Full-body IK onto uneven terrain, as a post-process of the network's flat-ground pose
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
   ground. On flat ground the controller runs the IK only on frames whose shown pose has such
   a paw (`paws_below_ground`), so the usual flat frame still costs nothing here.
3. Targets are clamped short of the leg's full reach. CCD bends each front leg to its target
   (the shoulder joint moves least); each hind leg (hip, knee, hock) is solved in closed form,
   its knee kept in the plane it bends in and its hock-paw bone's rotation kept, so it cannot
   fold the other way between frames as CCD did (native/src/two_bone.h).
4. A front paw still under the ground after its leg's solve (a leg at its reach over a
   step's edge) lifts the body by its depth beyond 5 mm, and the hind legs are solved again.
5. Everything is scaled by a blend weight that eases in and out when IK is switched.
"""

from __future__ import annotations

import numpy as np
from canis.runtime import _kinematics
from canis.runtime.root import damp
from canis.runtime.skeleton import DOG_LEG_GROUPS, Skeleton
from canis.runtime.terrain import Heightmap

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
# A shown paw this far below flat ground makes the controller run the IK there.
BELOW_GROUND_M = 0.005


def paws_below_ground(paw_heights_m: np.ndarray) -> bool:
    """Whether any paw (world heights (N, 4) on flat ground at y = 0) is under it."""
    return bool((paw_heights_m < -BELOW_GROUND_M).any())


class FullBodyIk:
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
        self.enabled = True
        self.weight = np.ones(count)

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
        weights (canis_fullbody_ik, and canis_display_pose: runtime/display.py)."""
        return (
            FRONT_LEGS,
            self.leg_starts,
            self.leg_joints,
            self.leg_joint_weights,
            self.leg_lengths_m,
            MAX_REACH,
            ITERATIONS,
            TOLERANCE_M,
            terrain.heights_m,
            float(terrain.cell_size_m),
            float(terrain.origin_xz_m[0]),
            float(terrain.origin_xz_m[1]),
        )

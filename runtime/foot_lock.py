"""Foot locking: a paw the network puts down stays where it landed until it lifts.

A motion network's stance paws drift a little while they should be planted (the foot skating
the MANN paper measures). Games hide it by pinning each planted paw at its landing point and
bending the leg to it. Here: when a paw's contact starts (runtime.ik.estimate_contacts), its
world position on the ground plane, where it is shown, is kept; while the contact lasts, the
paw is held there; when it lifts, or when the network has carried it further than
MAX_SLIDE_M from the lock (a turn on the spot, a slip the leg cannot absorb), the weight eases
out so the paw rejoins the network's path without a pop. The pull is the native CCD on that
leg (ccd_solve), so bone lengths stay exact; the paw keeps the height it had.

The controller gives it no contacts during a transition or a posture (sit, stand, lie): those
poses place the paws themselves, and a lock pulled through them popped when it let go.

Off unless asked for (Controller(foot_lock=True), or controller.foot_lock.enabled at any
time): it changes the network's motion, so measurements of the networks themselves (canis
evaluate controllers) run without it and report it apart.
"""

from __future__ import annotations

import numpy as np
from canis.runtime.ik import LEG_JOINT_WEIGHTS  # as the terrain IK: the shoulder/hip moves least
from canis.runtime.kinematics import ccd_solve, forward_kinematics
from canis.runtime.root import damp
from canis.runtime.skeleton import DOG_LEG_GROUPS, Skeleton
from canis.runtime.terrain import Heightmap

LOCK_OUT_HALF_LIFE_S = 0.06
MAX_SLIDE_M = 0.12
CCD_ITERATIONS = 8
CCD_TOLERANCE_M = 0.001


class FootLock:
    def __init__(self, skeleton: Skeleton, count: int, enabled: bool = True):
        self.skeleton = skeleton
        self.legs = [skeleton.group(leg) for leg in DOG_LEG_GROUPS]
        self.paws = np.array([leg[-1] for leg in self.legs])
        self.joint_weights = [
            np.array(LEG_JOINT_WEIGHTS[: len(leg) - 1], np.float32) for leg in self.legs
        ]
        self.enabled = enabled  # off: every lock eases out, then nothing is solved
        self.reset(count)

    def reset(self, count: int) -> None:
        legs = len(self.legs)
        self.locked_xz_m = np.zeros((count, legs, 2))
        self.holding = np.zeros((count, legs), dtype=bool)  # pinned now
        self.released = np.zeros((count, legs), dtype=bool)  # let go during this contact
        self.weight = np.zeros((count, legs))

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
    ) -> np.ndarray:
        """Local rotations (N, J, 4) with planted paws pulled to their locks; `contacts`
        (N, 4) in DOG_LEG_GROUPS order. On a terrain a locked paw also takes the ground's
        height change between where the pose put it and its lock. The input is not modified."""
        if self.idle:
            return local_rotations  # off and eased out: costs nothing
        local = np.array(local_rotations, dtype=np.float32, order="C")
        positions, _ = forward_kinematics(self.skeleton, local, hips_m)
        paws = positions[:, self.paws].astype(np.float64)  # (N, 4, 3)
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
        slid = np.linalg.norm(paws_xz - self.locked_xz_m, axis=-1) > MAX_SLIDE_M
        self.released |= self.holding & slid
        self.holding &= contacts & ~slid
        self.released &= contacts  # a new contact may lock again
        target = self.holding.astype(np.float64)
        self.weight = damp(self.weight, target, dt_s, LOCK_OUT_HALF_LIFE_S)
        self.weight[self.weight < 1e-4] = 0.0
        if dt_s <= 0 or not np.any(self.weight > 1e-3):
            return local
        goals = paws.copy()
        goals[..., [0, 2]] += (self.locked_xz_m - paws[..., [0, 2]]) * self.weight[..., None]
        if terrain is not None:
            rise = terrain.sample(goals[..., [0, 2]])[0] - terrain.sample(paws[..., [0, 2]])[0]
            goals[..., 1] += rise
        for k, leg in enumerate(self.legs):
            if np.any(self.weight[:, k] > 1e-3):
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

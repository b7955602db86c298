"""Full-body IK onto uneven terrain, as a post-process of the network's flat-ground pose
(the MANN paper's approach; the data is flat).

1. The hips rise with the terrain under the hind paws and the body pitches by the difference
   between the heights under the front and the hind paws, so legs are not outstretched up or
   down a slope.
2. Each paw keeps the height above the ground that the network gave it, now above the terrain
   under it: paws in stance land on the terrain, swinging paws keep their lift.
3. Targets are clamped short of the leg's full reach, and the native CCD bends each leg to its
   target (the shoulder or hip joint moves least).
4. Everything is scaled by a blend weight that eases in and out when IK is switched.
"""

from __future__ import annotations

import numpy as np

from runtime.kinematics import ccd_solve, forward_kinematics
from runtime.rotations import cross, quat_from_axis_angle, quat_multiply
from runtime.skeleton import DOG_LEG_GROUPS, Skeleton
from runtime.terrain import Heightmap

ITERATIONS = 12
TOLERANCE_M = 0.002
MAX_REACH = 0.97  # of the leg's length: a fully straight leg cannot bend back smoothly
LEG_JOINT_WEIGHTS = (0.3, 1.0, 1.0, 1.0)  # shoulder/hip first: it moves least
BLEND_HALF_LIFE_S = 0.15
# A paw is in contact when the network holds it this low and this slow (its flat-ground
# pose; measured planted paws sit 0-4 cm up and under 0.2 m/s in the mocap).
CONTACT_HEIGHT_M = 0.05
CONTACT_SPEED_MPS = 0.35


class FullBodyIk:
    def __init__(self, skeleton: Skeleton, count: int):
        self.skeleton = skeleton
        self.legs = [skeleton.group(leg) for leg in DOG_LEG_GROUPS]
        # Reach from each leg's first joint to its paw along the bones.
        self.leg_lengths_m = np.array(
            [skeleton.bone_lengths_m()[chain[1:]].sum() for chain in self.legs]
        )
        self.paws = skeleton.group("paws")  # same order as the legs: LF, RF, LH, RH
        self.enabled = True
        self.weight = np.ones(count)

    def update_weight(self, dt_s: float) -> None:
        target = 1.0 if self.enabled else 0.0
        self.weight = target + (self.weight - target) * 0.5 ** (dt_s / BLEND_HALF_LIFE_S)

    def solve(
        self,
        local_rotations: np.ndarray,
        hips_m: np.ndarray,
        ground_y_m: np.ndarray,
        facing: np.ndarray,
        paw_velocities_mps: np.ndarray,
        terrain: Heightmap,
        dt_s: float,
    ):
        """Adapts poses (N, J, 4) local rotations and (N, 3) hips positions to the terrain.

        ground_y_m (N,) is the height of the flat ground the network moves on, facing (N, 3)
        the root's horizontal facing. Returns (local rotations, hips, contacts (N, 4), paw
        targets (N, 4, 3)); the inputs are not modified.
        """
        self.update_weight(dt_s)
        w = self.weight
        local = np.ascontiguousarray(local_rotations, dtype=np.float32).copy()
        hips = np.array(hips_m, dtype=np.float64)
        positions, _ = forward_kinematics(self.skeleton, local, hips)
        paws = positions[:, self.paws].astype(np.float64)
        paw_height_m = paws[..., 1] - ground_y_m[:, None]
        speed = np.linalg.norm(paw_velocities_mps[..., [0, 2]], axis=-1)
        contacts = (paw_height_m < CONTACT_HEIGHT_M) & (speed < CONTACT_SPEED_MPS)
        if not np.any(w > 1e-3):
            return local, hips, contacts, paws

        under, _ = terrain.sample(paws[..., [0, 2]])
        under = under.astype(np.float64) - ground_y_m[:, None]
        front, hind = under[:, :2].mean(axis=1), under[:, 2:].mean(axis=1)
        # Body: the hind legs hang from the hips, so the hips follow the ground under the hind
        # paws; pitching nose-up by the slope between hind and front paws (measured along the
        # facing) then brings the shoulders over the front paws' ground.
        hips[:, 1] += w * hind
        along = np.einsum("nk,nk->n", paws[:, :2].mean(1) - paws[:, 2:].mean(1), facing)
        pitch = np.arctan2(front - hind, np.maximum(along, 0.2))
        lateral = cross(facing, np.array([0.0, 1.0, 0.0]))
        turn = quat_from_axis_angle(lateral, w * pitch).astype(np.float32)
        local[:, 0] = quat_multiply(turn, local[:, 0])
        adapted, _ = forward_kinematics(self.skeleton, local, hips)

        # Paws: keep the network's height above the ground, now above the terrain.
        targets = paws.copy()
        targets[..., 1] = ground_y_m[:, None] + under + paw_height_m
        targets = paws + (targets - paws) * w[:, None, None]
        for leg, chain in enumerate(self.legs):
            start = adapted[:, chain[0]].astype(np.float64)
            reach = targets[:, leg] - start
            distance = np.linalg.norm(reach, axis=-1, keepdims=True)
            limit = MAX_REACH * self.leg_lengths_m[leg]
            targets[:, leg] = start + reach * np.minimum(1.0, limit / np.maximum(distance, 1e-9))
            ccd_solve(
                self.skeleton,
                local,
                hips,
                chain,
                targets[:, leg],
                joint_weights=np.array(LEG_JOINT_WEIGHTS[: len(chain) - 1]),
                max_iterations=ITERATIONS,
                tolerance_m=TOLERANCE_M,
            )
        return local, hips, contacts, targets

"""The controller's motion on a game's own dog (runtime/rig.py), of other proportions.

The network keeps running on the mocap dog, in its own units. A rig's legs are a factor
`stride_scale` (its legs' mean length along the bones over the mocap dog's) of the mocap
dog's, so the rig's world is the network's scaled by that factor: the velocity asked of a rig
dog is divided by it before the network sees it (RigDogs.control), and the root's motion is
multiplied by it when shown (the rig's root is stride_scale times the network's, about the
origin). A corgi's legs, half as long, then take steps half as long and, at the speed asked,
twice as quick, where they would otherwise slide.

The pose: each rig joint's world rotation (in the root frame) is that of the dog joint it is
mapped to, or of its nearest mapped ancestor's, times a constant: the rotation from that dog
joint in the standing keyframe to the rig joint in the rig's rest pose (both in
rig.standing_frame). A rig whose rest pose is the standing keyframe is thus drawn in exactly
the dog's pose; an extra joint (an ear, a jaw, a third spine joint) keeps its rest pose
relative to the joint that carries it. The hips are placed where the network puts the dog's,
scaled by stride_scale across the ground and by the ratio of the two standing hips' heights
upward. The rotations go to the same native display stage as the dog's (runtime/pose.py) with
the rig's skeleton: its bone offsets (so its bone lengths exactly), and its own terrain IK and
foot lock on its own paws. In the foot lock's solve each leg is also bent so that its paw
steps as the dog's does (Retarget.paw_offsets_m), and the lock's and the contact test's
distances and speeds are the dog's scaled as its steps are.
"""

from __future__ import annotations

from dataclasses import fields

import numpy as np
from canis.runtime.features import FPS, LocalPose
from canis.runtime.kinematics import (
    CONTACT_SPEED_MPS,
    FootLock,
    FullBodyIk,
    forward_kinematics,
    rotations_from_directions,
)
from canis.runtime.pose import IS_POSTURE_ACTION, _shown_pose_native, with_display_offsets
from canis.runtime.poses import load_keyframes
from canis.runtime.readouts import interpolated
from canis.runtime.rig import Rig, standing_frame
from canis.runtime.root import rotate_xz
from canis.runtime.rotations import matrix_from_forward_up, quat_to_forward_up, quat_to_matrix
from canis.runtime.skeleton import DOG_LEG_GROUPS, Skeleton, shipped_dog_skeleton_path
from canis.runtime.state import dog_rows
from canis.runtime.trajectory import ControlState


def dog_reference(skeleton: Skeleton) -> tuple[np.ndarray, np.ndarray]:
    """The mocap dog's standing keyframe in rig.standing_frame: positions (J, 3), rotations
    (J, 4), what a rig's rest pose is compared with."""
    stand = load_keyframes()["stand"]
    hips = np.array([[0.0, stand.hips_height_m, 0.0]])
    positions, rotations = forward_kinematics(skeleton, stand.local_rotations[None], hips)
    matrices = quat_to_matrix(rotations[0].astype(np.float64))
    chest = skeleton.index("Spine1")
    return standing_frame(positions[0].astype(np.float64), matrices, chest, skeleton.group("paws"))


def _leg_lengths_m(positions_m: np.ndarray, chains) -> np.ndarray:
    return np.array([np.linalg.norm(np.diff(positions_m[c], axis=0), axis=1).sum() for c in chains])


def stride_scale(rig: Rig, skeleton: Skeleton | None = None) -> float:
    """The rig's mean leg length over the mocap dog's (first leg joint to paw tip, along the
    bones): how much longer its strides are at the same gait."""
    skeleton = skeleton or Skeleton.from_json(shipped_dog_skeleton_path())
    positions, _ = dog_reference(skeleton)
    dog_legs = _leg_lengths_m(positions, [skeleton.group(leg) for leg in DOG_LEG_GROUPS])
    return float(rig.leg_lengths_m.mean() / dog_legs.mean())


def stand_pose(skeleton: Skeleton) -> LocalPose:
    """The standing keyframe as the network's root-frame pose (one dog)."""
    stand = load_keyframes()["stand"]
    hips = np.array([[0.0, stand.hips_height_m, 0.0]])
    positions, rotations = forward_kinematics(skeleton, stand.local_rotations[None], hips)
    forwards, ups = quat_to_forward_up(rotations.astype(np.float64))
    return LocalPose(positions.astype(np.float64), forwards, ups, np.zeros_like(forwards))


class Retarget:
    """The constant part of mapping the dog's pose onto one rig (no per-dog state)."""

    def __init__(self, rig: Rig, skeleton: Skeleton | None = None):
        skeleton = skeleton or Skeleton.from_json(shipped_dog_skeleton_path())
        self.rig, self.skeleton = rig, skeleton
        dog_positions, dog_rotations = dog_reference(skeleton)
        # Each rig joint's driver: its own dog joint, else its nearest mapped ancestor's.
        driven_by = {j: skeleton.index(dog) for dog, j in rig.mapping.items()}
        parents = rig.skeleton.parents
        drivers = np.zeros(rig.skeleton.joint_count, dtype=np.int64)
        for j in range(len(drivers)):  # parents first: an ancestor's driver is known
            drivers[j] = driven_by.get(j, drivers[parents[j]] if j else 0)
        self.drivers = drivers
        # rig world = dog world (its driver's) @ constant, both in the root frame.
        dog_world = quat_to_matrix(dog_rotations)[drivers]
        rig_world = quat_to_matrix(rig.rest_rotations)
        constant = np.swapaxes(dog_world, -1, -2) @ rig_world
        self.forward_in_driver = constant[..., 2]  # (J, 3) the rig joint's +z in its driver's
        self.up_in_driver = constant[..., 1]
        self.stride_scale = stride_scale(rig, skeleton)
        self.height_scale = rig.hips_height_m / float(dog_positions[0, 1])
        self.dog_paws = skeleton.group("paws")
        self.rig_paws = rig.skeleton.group("paws")
        # The hips' root-frame position: across the ground by the stride scale, up by heights.
        self.hips_scale = np.array([self.stride_scale, self.height_scale, self.stride_scale])
        # The paws' (contacts are told from them): across the ground as the root's motion,
        # upward not at all (each paw as high above the ground as the network holds the
        # dog's, the height the contact test reads).
        self.paw_scale = np.array([self.stride_scale, 1.0, self.stride_scale])
        # Where each rig paw stands beside the dog's (scaled) paw when both stand in the
        # keyframe (root frame): the rig's paws follow the dog's steps from there, across the
        # ground; upward they take the network's heights as they are (a greyhound standing
        # in its rest pose would hold its paws 1.3 times as high, a corgi half as high: the
        # corgi's paws then skated 2.3 times as much, measured).
        stand = stand_pose(skeleton)
        self.stand_offsets_m = self._rig_paws(self.pose(stand)) - self._dog_paws(stand)
        self.stand_offsets_m[..., 1] = 0.0

    def pose(self, pose: LocalPose) -> LocalPose:
        """The rig's root-frame pose (N, J_rig, 3 each) for the dog's root-frame `pose`: the
        rotations as forwards and ups, the hips' and paws' positions and the paws' velocities
        (what the display stage reads of positions and velocities)."""
        dog = matrix_from_forward_up(pose.forwards, pose.ups)[:, self.drivers]  # (N, J, 3, 3)
        forwards = np.einsum("njab,jb->nja", dog, self.forward_in_driver)
        ups = np.einsum("njab,jb->nja", dog, self.up_in_driver)
        n, joints = forwards.shape[:2]
        positions = np.zeros((n, joints, 3))
        velocities = np.zeros((n, joints, 3))
        positions[:, 0] = pose.positions_m[:, 0] * self.hips_scale
        positions[:, self.rig_paws] = pose.positions_m[:, self.dog_paws] * self.paw_scale
        velocities[:, self.rig_paws] = pose.velocities_mps[:, self.dog_paws] * self.paw_scale
        return LocalPose(positions, forwards, ups, velocities)

    def paw_offsets_m(self, pose: LocalPose, rig_pose: LocalPose) -> np.ndarray:
        """(N, 4, 3) root frame: how far each of the rig's paws (as `rig_pose` draws them) is
        to move so that it steps as the dog's does: from where it stands, the dog's paw's
        motion scaled across the ground as the root's motion is, so that a paw the network
        holds still stays still in the rig's world whatever the rig's proportions between the
        hips and the paws (a corgi's long back over short legs); upward not scaled: each paw
        is as high above the ground as the network holds the dog's (as the terrain IK keeps
        it), so that a short-legged dog's paws clear the ground as the dog's do rather than
        shuffle along it (its skating was 1.7 times as much, measured). The foot lock bends
        the legs there (FootLock.apply's paw_offsets_m); for a rig of the dog's proportions
        they are nothing, and nothing is bent."""
        target = self._dog_paws(pose) + self.stand_offsets_m
        drawn = self._rig_paws(rig_pose)
        # Heights above the flat ground, as the terrain IK reads them: it lifts a paw below
        # the ground onto it (runtime/kinematics.py), and neither height may undo that.
        np.maximum(target[..., 1], 0.0, out=target[..., 1])
        np.maximum(drawn[..., 1], 0.0, out=drawn[..., 1])
        return target - drawn

    def _dog_paws(self, pose: LocalPose) -> np.ndarray:
        """(N, 4, 3) where the dog's paws are drawn in the root frame (its rotations through
        its bones, as the display stage draws them: the network's positions can disagree),
        scaled across the ground as the root's motion is."""
        n = len(pose.forwards)
        local, _ = rotations_from_directions(self.skeleton, pose.forwards, pose.ups, np.zeros(n))
        drawn, _ = forward_kinematics(self.skeleton, local, pose.positions_m[:, 0])
        return drawn[:, self.dog_paws].astype(np.float64) * self.paw_scale

    def _rig_paws(self, rig_pose: LocalPose) -> np.ndarray:
        """(N, 4, 3) where the rig's paws are drawn in the root frame for its `rig_pose`."""
        n = len(rig_pose.forwards)
        skeleton = self.rig.skeleton
        local, _ = rotations_from_directions(skeleton, rig_pose.forwards, rig_pose.ups, np.zeros(n))
        drawn, _ = forward_kinematics(skeleton, local, rig_pose.positions_m[:, 0])
        return drawn[:, self.rig_paws].astype(np.float64)


class _FollowingLock:
    """The rig dogs' foot lock, handed the paws' offsets (Retarget.paw_offsets_m, in the
    world) to bend the legs to in the same solve: the display stage's foot lock step
    (runtime/pose.py) then runs every frame, as it does whenever a lock is on."""

    def __init__(self, lock: FootLock, offsets_m: np.ndarray):
        self.lock, self.offsets_m = lock, offsets_m

    idle = False

    def apply(self, local_rotations, hips_m, contacts, dt_s, terrain=None):
        args = (local_rotations, hips_m, contacts, dt_s, terrain)
        return self.lock.apply(*args, paw_offsets_m=self.offsets_m)


class RigDogs:
    """Dogs of a controller (rows `dogs`, default all) shown as a rig: their pose each step
    (update), in the rig's world, fitted to `terrain` (None: flat) by the rig's own IK and
    foot lock. The controller itself runs on flat ground in the network's units; several
    RigDogs over different rows drive dogs of different breeds from one controller. Build it
    again after the controller's add or remove."""

    def __init__(self, controller, rig: Rig, dogs=None, terrain=None, foot_lock: bool = False):
        self.controller, self.rig, self.terrain = controller, rig, terrain
        self.retarget = Retarget(rig, controller.skeleton)
        self.count = count = controller.count
        self.rows = np.arange(count) if dogs is None else dog_rows(dogs, count, "RigDogs")
        self.all_rows = len(self.rows) == count
        n = len(self.rows)
        self.ik = FullBodyIk(rig.skeleton, n)
        self.foot_lock = FootLock(rig.skeleton, n, enabled=foot_lock)
        # Distances and speeds the lock and the contact test hold a paw to are the dog's,
        # scaled as its steps are.
        self.foot_lock.max_slide_m *= self.retarget.stride_scale
        self.contact_speed_mps = CONTACT_SPEED_MPS * self.retarget.stride_scale
        self.paw_xz_m = np.zeros((n, len(self.retarget.rig_paws), 2))
        self.paw_speed_mps = np.zeros((n, len(self.retarget.rig_paws)))
        self.display_positions = self.display_rotations = self.contacts = None
        self.update(0.0)
        self.foot_lock.reset(n)  # the first step lands the locks, as the controller's

    @property
    def stride_scale(self) -> float:
        return self.retarget.stride_scale

    def _rows(self, array: np.ndarray) -> np.ndarray:
        return array if self.all_rows else array[self.rows]

    def control(self, control: ControlState) -> ControlState:
        """`control` as the network is to be asked it: these dogs' velocities (and path
        points) divided by the stride scale; the other dogs' as they were."""
        count, s = self.controller.count, self.stride_scale
        velocity = np.array(np.broadcast_to(control.velocity_mps, (count, 2)), dtype=np.float64)
        velocity[self.rows] /= s
        future = control.future_xz_m
        if future is not None:
            future = np.array(np.broadcast_to(future, (count, *np.shape(future)[-2:])))
            future[self.rows] /= s
        return ControlState(velocity, control.facing_yaw_rad, control.action, future)

    @property
    def root_xz_m(self) -> np.ndarray:
        """(n, 2) the rig dogs' roots on the ground, in the rig's world."""
        return self._rows(self.controller.root_xz_m) * self.stride_scale

    @property
    def root_velocity_xz_mps(self) -> np.ndarray:
        return self._rows(self.controller.root_velocity_xz_mps) * self.stride_scale

    def update(self, dt_s: float | None = None) -> None:
        """The rig pose of the controller's current frame (`dt_s` since the last update:
        default one step, 0 to redraw without moving the locks)."""
        c = self.controller
        if c.count != self.count:
            raise ValueError(
                f"RigDogs: the controller has {c.count} dogs, {self.count} when this was "
                "made: make the RigDogs again after add or remove"
            )
        dt_s = 1.0 / FPS if dt_s is None else dt_s
        s = c.state
        pose = with_display_offsets(s.pose, s.display_offset) if c.offsets_active else s.pose
        if not self.all_rows:
            pose = LocalPose(*(getattr(pose, f.name)[self.rows] for f in fields(LocalPose)))
        posture = IS_POSTURE_ACTION[self._rows(s.action_weights).argmax(axis=1)]
        lockable = ~(self._rows(c.in_transition()) | posture)
        rig_pose = self.retarget.pose(pose)
        yaw = np.ascontiguousarray(self._rows(s.root_yaw_rad))
        offsets = self.retarget.paw_offsets_m(pose, rig_pose)
        offsets[..., ::2] = rotate_xz(offsets[..., ::2], yaw)  # (x, z) into the world
        shown = _shown_pose_native(
            self.rig.skeleton,
            self.retarget.rig_paws,
            rig_pose,
            np.ascontiguousarray(self.root_xz_m),
            yaw,
            self.paw_xz_m,
            self.paw_speed_mps,
            lockable,
            self.ik,
            _FollowingLock(self.foot_lock, offsets),
            self.terrain,
            dt_s,
            self.contact_speed_mps,
        )
        if self.display_positions is None or dt_s <= 0:
            self.previous_display_positions, self.previous_display_rotations = shown[:2]
        else:
            self.previous_display_positions = self.display_positions
            self.previous_display_rotations = self.display_rotations
        self.display_positions, self.display_rotations, self.contacts = shown

    def display_pose(self, alpha: float | None = None) -> tuple[np.ndarray, np.ndarray]:
        """World joint positions (n, J_rig, 3) and rotations (n, J_rig, 4) of the rig dogs,
        `alpha` of the way from the last step's (None: the current one)."""
        if alpha is None:
            return self.display_positions, self.display_rotations
        previous = self.previous_display_positions, self.previous_display_rotations
        return interpolated(previous, (self.display_positions, self.display_rotations), alpha)


__all__ = ["RigDogs", "Retarget", "dog_reference", "stride_scale"]

"""The pose stage: the network's prediction applied to the dogs, and the pose shown.

next_local_pose is the next frame's root-frame pose from a prediction: the one definition,
used by the runtime (advance_root) and by closed-loop training
(training/finetune.py), so the network trains on the inputs the game will give it.

advance_root (the root update, next pose, predicted future and history push) and
_shown_pose_native (the shown pose) are each one call into the native core
(native/src/root_motion.cpp, native/src/display_pose.cpp) instead of a few dozen numpy calls
on arrays of 2-80 values, whose cost per call (not their arithmetic) was most of that work.
It is the runtime's one path for that math. Its numpy definition is tests/reference_frame.py,
and tests/test_native_frame.py checks the two equal to float64 rounding (a sine, a cosine or a
matmul may round differently), frame by frame and over a closed loop. Nothing is defined again
here: the layout of x comes from runtime/features.py, the trajectory's weights from
runtime/trajectory.py.

The pose shown to the player: the predicted rotations through FK with the skeleton's
fixed bone offsets at the predicted hips, in the world, eased over a hand-back's difference,
fitted to the terrain by the full-body IK and held by the foot lock.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from canis.runtime import _kinematics
from canis.runtime.features import ACTIONS, LocalPose, Prediction, decode_output, joint_fields
from canis.runtime.kinematics import (
    BELOW_GROUND_M,
    CONTACT_HEIGHT_M,
    CONTACT_SPEED_MPS,
    FLAT_GROUND,
    FootLock,
    FullBodyIk,
    forward_kinematics,
    joints_below_ground,
)
from canis.runtime.look_at import note_shown, turned_pose
from canis.runtime.root import norm_xz, rotate_xz, smoothing_factor, yaw_direction_xz
from canis.runtime.skeleton import Skeleton
from canis.runtime.state import DisplayOffset, DogState
from canis.runtime.terrain import Heightmap
from canis.runtime.trajectory import _HISTORY_FIELDS, _SAMPLE, GroundTrajectory, _history

# The released MANN runtime averages the predicted joint positions with the previous ones
# advanced by the predicted velocities, which removes jitter.
JOINT_POSITION_BLEND = 0.5


# A dog asked to stand (the trajectory's current sample under STAND_ASKED_MPS), not turning,
# whose network moves its root slower than STAND_HOLD_FULL_MPS has that motion faded out, all
# of it under STAND_HOLD_BELOW_MPS: trained networks let a standing dog drift 1-2 cm/s in one
# direction (the paws then slide, and a foot lock lets go of a paw with a jump of 2 cm), where
# the mocap's dog stands. A stop, a turn on the spot and a jump move the root faster or turn
# it: they are untouched. Controller(stand_hold=False) leaves the network's root as it is.
STAND_ASKED_MPS = 0.02
STAND_HOLD_BELOW_MPS = 0.05
STAND_HOLD_FULL_MPS = 0.10
STAND_HOLD_TURN_RADPS = math.radians(20.0)


def hold_standing_root(p: Prediction, asked_speed_mps: np.ndarray) -> Prediction:
    """`p` with the root's drift taken out for the dogs asked to stand (the constants above);
    `p` itself when no dog's is."""
    asked_to_stand = asked_speed_mps < STAND_ASKED_MPS
    if not asked_to_stand.any():  # every dog asked to move: the common frame, at once
        return p
    v = p.root_velocity_mps
    ramp = (norm_xz(v) - STAND_HOLD_BELOW_MPS) / (STAND_HOLD_FULL_MPS - STAND_HOLD_BELOW_MPS)
    keep = np.clip(ramp, 0.0, 1.0)
    standing = asked_to_stand & (np.abs(p.root_yaw_velocity_radps) < STAND_HOLD_TURN_RADPS)
    keep = np.where(standing, keep, 1.0)
    if keep.min() == 1.0:
        return p
    return dataclasses.replace(p, root_velocity_mps=v * keep[:, None])


# A joint's predicted rotation is a forward and an up axis, unit length and orthogonal in every
# frame the network trained on: |forward x up| is 1. Where the network is torn between two poses
# (a forearm folded in a jump or a lie and straight in a stand, say) it predicts their average,
# and both axes shrink towards zero (|forward x up| 0.01-0.05): the rotation built from them then
# turns on noise, and the limb flicks 15-25 cm in a frame while the predicted positions stay
# planted. Below ROTATION_TRUSTED_FROM the previous frame's rotation is kept, from it to
# ROTATION_TRUSTED_AT the two are blended.
ROTATION_TRUSTED_FROM = 0.1
ROTATION_TRUSTED_AT = 0.3


def trusted_rotations(
    previous: LocalPose, p: Prediction, dt_s: float
) -> tuple[np.ndarray, np.ndarray]:
    """The predicted joint axes (N, J, 3) each, kept where they form a frame and eased towards
    the previous pose's, seen from the new root, where they shrink (above). New arrays."""
    forwards, ups = p.joint_forwards, p.joint_ups
    # |f x u|^2 = |f|^2 |u|^2 - (f.u)^2 (Lagrange's identity), as the native core computes it.
    dots = np.einsum("...i,...i->...", forwards, ups)
    area_squared = np.einsum("...i,...i->...", forwards, forwards) * np.einsum(
        "...i,...i->...", ups, ups
    )
    area_squared -= dots * dots
    if area_squared.min() >= ROTATION_TRUSTED_AT**2:  # the common frame: all well formed
        return forwards.copy(), ups.copy()
    area = np.sqrt(np.maximum(area_squared, 0.0))
    well_formed = (area_squared >= ROTATION_TRUSTED_AT**2)[..., None]  # as predicted, exactly
    trust = (area - ROTATION_TRUSTED_FROM) / (ROTATION_TRUSTED_AT - ROTATION_TRUSTED_FROM)
    trust = np.clip(trust, 0.0, 1.0)[..., None]
    turn = -p.root_yaw_velocity_radps * dt_s  # the previous root to the new one
    kept = []
    for axes, predicted in ((previous.forwards, forwards), (previous.ups, ups)):
        before = axes.copy()
        before[..., ::2] = rotate_xz(axes[..., ::2], turn)
        kept.append(np.where(well_formed, predicted, before + trust * (predicted - before)))
    return kept[0], kept[1]


def trust_axes(forwards, ups, previous_forwards, previous_ups, yaw_velocity_radps, dt_s) -> None:
    """trusted_rotations in the native core, in place: `forwards` and `ups` (N, J, 3), C-ordered
    float64, the new axes; the previous pose's axes, seen from the previous root, which turned
    by `yaw_velocity_radps` (N,) over `dt_s` to the new one."""
    _kinematics.trusted_axes(
        dt_s,
        ROTATION_TRUSTED_FROM,
        ROTATION_TRUSTED_AT,
        np.ascontiguousarray(yaw_velocity_radps, dtype=np.float64),
        np.ascontiguousarray(previous_forwards, dtype=np.float64),
        np.ascontiguousarray(previous_ups, dtype=np.float64),
        forwards,
        ups,
    )


def next_local_pose(previous: LocalPose, p: Prediction, dt_s: float) -> LocalPose:
    """The pose the next input x carries: the previous positions seen from the new root,
    advanced by the predicted velocities and averaged with the predicted positions; the
    predicted rotations where well formed (trusted_rotations), the velocities as they are."""
    step_local = p.root_velocity_mps * dt_s  # (N, 2) in the previous root's frame
    turn = p.root_yaw_velocity_radps * dt_s
    moved = previous.positions_m.copy()
    # (x, z) as the strided view ::2 of (x, y, z): the same values as indexing [0, 2], without
    # building an index array and a copy every frame.
    moved[..., ::2] = rotate_xz(moved[..., ::2] - step_local[:, None], -turn)
    advanced = moved + p.joint_velocities_mps * dt_s
    positions = p.joint_positions_m + (advanced - p.joint_positions_m) * JOINT_POSITION_BLEND
    forwards, ups = trusted_rotations(previous, p, dt_s)
    return LocalPose(positions, forwards, ups, p.joint_velocities_mps.copy())


def _make_history_contiguous(state: DogState) -> None:
    """The history's arrays as C-contiguous float64, for the native call to push in place:
    only needed when something gave the state other arrays (a game's own, say); they are the
    state's own from then on."""
    h = state.history
    for name in _HISTORY_FIELDS:
        setattr(h, name, np.ascontiguousarray(getattr(h, name), dtype=np.float64))


def advance_root(state: DogState, p: Prediction, speed_now_mps: np.ndarray, dt_s: float) -> None:
    """The decode stage's root update, next pose (next_local_pose), predicted
    future and history push, natively. The root, pose and predicted future are new arrays,
    as in the numpy code (a reader holding last frame's keeps it); the history is shifted in
    place, as there."""
    s = state
    n, joints, ahead = p.joint_positions_m.shape[0], p.joint_positions_m.shape[1], len(_SAMPLE)
    root_xz = np.array(s.root_xz_m, dtype=np.float64, order="C")
    yaw = np.array(s.root_yaw_rad, dtype=np.float64, order="C")
    velocity = np.empty((n, 2))
    positions = np.empty((n, joints, 3))
    future = [np.empty((n, ahead, 2)) for _ in range(3)]
    arguments = [
        dt_s,
        JOINT_POSITION_BLEND,  # read at the call, as next_local_pose does
        p.root_velocity_mps,
        p.root_yaw_velocity_radps,
        p.joint_positions_m,
        p.joint_velocities_mps,
        p.future_positions_m,
        p.future_directions,
        p.future_velocities_mps,
        s.commanded_actions,
        speed_now_mps,
        s.pose.positions_m,
        root_xz,
        yaw,
        velocity,
        positions,
        *future,
    ]
    try:
        _kinematics.advance_root(*arguments, *_history(s))
    except TypeError:  # a history array it would have to copy (checked only then: cheaper)
        _make_history_contiguous(s)
        _kinematics.advance_root(*arguments, *_history(s))
    s.root_xz_m, s.root_yaw_rad, s.root_velocity_xz_mps = root_xz, yaw, velocity
    forwards = np.array(p.joint_forwards, dtype=np.float64, order="C")
    ups = np.array(p.joint_ups, dtype=np.float64, order="C")
    trust_axes(forwards, ups, s.pose.forwards, s.pose.ups, p.root_yaw_velocity_radps, dt_s)
    s.pose = LocalPose(positions, forwards, ups, p.joint_velocities_mps.copy())
    s.predicted_future = GroundTrajectory(
        *future, np.zeros((n, ahead)), np.zeros((n, ahead, s.commanded_actions.shape[1]))
    )
    s.action_weights = s.commanded_actions.copy()


# When a transition hands a dog back, the motion network's first frame can differ from the
# transition's last (it has never seen that exact state): the displayed pose carries the
# difference as an offset that decays with this half-life (inertialization), so nothing pops.
HANDBACK_HALF_LIFE_S = 0.08


def start_handback_offsets(
    s: DogState, playing: np.ndarray, handed_back: np.ndarray, shown: DogState
) -> None:
    """For the dogs handed back last frame (`handed_back`, shown then as `shown`): what was
    shown minus what the motion network made of it now (which includes one frame of real
    motion; it decays too). Dogs the transition network drives again (`playing`) are left
    alone."""
    keep = ~playing[handed_back]
    rows = np.flatnonzero(handed_back)[keep]
    now = s.rows(rows)
    for name in ("positions_m", "forwards", "ups"):
        offset = getattr(shown.pose, name)[keep] - getattr(now.pose, name)
        setattr(now.display_offset, name, offset)
    now.display_offset.positions_m[:, 1:] = 0.0  # only the hips' position is shown
    s.put_rows(rows, now)
    s.handback_pending[:] = False


def decay_offsets(offset: DisplayOffset, dt_s: float) -> bool:
    """Decays the hand-back offsets by `dt_s` toward none, in place; whether any is left
    (once none is, the controller stops paying for them)."""
    decay = smoothing_factor(dt_s, HANDBACK_HALF_LIFE_S)
    parts = (offset.positions_m, offset.forwards, offset.ups)
    for part in parts:
        part *= decay
        part[np.abs(part) < 1e-5] = 0.0
    return any(np.any(part) for part in parts)


def shown_pose(
    skeleton: Skeleton,
    paws: np.ndarray,
    s: DogState,
    with_offsets: bool,
    lockable: np.ndarray,
    ik: FullBodyIk,
    foot_lock: FootLock,
    terrain: Heightmap | None,
    dt_s: float,
):
    """World joint positions (N, J, 3) and rotations (N, J, 4) of the dogs `s`, and their
    paw contacts (N, 4), told from the paws' motion since the last frame shown (`dt_s` ago;
    s.paw_xz_m and s.paw_speed_mps, which this updates). `with_offsets` adds
    s.display_offset; `lockable` (N,) are the dogs the foot lock may hold; `terrain` None is
    flat ground. Through one native call (_shown_pose_native; up to the foot lock, when it is
    in play); tests/reference_frame.py holds the numpy definition it is checked against."""
    shown = with_display_offsets(s.pose, s.display_offset) if with_offsets else s.pose
    args = (shown, s.root_xz_m, s.root_yaw_rad, s.paw_xz_m, s.paw_speed_mps, lockable)
    return _shown_pose_native(skeleton, paws, *args, ik, foot_lock, terrain, dt_s)


def _facing(yaw_rad: np.ndarray) -> np.ndarray:
    """(N, 3) horizontal facings of yaws (N,), as the IK takes them."""
    facing = np.zeros((len(yaw_rad), 3))
    facing[:, ::2] = yaw_direction_xz(yaw_rad)  # (x, z): ::2 copies no index array
    return facing


def _locked_and_shown(
    skeleton, paws, local, hips, contacts, lockable, ik, foot_lock, terrain, yaw_rad, dt_s
):
    """The shown pose's last part, after the terrain IK: the foot lock, FK, and on flat ground
    the IK only when the shown pose sinks a joint below the ground (the network's rotations
    disagree with its positions in some lies and sits, and it holds the tail low). Returns
    (positions, rotations, contacts)."""
    local = foot_lock.apply(local, hips, contacts & lockable[:, None], dt_s, terrain)
    positions, rotations = forward_kinematics(skeleton, local, hips)
    if terrain is None and joints_below_ground(positions[..., 1]):
        n = len(yaw_rad)
        local, hips, _ = ik.solve(local, hips, np.zeros(n), _facing(yaw_rad), FLAT_GROUND, dt_s)
        positions, rotations = forward_kinematics(skeleton, local, hips)
    return positions, rotations, contacts


def with_display_offsets(pose: LocalPose, offset: DisplayOffset) -> LocalPose:
    """The pose shown with the hand-back offsets added: forwards, ups and the hips' position
    (the offset's only position: start_handback_offsets)."""
    positions = pose.positions_m.copy()
    positions[:, :1] += offset.positions_m[:, :1]
    return LocalPose(
        positions, pose.forwards + offset.forwards, pose.ups + offset.ups, pose.velocities_mps
    )


def _shown_pose_native(
    skeleton: Skeleton,
    paws: np.ndarray,
    pose: LocalPose,
    root_xz_m: np.ndarray,
    root_yaw_rad: np.ndarray,
    paw_xz_m: np.ndarray,
    paw_speed_mps: np.ndarray,
    lockable: np.ndarray,
    ik: FullBodyIk,
    foot_lock: FootLock,
    terrain: Heightmap | None,
    dt_s: float,
    contact_speed_mps: float = CONTACT_SPEED_MPS,
):
    """shown_pose of `pose` (offsets added) through one native call (canis_display_pose: the
    same contacts, rotations, placement, IK and FK, in sequence; it updates paw_xz_m and
    paw_speed_mps in place), with this module's and runtime/kinematics.py's settings. With the foot
    lock in play the call stops before FK (and, on flat ground, before the IK), and the rest
    runs as in shown_pose. The same pose to float32 rounding
    (tests/test_native_frame.py). `contact_speed_mps`: the contact test's paw speed (a
    rig's, runtime/retarget.py, is scaled with its legs)."""
    n, joints = pose.positions_m.shape[:2]
    ground = FLAT_GROUND if terrain is None else terrain
    weight = ik.next_weight(dt_s)
    locking = not foot_lock.idle
    local = np.empty((n, joints, 4) if locking else (0, 0, 4), dtype=np.float32)
    hips = np.empty((n, 3) if locking else (0, 3), dtype=np.float32)
    positions = np.empty((0, 0, 3) if locking else (n, joints, 3), dtype=np.float32)
    rotations = np.empty((0, 0, 4) if locking else (n, joints, 4), dtype=np.float32)
    contacts = np.empty((n, len(paws)), dtype=np.uint8)
    solved = np.zeros(1, dtype=np.int32)
    _kinematics.display_pose(
        skeleton.parents,
        skeleton.offsets_m,
        pose.positions_m,
        pose.forwards,
        pose.ups,
        pose.velocities_mps,
        root_xz_m,
        root_yaw_rad,
        paws,
        paw_xz_m,
        paw_speed_mps,
        dt_s,
        CONTACT_HEIGHT_M,
        contact_speed_mps,
        weight.astype(np.float32),
        *ik.native_settings(ground),
        terrain is None,  # flat ground: the IK only where a joint is below it
        BELOW_GROUND_M,
        locking,
        local,
        hips,
        positions,
        rotations,
        contacts,
        solved,
    )
    if solved[0]:  # ik.solve eases the weight only when it runs
        ik.weight = weight
    contacts = contacts.view(bool)
    if not locking:
        return positions, rotations, contacts
    args = (contacts, lockable, ik, foot_lock, terrain, root_yaw_rad, dt_s)
    return _locked_and_shown(skeleton, paws, local, hips, *args)


def non_finite_rows(outputs: dict[str, np.ndarray]) -> np.ndarray | None:
    """(N,) the dogs with a non-finite value in any output, or None when there is none: a
    sum is finite only when every term is, so the usual frame costs one reduction per
    output (an overflowing sum of finite values only sends it to the row check)."""
    # add.reduce and math.isfinite: the same test as v.sum() and np.isfinite, without their
    # wrappers' cost (a few microseconds a frame, after inference's weights left the caches).
    if all(math.isfinite(np.add.reduce(v, axis=None)) for v in outputs.values()):
        return None
    bad = ~np.all([np.isfinite(v).all(axis=1) for v in outputs.values()], axis=0)
    return bad if bad.any() else None


class OutputReader:
    """decode_output of y in float64, its views over buffers reused every frame (building
    nine views per frame cost more than the decode's math); advance_root copies what it keeps.
    The joints' fields are copied out of y's interleaved rows into contiguous arrays
    (features.joint_fields): the pose update's arithmetic on them is then several times
    cheaper for many dogs; so are the future's three fields, which the native root update
    would otherwise copy out of y every frame. The values are y's, exactly (float32 to
    float64 is exact)."""

    def __init__(self):
        self.y64 = self.prediction = None
        self.y_read = self.y_joints = None  # y's joint fields, a view built once

    def read(self, y: np.ndarray) -> Prediction:
        if self.y_read is not y:  # the bound buffer: the same array every frame
            self.y_read, self.y_joints = y, joint_fields(y)
            p = decode_output(y)
            self.y_future = (p.future_positions_m, p.future_directions, p.future_velocities_mps)
        if self.y64 is None or self.y64.shape != y.shape:
            self.y64 = np.empty(y.shape)
            self.joints64 = np.empty(self.y_joints.shape)
            self.future64 = np.empty((3, *self.y_future[0].shape))
            positions, forwards, ups, velocities = self.joints64
            future_positions, future_directions, future_velocities = self.future64
            self.prediction = dataclasses.replace(
                decode_output(self.y64),
                future_positions_m=future_positions,
                future_directions=future_directions,
                future_velocities_mps=future_velocities,
                joint_positions_m=positions,
                joint_forwards=forwards,
                joint_ups=ups,
                joint_velocities_mps=velocities,
            )
        np.copyto(self.y64, y)
        np.copyto(self.joints64, self.y_joints)
        for buffer, field in zip(self.future64, self.y_future, strict=True):
            np.copyto(buffer, field)
        return self.prediction


def decode(s: DogState, outputs: dict, reader: OutputReader, apply) -> tuple:
    """The decode stage: the network's `outputs` applied to the dogs `s` by `apply(prediction)`
    (the root moved, the next pose, the history pushed), with MANN's expert weights and PFNN's
    phase. A dog whose output is not finite keeps its last good state. Returns (the dogs
    handed back last frame, their rows as shown then (for the display offsets) or None, the
    dogs whose output was not finite or None)."""
    handed_back = s.handback_pending.copy()
    shown = s.rows(handed_back) if handed_back.any() else None
    bad = non_finite_rows(outputs)
    kept = s.rows(bad) if bad is not None else None
    apply(reader.read(outputs["y"]))
    if "expert_weights" in outputs:
        s.expert_weights = outputs["expert_weights"].copy()  # readers may keep it
    if "phase_delta" in outputs:
        s.phase_rad = (s.phase_rad + outputs["phase_delta"][:, 0]) % (2 * np.pi)
    if kept is not None:
        s.put_rows(bad, kept)
    return handed_back, shown, bad


POSTURE_ACTION_INDICES = [ACTIONS.index(a) for a in ("sit", "stand", "lie")]
# Built once (np.isin each frame costs more than the lookup it makes).
IS_POSTURE_ACTION = np.isin(np.arange(len(ACTIONS)), POSTURE_ACTION_INDICES)


def show(
    s: DogState,
    skeleton: Skeleton,
    paws: np.ndarray,
    ik: FullBodyIk,
    foot_lock: FootLock,
    terrain: Heightmap | None,
    in_transition: np.ndarray,
    offsets_active: bool,
    dt_s: float,
    shown_with=shown_pose,
) -> bool:
    """The display stage: the pose shown (shown_with: shown_pose) written into `s` (the
    last one kept as the one display_pose(alpha) interpolates from; with `dt_s` 0, no step,
    the same), the hand-back offsets decayed by `dt_s`. Returns whether any offset is left."""
    with_offsets = dt_s > 0 and offsets_active
    if with_offsets:
        offsets_active = decay_offsets(s.display_offset, dt_s)
    # Transitions and the postures they lead to place the paws themselves (a sitting
    # dog's hind paws slide under it): a lock held through them pulls the leg and pops
    # when it lets go (10 cm in one frame standing -> sit, measured).
    posture = IS_POSTURE_ACTION[s.action_weights.argmax(axis=1)]
    lockable = ~(in_transition | posture)
    # Looking dogs' necks and heads turned on a copy of the state's pose (runtime/look_at.py):
    # s.pose stays the network's, which its next input reads.
    looked = turned_pose(s, skeleton, dt_s)
    source = s if looked is None else dataclasses.replace(s, pose=looked)
    shown = shown_with(skeleton, paws, source, with_offsets, lockable, ik, foot_lock, terrain, dt_s)
    s.paw_xz_m, s.paw_speed_mps = source.paw_xz_m, source.paw_speed_mps  # what it updated
    if dt_s > 0:
        s.previous_display_positions = s.display_positions
        s.previous_display_rotations = s.display_rotations
    else:
        s.previous_display_positions, s.previous_display_rotations = shown[:2]
    s.display_positions, s.display_rotations, s.contacts = shown
    if looked is not None:
        note_shown(s, skeleton)
    return offsets_active

"""The feature contract: the one definition of the networks' input x and output y.

Training builds its dataset through these functions and the runtime builds its per-frame input
through them too, so the two cannot drift apart; `layout_hash()` fingerprints the contract and
exported models carry it.

x (480) = 12 trajectory samples x 13 + 27 joints x 12, per REFERENCE.md section 1:
  trajectory rows, sample frames -50..+60 every 10 around the current frame (row 5):
    position (x, z) m, direction (x, z), velocity (x, z) m/s, speed m/s, action weights (6);
  joint rows: position (3) m, forward (3), up (3), velocity (3) m/s, of the current pose.
y (363) = 6 future samples x 6 + 27 joints x 12 + root update (3):
  the next frame's future trajectory (position, direction, velocity) and pose, both relative
  to the next frame's root, and the root update: velocity (x, z) m/s in the previous root's
  frame and yaw velocity rad/s.
Everything in x is relative to the current root; "speed" is the desired speed: the length of
the root's path over the next second, in m/s. PFNN adds a phase input (radians in [0, 2pi))
and a phase-increment output (radians per frame) as separate tensors.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from canis.runtime.root import to_root_frame, vectors_to_root_frame, wrap_angle_rad
from canis.runtime.rotations import quat_conjugate, quat_multiply, quat_to_forward_up
from canis.runtime.skeleton import DOG_GROUPS, DOG_JOINT_NAMES

CONTRACT_VERSION = 1
FPS = 60
ACTIONS = ("idle", "move", "jump", "sit", "stand", "lie")
# Row i is action i's one-hot vector; built once (np.eye per frame costs more than its use).
ACTION_ONE_HOT = np.eye(len(ACTIONS))
TRAJECTORY_OFFSETS_FRAMES = tuple(range(-50, 61, 10))
CURRENT_SAMPLE = TRAJECTORY_OFFSETS_FRAMES.index(0)
FUTURE_OFFSETS_FRAMES = TRAJECTORY_OFFSETS_FRAMES[CURRENT_SAMPLE + 1 :]
JOINT_COUNT = len(DOG_JOINT_NAMES)
PFNN_PHASE_INPUT = "phase"
PFNN_PHASE_OUTPUT = "phase_delta"


@dataclass(frozen=True)
class Block:
    """A run of `rows` equal records (samples or joints) of named fields, stored row-major."""

    name: str
    rows: int
    fields: tuple[tuple[str, int], ...]

    @cached_property
    def width(self) -> int:
        return sum(size for _, size in self.fields)

    @cached_property
    def _field_slices(self) -> dict[str, slice]:
        slices, start = {}, 0
        for name, size in self.fields:
            slices[name] = slice(start, start + size)
            start += size
        return slices

    def field_slice(self, field: str) -> slice:
        try:
            return self._field_slices[field]
        except KeyError:
            raise KeyError(f"block {self.name!r} has no field {field!r}") from None


@dataclass(frozen=True)
class Layout:
    name: str
    blocks: tuple[Block, ...]

    @cached_property
    def size(self) -> int:
        return sum(b.rows * b.width for b in self.blocks)

    @cached_property
    def _blocks(self) -> dict[str, tuple[Block, slice]]:
        found, start = {}, 0
        for block in self.blocks:
            found[block.name] = (block, slice(start, start + block.rows * block.width))
            start += block.rows * block.width
        return found

    def block(self, name: str) -> Block:
        return self._lookup(name)[0]

    def block_slice(self, name: str) -> slice:
        return self._lookup(name)[1]

    def _lookup(self, name: str) -> tuple[Block, slice]:
        try:
            return self._blocks[name]
        except KeyError:
            raise KeyError(f"layout {self.name!r} has no block {name!r}") from None

    def rows(self, array: np.ndarray, block: str) -> np.ndarray:
        """A view (..., rows, width) of one block of feature vectors (..., size)."""
        b, where = self._lookup(block)
        return array[..., where].reshape(*array.shape[:-1], b.rows, b.width)

    def field(self, array: np.ndarray, block: str, field: str) -> np.ndarray:
        """A writable view (..., rows, field size) of one field of every row of a block."""
        return self.rows(array, block)[..., self.block(block).field_slice(field)]

    def indices(self, block: str, field: str, rows=None) -> np.ndarray:
        """Flat indices into the feature vector of a field, for the given rows (default all)."""
        return self.field(np.arange(self.size), block, field)[
            slice(None) if rows is None else rows
        ].reshape(-1)

    def describe(self) -> list:
        return [[b.name, b.rows, [list(f) for f in b.fields]] for b in self.blocks]


JOINT_FIELDS = (("position", 3), ("forward", 3), ("up", 3), ("velocity", 3))
INPUT = Layout(
    "x",
    (
        Block(
            "trajectory",
            len(TRAJECTORY_OFFSETS_FRAMES),
            (
                ("position", 2),
                ("direction", 2),
                ("velocity", 2),
                ("speed", 1),
                ("action", len(ACTIONS)),
            ),
        ),
        Block("joints", JOINT_COUNT, JOINT_FIELDS),
    ),
)
OUTPUT = Layout(
    "y",
    (
        Block(
            "future_trajectory",
            len(FUTURE_OFFSETS_FRAMES),
            (("position", 2), ("direction", 2), ("velocity", 2)),
        ),
        Block("joints", JOINT_COUNT, JOINT_FIELDS),
        Block("root_update", 1, (("velocity", 2), ("yaw_velocity", 1))),
    ),
)
PAW_ROWS = tuple(DOG_JOINT_NAMES.index(name) for name in DOG_GROUPS["paws"])


def gating_indices() -> np.ndarray:
    """Where the gating network's 19 inputs sit in x: the four paws' velocities (12), the
    current sample's action weights (6) and its desired speed (1)."""
    return np.concatenate(
        [
            INPUT.indices("joints", "velocity", rows=list(PAW_ROWS)),
            INPUT.indices("trajectory", "action", rows=CURRENT_SAMPLE),
            INPUT.indices("trajectory", "speed", rows=CURRENT_SAMPLE),
        ]
    )


def contract_description() -> dict:
    """Everything a model must agree on with the runtime; hashed into layout_hash()."""
    return {
        "version": CONTRACT_VERSION,
        "fps": FPS,
        "units": "metres, seconds, radians; y up; root frame +z forward",
        "actions": list(ACTIONS),
        "joint_names": list(DOG_JOINT_NAMES),
        "trajectory_offsets_frames": list(TRAJECTORY_OFFSETS_FRAMES),
        "input": INPUT.describe(),
        "output": OUTPUT.describe(),
        "gating_indices": gating_indices().tolist(),
        "pfnn": {"input": PFNN_PHASE_INPUT, "output": PFNN_PHASE_OUTPUT},
    }


def layout_hash() -> str:
    text = json.dumps(contract_description(), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass
class Trajectory:
    """Trajectory samples in world space: (N, S, ...) for N characters and S samples."""

    positions_m: np.ndarray  # (N, S, 3)
    directions: np.ndarray  # (N, S, 3) horizontal unit facing
    velocities_mps: np.ndarray  # (N, S, 3)
    speeds_mps: np.ndarray  # (N, S) desired speed
    actions: np.ndarray  # (N, S, 6) action weights


@dataclass
class Pose:
    """Joint state in world space, (N, J, ...)."""

    positions_m: np.ndarray  # (N, J, 3)
    rotations: np.ndarray  # (N, J, 4) global quaternions
    velocities_mps: np.ndarray  # (N, J, 3)


@dataclass
class LocalTrajectory:
    """Trajectory samples in the root frame, on the ground plane: (N, S, ...)."""

    positions_xz_m: np.ndarray  # (N, S, 2)
    directions_xz: np.ndarray  # (N, S, 2)
    velocities_xz_mps: np.ndarray  # (N, S, 2)
    speeds_mps: np.ndarray  # (N, S)
    actions: np.ndarray  # (N, S, 6)


@dataclass
class LocalPose:
    """Joint state in the root frame, as the networks read and write it: (N, J, 3) each."""

    positions_m: np.ndarray
    forwards: np.ndarray
    ups: np.ndarray
    velocities_mps: np.ndarray


def trajectory_to_root_frame(root_position_m, root_rotation, trajectory: Trajectory):
    xz = [0, 2]
    return LocalTrajectory(
        to_root_frame(trajectory.positions_m, root_position_m, root_rotation)[..., xz],
        vectors_to_root_frame(trajectory.directions, root_rotation)[..., xz],
        vectors_to_root_frame(trajectory.velocities_mps, root_rotation)[..., xz],
        trajectory.speeds_mps,
        trajectory.actions,
    )


def pose_to_root_frame(root_position_m, root_rotation, pose: Pose) -> LocalPose:
    local_rotations = quat_multiply(quat_conjugate(root_rotation)[:, None, :], pose.rotations)
    forward, up = quat_to_forward_up(local_rotations)
    return LocalPose(
        to_root_frame(pose.positions_m, root_position_m, root_rotation),
        forward,
        up,
        vectors_to_root_frame(pose.velocities_mps, root_rotation),
    )


def input_views(x: np.ndarray) -> tuple[LocalTrajectory, LocalPose]:
    """Writable views (N, ...) of every field of x (N, 480), as write_input fills them: a
    caller that writes the same buffer every frame builds them once (views cost more to
    build than the copies into them)."""
    rows, block = INPUT.rows(x, "trajectory"), INPUT.block("trajectory")
    field = lambda name: rows[..., block.field_slice(name)]  # noqa: E731
    trajectory = LocalTrajectory(
        field("position"), field("direction"), field("velocity"), field("speed")[..., 0],
        field("action"),
    )  # fmt: skip
    return trajectory, _joint_views(INPUT, x)


def _joint_views(layout: Layout, features: np.ndarray) -> LocalPose:
    rows, block = layout.rows(features, "joints"), layout.block("joints")
    return LocalPose(*(rows[..., block.field_slice(name)] for name, _ in JOINT_FIELDS))


def write_input(
    trajectory: LocalTrajectory,
    pose: LocalPose,
    out=None,
    views: tuple[LocalTrajectory, LocalPose] | None = None,
) -> np.ndarray:
    """x (N, 480) from root-frame state: the one place x is laid out. `views`: input_views(out),
    when the caller keeps them."""
    n = len(trajectory.speeds_mps)
    x = np.empty((n, INPUT.size), dtype=np.float32) if out is None else out
    fields, joints = input_views(x) if views is None else views
    fields.positions_xz_m[...] = trajectory.positions_xz_m
    fields.directions_xz[...] = trajectory.directions_xz
    fields.velocities_xz_mps[...] = trajectory.velocities_xz_mps
    fields.speeds_mps[...] = trajectory.speeds_mps
    fields.actions[...] = trajectory.actions
    _write_pose(joints, pose)
    return x


def write_input_joints(pose: LocalPose, views: tuple[LocalTrajectory, LocalPose]) -> None:
    """x's joint rows alone, through input_views(x) (the trajectory rows written by the
    native core: runtime/pose.py)."""
    _write_pose(views[1], pose)


def write_joints(layout: Layout, features: np.ndarray, pose: LocalPose) -> None:
    _write_pose(_joint_views(layout, features), pose)


def _write_pose(views: LocalPose, pose: LocalPose) -> None:
    views.positions_m[...] = pose.positions_m
    views.forwards[...] = pose.forwards
    views.ups[...] = pose.ups
    views.velocities_mps[...] = pose.velocities_mps


def build_input(root_position_m, root_rotation, trajectory: Trajectory, pose: Pose, out=None):
    """x (N, 480) from world-space state relative to roots (N, 3) / (N, 4)."""
    return write_input(
        trajectory_to_root_frame(root_position_m, root_rotation, trajectory),
        pose_to_root_frame(root_position_m, root_rotation, pose),
        out,
    )


@dataclass
class Prediction:
    """What y says, as views into it. Trajectory and joints are relative to the new root;
    the root update is in the previous root's frame."""

    future_positions_m: np.ndarray  # (N, 6, 2) x, z
    future_directions: np.ndarray  # (N, 6, 2)
    future_velocities_mps: np.ndarray  # (N, 6, 2)
    joint_positions_m: np.ndarray  # (N, J, 3)
    joint_forwards: np.ndarray  # (N, J, 3)
    joint_ups: np.ndarray  # (N, J, 3)
    joint_velocities_mps: np.ndarray  # (N, J, 3)
    root_velocity_mps: np.ndarray  # (N, 2) x, z
    root_yaw_velocity_radps: np.ndarray  # (N,)

    def pose(self) -> LocalPose:
        return LocalPose(
            self.joint_positions_m, self.joint_forwards, self.joint_ups, self.joint_velocities_mps
        )


def joint_fields(features: np.ndarray, layout: Layout = OUTPUT) -> np.ndarray:
    """A view (4, ..., J, 3) of the joints block of y (or x, with layout=INPUT), fields
    first in JOINT_FIELDS' order (position, forward, up, velocity). Copied into a contiguous
    buffer it makes each field one contiguous array: arithmetic on the fields' own views,
    three values between strides, costs several times more for many dogs."""
    rows = layout.rows(features, "joints")
    split = rows.reshape(*rows.shape[:-1], len(JOINT_FIELDS), 3)
    return np.moveaxis(split, -2, 0)


def decode_output(y: np.ndarray) -> Prediction:
    f = lambda block, field: OUTPUT.field(y, block, field)  # noqa: E731
    return Prediction(
        future_positions_m=f("future_trajectory", "position"),
        future_directions=f("future_trajectory", "direction"),
        future_velocities_mps=f("future_trajectory", "velocity"),
        joint_positions_m=f("joints", "position"),
        joint_forwards=f("joints", "forward"),
        joint_ups=f("joints", "up"),
        joint_velocities_mps=f("joints", "velocity"),
        root_velocity_mps=f("root_update", "velocity")[:, 0],
        root_yaw_velocity_radps=f("root_update", "yaw_velocity")[:, 0, 0],
    )


def build_output(
    previous_root_position_m: np.ndarray,
    previous_root_rotation: np.ndarray,
    root_position_m: np.ndarray,
    root_rotation: np.ndarray,
    future: Trajectory,
    pose: Pose,
    dt_s: float,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """y (N, 363) from world-space state: the new root, its future trajectory samples (only
    positions, directions and velocities are used) and pose, and the root before the update."""
    n = len(root_position_m)
    y = np.empty((n, OUTPUT.size), dtype=np.float32) if out is None else out
    p = decode_output(y)
    p.future_positions_m[:] = to_root_frame(future.positions_m, root_position_m, root_rotation)[
        ..., [0, 2]
    ]
    p.future_directions[:] = vectors_to_root_frame(future.directions, root_rotation)[..., [0, 2]]
    p.future_velocities_mps[:] = vectors_to_root_frame(future.velocities_mps, root_rotation)[
        ..., [0, 2]
    ]
    write_joints(OUTPUT, y, pose_to_root_frame(root_position_m, root_rotation, pose))
    moved = to_root_frame(
        root_position_m[:, None, :], previous_root_position_m, previous_root_rotation
    )[:, 0]
    p.root_velocity_mps[:] = moved[:, [0, 2]] / dt_s
    turned = quat_multiply(quat_conjugate(previous_root_rotation), root_rotation)
    yaw_change_rad = wrap_angle_rad(2.0 * np.arctan2(turned[:, 2], turned[:, 0]))
    p.root_yaw_velocity_radps[:] = yaw_change_rad / dt_s
    return y


def write_features(
    pose: LocalPose, phase_rad: np.ndarray, views: tuple, inputs: dict[str, np.ndarray]
) -> None:
    """The features stage: x's joint rows through input_views(x) (its trajectory rows are
    written in the trajectory stage), and PFNN's phase input where the model has one."""
    write_input_joints(pose, views)
    if "phase" in inputs:
        inputs["phase"][:, 0] = phase_rad

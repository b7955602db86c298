"""The character controller: N dogs stepped together at the data's 60 Hz.

Each step: smooth the command, build the desired trajectory and blend it with the network's
last prediction, build x through the feature contract, run the network, move the root by the
predicted root update, and take the predicted pose as the next frame's state. The pose shown
to the player comes from the predicted joint rotations through forward kinematics with the
skeleton's fixed bone offsets, so bone lengths never drift.
"""

from __future__ import annotations

import numpy as np

from runtime.features import (
    ACTIONS,
    CURRENT_SAMPLE,
    FPS,
    TRAJECTORY_OFFSETS_FRAMES,
    Pose,
    Trajectory,
    build_input,
    decode_output,
)
from runtime.ik import CONTACT_HEIGHT_M, CONTACT_SPEED_MPS, FullBodyIk
from runtime.inference import MotionModel
from runtime.kinematics import forward_kinematics
from runtime.poses import load_keyframes
from runtime.profiler import Profiler
from runtime.root import from_root_frame, vectors_from_root_frame, wrap_angle_rad, yaw_quaternion
from runtime.rotations import quat_conjugate, quat_from_forward_up, quat_multiply
from runtime.skeleton import Skeleton, shipped_dog_skeleton_path
from runtime.terrain import Heightmap
from runtime.trajectory import (
    ACTION_HALF_LIFE_S,
    DEFAULT_TAU,
    FACING_HALF_LIFE_S,
    VELOCITY_HALF_LIFE_S,
    ControlState,
    blend,
    extrapolate,
    smoothing_factor,
    yaw_direction,
)

DT_S = 1.0 / FPS
HISTORY_FRAMES = -TRAJECTORY_OFFSETS_FRAMES[0] + 1  # the past samples and the current frame
PAST_SAMPLE_FRAMES = np.array(TRAJECTORY_OFFSETS_FRAMES[:CURRENT_SAMPLE]) + HISTORY_FRAMES - 1
# The released MANN runtime averages the predicted joint positions with the previous ones
# advanced by the predicted velocities, which removes jitter.
JOINT_POSITION_BLEND = 0.5


class Controller:
    def __init__(
        self,
        model: MotionModel,
        count: int = 1,
        tau: float = DEFAULT_TAU,
        start_pose: str = "stand",
        terrain: Heightmap | None = None,
        profiler: Profiler | None = None,
    ):
        """`terrain` None is flat ground at y = 0 (no IK needed); the profiler times each
        stage of every step (its owner closes frames with profiler.end_frame())."""
        self.model = model
        self.count = count
        self.tau = tau
        self.terrain = terrain
        self.profiler = profiler or Profiler()
        self.skeleton = Skeleton.from_json(shipped_dog_skeleton_path())
        self.keyframes = load_keyframes()
        self.ik = FullBodyIk(self.skeleton, count)
        self.reset(start_pose=start_pose)

    def reset(self, root_xz_m=None, yaw_rad=None, start_pose: str = "stand") -> None:
        n = self.count
        key = self.keyframes[start_pose]
        root_xz = (
            np.zeros((n, 2)) if root_xz_m is None else np.asarray(root_xz_m, float).reshape(n, 2)
        )
        self.root_yaw_rad = (
            np.zeros(n) if yaw_rad is None else np.asarray(yaw_rad, float).reshape(n)
        )
        self.root_position_m = np.stack([root_xz[:, 0], np.zeros(n), root_xz[:, 1]], axis=1)
        self.root_velocity_mps = np.zeros((n, 3))
        root_rotation = yaw_quaternion(self.root_yaw_rad)
        local = np.repeat(key.local_rotations[None], n, axis=0)
        local[:, 0] = quat_multiply(root_rotation, local[:, 0])
        hips = self.root_position_m + [0.0, key.hips_height_m, 0.0]
        positions, rotations = forward_kinematics(self.skeleton, local, hips)
        self.pose = Pose(
            positions.astype(np.float64),
            rotations.astype(np.float64),
            np.zeros((n, self.skeleton.joint_count, 3)),
        )
        idle = np.eye(len(ACTIONS))[ACTIONS.index("idle")]
        self.action_weights = np.repeat(idle[None], n, axis=0)
        self.commanded_velocity_mps = np.zeros((n, 2))
        self.commanded_yaw_rad = self.root_yaw_rad.copy()
        self.commanded_actions = self.action_weights.copy()
        self.history = Trajectory(
            positions_m=np.repeat(self.root_position_m[:, None], HISTORY_FRAMES, axis=1),
            directions=np.repeat(yaw_direction(self.root_yaw_rad)[:, None], HISTORY_FRAMES, 1),
            velocities_mps=np.zeros((n, HISTORY_FRAMES, 3)),
            speeds_mps=np.zeros((n, HISTORY_FRAMES)),
            actions=np.repeat(self.action_weights[:, None], HISTORY_FRAMES, axis=1),
        )
        self.predicted_future: Trajectory | None = None
        self.desired_future: Trajectory | None = None
        self.phase_rad = np.zeros(n)
        self.expert_weights = None
        self.frame = 0
        self._update_display_pose(0.0)

    def _smooth_command(self, control: ControlState) -> None:
        a = smoothing_factor(DT_S, VELOCITY_HALF_LIFE_S)
        self.commanded_velocity_mps = (
            control.velocity_mps + (self.commanded_velocity_mps - control.velocity_mps) * a
        )
        a = smoothing_factor(DT_S, FACING_HALF_LIFE_S)
        self.commanded_yaw_rad = wrap_angle_rad(
            control.facing_yaw_rad
            + wrap_angle_rad(self.commanded_yaw_rad - control.facing_yaw_rad) * a
        )
        target = np.eye(len(ACTIONS))[control.action]
        a = smoothing_factor(DT_S, ACTION_HALF_LIFE_S)
        self.commanded_actions = target + (self.commanded_actions - target) * a

    def trajectory(self) -> Trajectory:
        """The 12 samples x sees: the past from history, now, and the blended future."""
        desired = extrapolate(
            self.root_position_m,
            self.root_velocity_mps,
            self.root_yaw_rad,
            self.action_weights,
            self.commanded_velocity_mps,
            self.commanded_yaw_rad,
            self.commanded_actions,
        )
        self.desired_future = desired
        future = blend(desired, self.predicted_future, self.tau)
        h = self.history
        past = lambda a: a[:, PAST_SAMPLE_FRAMES]  # noqa: E731
        # The desired speed is the player's (smoothed) target speed. Measuring it on a path
        # that starts from the dog's current motion, let alone on the network's own
        # prediction, feeds the dog's speed back into its input and it runs away.
        now_speed = np.linalg.norm(self.commanded_velocity_mps, axis=1)
        return Trajectory(
            positions_m=np.concatenate(
                [past(h.positions_m), self.root_position_m[:, None], future.positions_m], axis=1
            ),
            directions=np.concatenate(
                [past(h.directions), yaw_direction(self.root_yaw_rad)[:, None], future.directions],
                axis=1,
            ),
            velocities_mps=np.concatenate(
                [past(h.velocities_mps), self.root_velocity_mps[:, None], future.velocities_mps],
                axis=1,
            ),
            speeds_mps=np.concatenate(
                [past(h.speeds_mps), now_speed[:, None], future.speeds_mps], axis=1
            ),
            actions=np.concatenate(
                [past(h.actions), self.action_weights[:, None], future.actions], axis=1
            ),
        )

    def step(self, control: ControlState) -> np.ndarray:
        """Advances every character one frame; returns the network input x it used."""
        stage = self.profiler.stage
        with stage("input"):
            control = control.validated(self.count)
            self._smooth_command(control)
        with stage("trajectory"):
            trajectory = self.trajectory()
        with stage("features"):
            root_rotation = yaw_quaternion(self.root_yaw_rad)
            x = build_input(self.root_position_m, root_rotation, trajectory, self.pose)
        with stage("inference"):
            outputs = self.model.run(x, self.phase_rad)
        with stage("decode"):
            self._apply(
                decode_output(outputs["y"].astype(np.float64)),
                root_rotation,
                trajectory.speeds_mps[:, CURRENT_SAMPLE],
            )
            if "expert_weights" in outputs:
                self.expert_weights = outputs["expert_weights"]
            if "phase_delta" in outputs:
                self.phase_rad = (self.phase_rad + outputs["phase_delta"][:, 0]) % (2 * np.pi)
        with stage("ik"):
            self._update_display_pose(DT_S)
        self.frame += 1
        return x

    def _apply(self, p, old_rotation, speed_now) -> None:
        n = self.count
        step_local = np.zeros((n, 1, 3))
        step_local[:, 0, [0, 2]] = p.root_velocity_mps * DT_S
        old_position = self.root_position_m
        new_position = old_position + vectors_from_root_frame(step_local, old_rotation)[:, 0]
        self.root_yaw_rad = wrap_angle_rad(self.root_yaw_rad + p.root_yaw_velocity_radps * DT_S)
        rotation = yaw_quaternion(self.root_yaw_rad)
        self.root_position_m = new_position
        self.root_velocity_mps = (new_position - old_position) / DT_S

        velocities = vectors_from_root_frame(p.joint_velocities_mps, rotation)
        predicted = from_root_frame(p.joint_positions_m, new_position, rotation)
        advanced = self.pose.positions_m + velocities * DT_S
        positions = predicted + (advanced - predicted) * JOINT_POSITION_BLEND
        rotations = quat_multiply(
            rotation[:, None], quat_from_forward_up(p.joint_forwards, p.joint_ups)
        )
        self.pose = Pose(positions, rotations, velocities)

        def lift(xz):  # (N, S, 2) ground-plane values into 3-D
            out = np.zeros((*xz.shape[:-1], 3))
            out[..., [0, 2]] = xz
            return out

        self.predicted_future = Trajectory(
            positions_m=from_root_frame(lift(p.future_positions_m), new_position, rotation),
            directions=vectors_from_root_frame(lift(p.future_directions), rotation),
            velocities_mps=vectors_from_root_frame(lift(p.future_velocities_mps), rotation),
            speeds_mps=np.zeros(p.future_positions_m.shape[:2]),
            actions=np.zeros((*p.future_positions_m.shape[:2], len(ACTIONS))),
        )
        self.action_weights = self.commanded_actions.copy()
        self._push_history(speed_now)

    def _push_history(self, speed_now) -> None:
        h = self.history
        for array, value in (
            (h.positions_m, self.root_position_m),
            (h.directions, yaw_direction(self.root_yaw_rad)),
            (h.velocities_mps, self.root_velocity_mps),
            (h.speeds_mps, speed_now),
            (h.actions, self.action_weights),
        ):
            array[:, :-1] = array[:, 1:]
            array[:, -1] = value

    def _update_display_pose(self, dt_s: float) -> None:
        """The pose shown: the predicted rotations through FK with fixed bone offsets at the
        predicted hips, then fitted to the terrain by the full-body IK."""
        rotations = self.pose.rotations
        local = rotations.copy()
        parents = self.skeleton.parents
        local[:, 1:] = quat_multiply(quat_conjugate(rotations[:, parents[1:]]), rotations[:, 1:])
        hips = self.pose.positions_m[:, 0]
        paws = self.skeleton.group("paws")
        if self.terrain is None:
            ground = self.root_position_m[:, 1]
            heights = self.pose.positions_m[:, paws, 1] - ground[:, None]
            speeds = np.linalg.norm(self.pose.velocities_mps[:, paws][..., [0, 2]], axis=-1)
            self.contacts = (heights < CONTACT_HEIGHT_M) & (speeds < CONTACT_SPEED_MPS)
        else:
            local, hips, self.contacts, _ = self.ik.solve(
                local,
                hips,
                self.root_position_m[:, 1],
                yaw_direction(self.root_yaw_rad),
                self.pose.velocities_mps[:, paws],
                self.terrain,
                dt_s,
            )
        self.display_positions, self.display_rotations = forward_kinematics(
            self.skeleton, local, hips
        )

    def display_pose(self) -> tuple[np.ndarray, np.ndarray]:
        """World joint positions (N, J, 3) and rotations (N, J, 4) to draw."""
        return self.display_positions, self.display_rotations

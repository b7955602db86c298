"""The character controller: N dogs stepped together at the data's 60 Hz.

Each step: smooth the command, build the desired trajectory and blend it with the network's
last prediction, write x through the feature contract, run the network, move the root by the
predicted root update, and keep the predicted pose as the next frame's state.

The state lives where the network reads and writes it: the pose in the root frame (the
network's joint outputs are already relative to the new root, exactly what the next input
needs), the trajectory on the ground plane. The root is a pure yaw, so moving between frames
is a planar rotation. World space is only made for the pose shown to the player, which comes
from the predicted rotations through FK with the skeleton's fixed bone offsets (bone lengths
never drift) and is then fitted to the terrain by the full-body IK.
"""

from __future__ import annotations

import logging

import numpy as np
from canis.runtime.features import (
    ACTIONS,
    FPS,
    TRAJECTORY_OFFSETS_FRAMES,
    LocalPose,
    LocalTrajectory,
    decode_output,
    write_input,
)
from canis.runtime.foot_lock import FootLock
from canis.runtime.ik import FullBodyIk, estimate_contacts
from canis.runtime.inference import MotionModel
from canis.runtime.kinematics import forward_kinematics, rotations_from_directions
from canis.runtime.poses import KEYFRAME_ACTIONS, Keyframe, keyframe_pose, load_keyframes
from canis.runtime.profiler import Profiler
from canis.runtime.root import (
    from_root_xz,
    rotate_xz,
    to_root_xz,
    wrap_angle_rad,
    yaw_direction_xz,
    yaw_from_direction,
)
from canis.runtime.skeleton import Skeleton, shipped_dog_skeleton_path
from canis.runtime.speed_calibration import SpeedCalibration
from canis.runtime.terrain import Heightmap
from canis.runtime.trajectory import (
    ACTION_HALF_LIFE_S,
    DEFAULT_TAU,
    FACING_HALF_LIFE_S,
    VELOCITY_HALF_LIFE_S,
    ControlState,
    GroundTrajectory,
    along_path,
    blend,
    extrapolate,
    smoothing_factor,
)
from canis.runtime.transition import TransitionModel, target_blend
from canis.runtime.transition_frames import (
    CONTEXT_FRAMES,
    frame_vector,
    placement,
    placement_to_world,
)
from canis.runtime.transition_player import ActiveTransition, apply_frame, stopping_point

log = logging.getLogger("canis.runtime")
DT_S = 1.0 / FPS
HISTORY_FRAMES = -TRAJECTORY_OFFSETS_FRAMES[0] + 1  # the past samples and the current frame
PAST_SAMPLES = np.array([o for o in TRAJECTORY_OFFSETS_FRAMES if o < 0]) + HISTORY_FRAMES - 1
# The released MANN runtime averages the predicted joint positions with the previous ones
# advanced by the predicted velocities, which removes jitter.
JOINT_POSITION_BLEND = 0.5
# Speed tracking (Controller._track_speed): the gain moves by RATE x relative speed error per
# second, within RANGE; the measured speed is smoothed over a few strides.
SPEED_TRACKING_RATE = 0.4
SPEED_TRACKING_GAIN_RANGE = (0.5, 1.6)
SPEED_TRACKING_MEASURE_HALF_LIFE_S = 0.4
SPEED_TRACKING_MIN_MPS = 0.2
# With a speed calibration (interactive use, e.g. the demo): the feed-forward from the
# network's own speed curve, times the integral gain, times (1 + P x relative error) so an
# overshoot is answered at once; the product stays within RESPONSIVE_RANGE. The measured
# speed is smoothed less, so the dog is within 10% of the asked speed (over 2 s) about 3 s
# after a change (MANN-8 at 0.6-3.3 m/s; tests/test_speed_calibration.py).
SPEED_TRACKING_PROPORTIONAL = 2.0
SPEED_TRACKING_RESPONSIVE_HALF_LIFE_S = 0.25
SPEED_TRACKING_RESPONSIVE_RANGE = (0.25, 2.5)
# When a transition hands a dog back, the motion network's first frame can differ from the
# transition's last (it has never seen that exact state): the displayed pose carries the
# difference as an offset that decays with this half-life (inertialization), so nothing pops.
HANDBACK_HALF_LIFE_S = 0.08
POSTURE_ACTION_INDICES = [ACTIONS.index(a) for a in ("sit", "stand", "lie")]


class Controller:
    def __init__(
        self,
        model: MotionModel,
        count: int = 1,
        tau: float = DEFAULT_TAU,
        start_pose: str = "stand",
        terrain: Heightmap | None = None,
        profiler: Profiler | None = None,
        speed_tracking: bool = True,
        transition_model: TransitionModel | None = None,
        foot_lock: bool = False,
        speed_calibration: SpeedCalibration | None = None,
    ):
        """`terrain` None is flat ground at y = 0 (no IK needed); the profiler times each
        stage of every step (its owner closes frames with profiler.end_frame());
        `transition_model` enables transition_to; `foot_lock` pins planted paws where they
        landed (runtime/foot_lock.py); `speed_calibration` (the model's own speed curve,
        runtime/speed_calibration.py) makes the speed tracking reach the asked speed within
        seconds of a change rather than settling over a minute."""
        self.model = model
        self.transition_model = transition_model
        self.count = count
        self.tau = tau
        self.terrain = terrain
        self.speed_tracking = speed_tracking
        self.speed_calibration = speed_calibration
        self.profiler = profiler or Profiler()
        self.skeleton = Skeleton.from_json(shipped_dog_skeleton_path())
        self.paws = self.skeleton.group("paws")
        self.keyframes = load_keyframes()
        self.ik = FullBodyIk(self.skeleton, count)
        self.foot_lock = FootLock(self.skeleton, count, enabled=foot_lock)
        # Bound once: x is written into the session's own input buffer every frame.
        self._buffers = model.bind(count)
        self.reset(start_pose=start_pose)

    def reset(self, root_xz_m=None, yaw_rad=None, start_pose: str = "stand") -> None:
        n = self.count
        self.foot_lock.reset(n)
        key = self.keyframes[start_pose]
        self.root_xz_m = (
            np.zeros((n, 2))
            if root_xz_m is None
            else np.array(root_xz_m, dtype=np.float64).reshape(n, 2)
        )
        self.root_yaw_rad = (
            np.zeros(n) if yaw_rad is None else np.array(yaw_rad, dtype=np.float64).reshape(n)
        )
        self.root_velocity_xz_mps = np.zeros((n, 2))
        still = keyframe_pose(self.skeleton, key)  # already in its root frame
        tile = lambda a: np.repeat(a, n, axis=0)  # noqa: E731
        self.pose = LocalPose(*(tile(a) for a in vars(still).values()))
        idle = np.eye(len(ACTIONS))[ACTIONS.index("idle")]
        self.action_weights = np.repeat(idle[None], n, axis=0)
        self.commanded_velocity_mps = np.zeros((n, 2))
        self.commanded_yaw_rad = self.root_yaw_rad.copy()
        self.commanded_actions = self.action_weights.copy()
        self.path_future_xz_m = None
        frames = HISTORY_FRAMES
        self.history = GroundTrajectory(
            positions_xz_m=np.repeat(self.root_xz_m[:, None], frames, axis=1),
            directions_xz=np.repeat(yaw_direction_xz(self.root_yaw_rad)[:, None], frames, 1),
            velocities_xz_mps=np.zeros((n, frames, 2)),
            speeds_mps=np.zeros((n, frames)),
            actions=np.repeat(self.action_weights[:, None], frames, axis=1),
        )
        self.predicted_future: GroundTrajectory | None = None
        self.desired_future: GroundTrajectory | None = None
        self.phase_rad = np.zeros(n)
        # The last CONTEXT_FRAMES frames as the transition network reads them.
        still = frame_vector(np.zeros((n, 2)), np.zeros(n), self.pose)
        self.frame_history = np.repeat(still[:, None], CONTEXT_FRAMES, axis=1)
        self.transitions: list[ActiveTransition] = []
        self.handback_pending = np.zeros(n, dtype=bool)
        # Display offsets (root frame) left by hand-backs: hips position, joint axes.
        self.display_offset = {
            name: np.zeros((n, self.skeleton.joint_count, 3))
            for name in ("positions_m", "forwards", "ups")
        }
        self.offsets_active = False
        self.expert_weights = None
        self.non_finite_events = 0
        self.speed_gain = np.ones(n)
        self.measured_speed_mps = np.zeros(n)
        self.frame = 0
        self._update_display_pose(0.0)

    @property
    def root_position_m(self) -> np.ndarray:
        """(N, 3) world root positions on the network's flat ground (y = 0)."""
        return np.stack([self.root_xz_m[:, 0], np.zeros(self.count), self.root_xz_m[:, 1]], 1)

    def _track_speed(self, control: ControlState) -> ControlState:
        """Speed tracking: the network's speed for a given asked speed is monotonic but not
        the identity at walking and pacing speeds, so a slow integral correction scales the
        asked velocity until the measured speed matches it (a cruise control; off with
        Controller(speed_tracking=False))."""
        asked = np.linalg.norm(control.velocity_mps, axis=1)
        moving = (asked > SPEED_TRACKING_MIN_MPS) & (control.action == ACTIONS.index("move"))
        half_life_s = (
            SPEED_TRACKING_MEASURE_HALF_LIFE_S
            if self.speed_calibration is None
            else SPEED_TRACKING_RESPONSIVE_HALF_LIFE_S
        )
        a = smoothing_factor(DT_S, half_life_s)
        speed = np.linalg.norm(self.root_velocity_xz_mps, axis=1)
        self.measured_speed_mps = speed + (self.measured_speed_mps - speed) * a
        error = (asked - self.measured_speed_mps) / np.maximum(asked, 1e-9)
        self.speed_gain = np.where(
            moving,
            np.clip(
                self.speed_gain + SPEED_TRACKING_RATE * error * DT_S, *SPEED_TRACKING_GAIN_RANGE
            ),
            1.0 + (self.speed_gain - 1.0) * a,
        )  # relax back when not moving
        scale = self.speed_gain
        if self.speed_calibration is not None:
            feed_forward = self.speed_calibration.command_for(asked) / np.maximum(asked, 1e-9)
            proportional = np.where(moving, 1.0 + SPEED_TRACKING_PROPORTIONAL * error, 1.0)
            scale = feed_forward * np.clip(scale * proportional, *SPEED_TRACKING_RESPONSIVE_RANGE)
        return ControlState(
            control.velocity_mps * scale[:, None],
            control.facing_yaw_rad,
            control.action,
            control.future_xz_m,
        )

    def _smooth_command(self, control: ControlState) -> None:
        self.path_future_xz_m = control.future_xz_m
        a = smoothing_factor(DT_S, VELOCITY_HALF_LIFE_S)
        self.commanded_velocity_mps = (
            control.velocity_mps + (self.commanded_velocity_mps - control.velocity_mps) * a
        )
        a = smoothing_factor(DT_S, FACING_HALF_LIFE_S)
        gap = wrap_angle_rad(self.commanded_yaw_rad - control.facing_yaw_rad)
        self.commanded_yaw_rad = wrap_angle_rad(control.facing_yaw_rad + gap * a)
        target = np.eye(len(ACTIONS))[control.action]
        a = smoothing_factor(DT_S, ACTION_HALF_LIFE_S)
        self.commanded_actions = target + (self.commanded_actions - target) * a

    def trajectory(self) -> LocalTrajectory:
        """The 12 samples x sees, in the root frame: the past from history, now, and the
        blended future."""
        desired = extrapolate(
            self.root_xz_m,
            self.root_velocity_xz_mps,
            self.root_yaw_rad,
            self.action_weights,
            self.commanded_velocity_mps,
            self.commanded_yaw_rad,
            self.commanded_actions,
        )
        if self.path_future_xz_m is not None:
            desired = along_path(desired, self.root_xz_m, self.path_future_xz_m)
        self.desired_future = desired
        future = blend(desired, self.predicted_future, self.tau)
        h, yaw = self.history, self.root_yaw_rad

        def samples(past, now, ahead):
            return np.concatenate([past[:, PAST_SAMPLES], now[:, None], ahead], axis=1)

        positions = samples(h.positions_xz_m, self.root_xz_m, future.positions_xz_m)
        directions = samples(h.directions_xz, yaw_direction_xz(yaw), future.directions_xz)
        velocities = samples(
            h.velocities_xz_mps, self.root_velocity_xz_mps, future.velocities_xz_mps
        )
        speeds = samples(h.speeds_mps, desired.speeds_mps[:, 0], future.speeds_mps)
        actions = samples(h.actions, self.action_weights, future.actions)
        return LocalTrajectory(
            to_root_xz(positions, self.root_xz_m, yaw),
            rotate_xz(directions, -yaw),
            rotate_xz(velocities, -yaw),
            speeds,
            actions,
        )

    def step(self, control: ControlState) -> np.ndarray:
        """Advances every character one frame; returns the network input x it used (a view
        of the bound input buffer: copy it to keep it)."""
        stage = self.profiler.stage
        with stage("input"):
            control = control.validated(self.count)
            if self.speed_tracking:
                control = self._track_speed(control)
            self._smooth_command(control)
        with stage("trajectory"):
            trajectory = self.trajectory()
        with stage("features"):
            x = write_input(trajectory, self.pose, out=self._buffers.inputs["x"])
            if "phase" in self._buffers.inputs:
                self._buffers.inputs["phase"][:, 0] = self.phase_rad
        with stage("inference"):
            outputs = self.model.run_bound(self._buffers)
        with stage("decode"):
            shown = self._shown_pose(self.handback_pending) if self.handback_pending.any() else None
            bad = ~np.all([np.all(np.isfinite(v), axis=1) for v in outputs.values()], axis=0)
            kept = self._state_rows(bad) if bad.any() else None
            self._apply(decode_output(outputs["y"].astype(np.float64)), trajectory.speeds_mps)
            if "expert_weights" in outputs:
                self.expert_weights = outputs["expert_weights"].copy()
            if "phase_delta" in outputs:
                self.phase_rad = (self.phase_rad + outputs["phase_delta"][:, 0]) % (2 * np.pi)
            if kept is not None:
                self._restore_rows(bad, kept)
        if self.transitions:
            with stage("transition"):
                self._play_transitions()
        if shown is not None:
            self._start_handback_offsets(shown)
        with stage("ik"):
            self._update_display_pose(DT_S)
        self.frame += 1
        return x

    # Every per-character array a step changes, by attribute path from the controller
    # (resolved when used: a step replaces some of these objects).
    STATE_PATHS = (
        ("root_xz_m",),
        ("root_yaw_rad",),
        ("root_velocity_xz_mps",),
        ("action_weights",),
        ("phase_rad",),
        ("expert_weights",),
        ("pose", "positions_m"),
        ("pose", "forwards"),
        ("pose", "ups"),
        ("pose", "velocities_mps"),
        ("history", "positions_xz_m"),
        ("history", "directions_xz"),
        ("history", "velocities_xz_mps"),
        ("history", "speeds_mps"),
        ("history", "actions"),
        ("predicted_future", "positions_xz_m"),
        ("predicted_future", "directions_xz"),
        ("predicted_future", "velocities_xz_mps"),
    )

    def _resolve(self, path) -> np.ndarray | None:
        value = self
        for name in path:
            value = getattr(value, name, None)
            if value is None:
                return None
        return value

    def _state_rows(self, rows: np.ndarray) -> list:
        saved = []
        for path in self.STATE_PATHS:
            array = self._resolve(path)
            if array is not None:
                saved.append((path, array[rows].copy()))
        return saved

    def _restore_rows(self, rows: np.ndarray, kept: list) -> None:
        """A character whose network output was not finite keeps its last good state (the
        others move on); the event is counted and logged."""
        for path, values in kept:
            current = self._resolve(path)
            if current is not None and current.shape[1:] == values.shape[1:]:
                current[rows] = values
        self.non_finite_events += int(rows.sum())
        log.warning(
            "non-finite network output for characters %s at frame %d: they keep their "
            "last good state",
            np.flatnonzero(rows).tolist(),
            self.frame,
        )

    def _apply(self, p, speeds_mps) -> None:
        step_local = p.root_velocity_mps * DT_S  # (N, 2) in the previous root's frame
        turn = p.root_yaw_velocity_radps * DT_S
        step_world = rotate_xz(step_local[:, None], self.root_yaw_rad)[:, 0]
        self.root_xz_m = self.root_xz_m + step_world
        self.root_yaw_rad = wrap_angle_rad(self.root_yaw_rad + turn)
        self.root_velocity_xz_mps = step_world / DT_S

        # The previous positions seen from the new root, advanced by the predicted velocities,
        # averaged with the predicted positions.
        previous = self.pose.positions_m.copy()
        previous[..., [0, 2]] = rotate_xz(previous[..., [0, 2]] - step_local[:, None], -turn)
        advanced = previous + p.joint_velocities_mps * DT_S
        positions = p.joint_positions_m + (advanced - p.joint_positions_m) * JOINT_POSITION_BLEND
        self.pose = LocalPose(
            positions, p.joint_forwards.copy(), p.joint_ups.copy(), p.joint_velocities_mps.copy()
        )

        n, ahead = self.count, p.future_positions_m.shape[1]
        self.predicted_future = GroundTrajectory(
            from_root_xz(p.future_positions_m, self.root_xz_m, self.root_yaw_rad),
            rotate_xz(p.future_directions, self.root_yaw_rad),
            rotate_xz(p.future_velocities_mps, self.root_yaw_rad),
            np.zeros((n, ahead)),
            np.zeros((n, ahead, len(ACTIONS))),
        )
        self.action_weights = self.commanded_actions.copy()
        self._push_history(speeds_mps[:, PAST_SAMPLES.size])
        if self.transition_model is not None:  # only transitions read it
            self.frame_history[:, :-1] = self.frame_history[:, 1:]
            self.frame_history[:, -1] = frame_vector(
                p.root_velocity_mps, p.root_yaw_velocity_radps, self.pose
            )

    def _push_history(self, speed_now) -> None:
        h = self.history
        for array, value in (
            (h.positions_xz_m, self.root_xz_m),
            (h.directions_xz, yaw_direction_xz(self.root_yaw_rad)),
            (h.velocities_xz_mps, self.root_velocity_xz_mps),
            (h.speeds_mps, speed_now),
            (h.actions, self.action_weights),
        ):
            array[:, :-1] = array[:, 1:]
            array[:, -1] = value

    def transition_to(
        self,
        target: str | Keyframe,
        frames: int = 30,
        characters=None,
        at_xz_m=None,
        yaw_rad=None,
        action: str | None = None,
    ) -> None:
        """Hands `characters` (default all) to the transition network, which takes them from
        their last CONTEXT_FRAMES frames to `target` (a keyframe name or a Keyframe, e.g. a
        recorded pose) in `frames` frames, then back to the motion network holding `action`
        (default: the keyframe's own). The target stands at `at_xz_m` (N, 2) facing `yaw_rad`,
        by default where the character would stop if it slowed evenly over the transition."""
        if self.transition_model is None:
            raise RuntimeError("transition_to needs Controller(transition_model=...)")
        keyframe = self.keyframes.get(target) if isinstance(target, str) else target
        if keyframe is None:
            raise ValueError(f"no keyframe {target!r}; the library has {', '.join(self.keyframes)}")
        keyframe = keyframe.checked()
        action = action or KEYFRAME_ACTIONS.get(keyframe.name, "idle")
        if action not in ACTIONS:
            raise ValueError(f"unknown action {action!r}; choose one of {', '.join(ACTIONS)}")
        rows = np.arange(self.count) if characters is None else np.atleast_1d(characters)
        n = len(rows)
        with self.profiler.stage("transition"):
            seconds = (frames + 1) / FPS
            target_xz, target_yaw = stopping_point(self, rows, seconds)
            if at_xz_m is not None:
                target_xz = np.broadcast_to(np.asarray(at_xz_m, dtype=np.float64), (n, 2)).copy()
            if yaw_rad is not None:
                target_yaw = np.broadcast_to(np.asarray(yaw_rad, dtype=np.float64), (n,)).copy()
            if not (np.all(np.isfinite(target_xz)) and np.all(np.isfinite(target_yaw))):
                raise ValueError("the transition's target position or yaw is not finite")
            target_frame = np.repeat(
                frame_vector(np.zeros((1, 2)), np.zeros(1), keyframe_pose(self.skeleton, keyframe)),
                n,
                axis=0,
            )
            h = self.history
            past_xz = h.positions_xz_m[rows, -CONTEXT_FRAMES:]
            past_yaw = yaw_from_direction(h.directions_xz[rows, -CONTEXT_FRAMES:])
            context_placements = placement(
                past_xz.reshape(-1, 2),
                past_yaw.reshape(-1),
                np.repeat(target_xz, CONTEXT_FRAMES, axis=0),
                np.repeat(target_yaw, CONTEXT_FRAMES, axis=0),
            ).reshape(n, CONTEXT_FRAMES, 4)
            generated, placements = self.transition_model.generate(
                self.frame_history[rows], context_placements, target_frame, frames
            )
            generated, placements = target_blend(generated, placements, target_frame)
            xz, yaw = placement_to_world(
                placements.reshape(-1, 4).astype(np.float64),
                np.repeat(target_xz, frames + 1, axis=0),
                np.repeat(target_yaw, frames + 1, axis=0),
            )
            self.transitions = [t for t in self.transitions if not np.isin(t.rows, rows).any()]
            self.transitions.append(
                ActiveTransition.unpack(
                    rows,
                    np.concatenate([self.frame_history[rows, -1:], generated], axis=1),
                    np.concatenate(
                        [self.root_xz_m[rows, None], xz.reshape(n, frames + 1, 2)], axis=1
                    ),
                    np.concatenate(
                        [self.root_yaw_rad[rows, None], yaw.reshape(n, frames + 1)], axis=1
                    ),
                    self.action_weights[rows].copy(),
                    ACTIONS.index(action),
                    self.skeleton.parents,
                )
            )

    def in_transition(self) -> np.ndarray:
        """(N,) whether each character is being driven by the transition network."""
        busy = np.zeros(self.count, dtype=bool)
        for t in self.transitions:
            busy[t.rows] = True
        return busy

    def _play_transitions(self) -> None:
        for t in self.transitions:
            apply_frame(self, t)
            if t.shown == t.length:
                self.handback_pending[t.rows] = True
        self.transitions = [t for t in self.transitions if t.shown < t.length]

    def _shown_pose(self, rows: np.ndarray) -> tuple:
        return rows.copy(), {name: getattr(self.pose, name).copy() for name in self.display_offset}

    def _start_handback_offsets(self, shown) -> None:
        """For the dogs handed back last frame: what was shown then minus what the motion
        network made of it now (which includes one frame of real motion; it decays too)."""
        rows, before = shown
        rows = rows & ~self.in_transition()
        for name, offset in self.display_offset.items():
            offset[rows] = before[name][rows] - getattr(self.pose, name)[rows]
        self.display_offset["positions_m"][:, 1:] = 0.0  # only the hips' position is shown
        self.handback_pending[:] = False
        self.offsets_active = True

    def _update_display_pose(self, dt_s: float) -> None:
        """The pose shown: predicted rotations through FK with fixed bone offsets at the
        predicted hips, in the world, then fitted to the terrain by the full-body IK."""
        pose = self.pose
        forwards, ups, hips_local = pose.forwards, pose.ups, pose.positions_m[:, :1]
        if dt_s > 0 and self.offsets_active:
            decay = smoothing_factor(dt_s, HANDBACK_HALF_LIFE_S)
            for offset in self.display_offset.values():
                offset *= decay
                offset[np.abs(offset) < 1e-5] = 0.0
            # Decayed away everywhere: stop paying for it.
            self.offsets_active = any(np.any(o) for o in self.display_offset.values())
            forwards = forwards + self.display_offset["forwards"]
            ups = ups + self.display_offset["ups"]
            hips_local = hips_local + self.display_offset["positions_m"][:, :1]
        local, _ = rotations_from_directions(self.skeleton, forwards, ups, self.root_yaw_rad)
        hips = np.empty((self.count, 3))
        hips[:, [0, 2]] = from_root_xz(hips_local[..., [0, 2]], self.root_xz_m, self.root_yaw_rad)[
            :, 0
        ]
        hips[:, 1] = hips_local[:, 0, 1]
        # Root-frame heights are heights above the network's flat ground.
        self.contacts = estimate_contacts(
            pose.positions_m[:, self.paws, 1], pose.velocities_mps[:, self.paws]
        )
        if self.terrain is not None:
            facing = np.zeros((self.count, 3))
            facing[:, [0, 2]] = yaw_direction_xz(self.root_yaw_rad)
            local, hips, _ = self.ik.solve(
                local, hips, np.zeros(self.count), facing, self.terrain, dt_s
            )
        # Transitions and the postures they lead to place the paws themselves (a sitting
        # dog's hind paws slide under it): a lock held through them pulls the leg and pops
        # when it lets go (10 cm in one frame standing -> sit, measured).
        posture = np.isin(self.action_weights.argmax(axis=1), POSTURE_ACTION_INDICES)
        lockable = ~(self.in_transition() | posture)
        local = self.foot_lock.apply(
            local, hips, self.contacts & lockable[:, None], dt_s, self.terrain
        )
        self.display_positions, self.display_rotations = forward_kinematics(
            self.skeleton, local, hips
        )

    def display_pose(self) -> tuple[np.ndarray, np.ndarray]:
        """World joint positions (N, J, 3) and rotations (N, J, 4) to draw."""
        return self.display_positions, self.display_rotations

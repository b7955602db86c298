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
from canis.runtime import snapshot
from canis.runtime.arguments import MAX_DOGS, controller_options, random_generator, whole_number
from canis.runtime.control import COMMAND_FIELDS, SpeedCalibration, command, measured_speed_mps
from canis.runtime.dog_ids import DogIds
from canis.runtime.features import (
    FPS,
    input_views,
    write_features,
)
from canis.runtime.inference import MotionModel, infer
from canis.runtime.kinematics import FootLock, FullBodyIk
from canis.runtime.look_at import LookAt
from canis.runtime.machine import model_used
from canis.runtime.pose import (
    OutputReader,
    advance_root,
    decode,
    hold_standing_root,
    show,
    shown_pose,
    start_handback_offsets,
)
from canis.runtime.poses import Keyframe, load_keyframes
from canis.runtime.profiler import Profiler
from canis.runtime.readouts import Readouts, record_frame
from canis.runtime.skeleton import Skeleton, shipped_dog_skeleton_path
from canis.runtime.state import (
    DISPLAY_ROWS,
    DogState,
    concat_states,
    dog_rows,
    still_state,
)
from canis.runtime.terrain import Heightmap
from canis.runtime.trajectory import (
    DEFAULT_TAU,
    ControlState,
    GroundTrajectory,
    write_trajectory,
)
from canis.runtime.transition import TransitionModel, TransitionRows
from canis.runtime.transition_frames import frame_vector
from canis.runtime.transition_player import TransitionPlayer
from canis.runtime.transition_requests import (
    TransitionStart,
    start_transition,
)

log = logging.getLogger("canis.runtime")
DT_S = 1.0 / FPS


class Controller(Readouts, DogIds, LookAt):
    _shown_pose = staticmethod(shown_pose)  # the pose shown: runtime/pose.py, natively

    def __init__(
        self,
        model: MotionModel,
        count: int = 1,
        tau: float = DEFAULT_TAU,
        start_pose: str = "stand",
        terrain: Heightmap | None = None,
        profiler: Profiler | None = None,
        speed_tracking: bool = True,
        stand_hold: bool = True,
        transition_model: TransitionModel | None = None,
        foot_lock: bool = False,
        speed_calibration: SpeedCalibration | None = None,
        max_dogs: int | None = None,
        transition_worker: bool = False,
        seed: int | None = None,
        native_frame: bool = True,
    ):
        """`terrain` None is flat ground (a Heightmap, or a built-in name or file); the
        profiler times each stage; `transition_model` enables transition_to; `foot_lock` pins
        planted paws; `speed_calibration` (the model's speed curve) makes the speed tracking
        answer within seconds; `transition_worker` steps the transition network on a thread
        of its own (`close()` stops it); `seed` seeds what sampled transitions draw from;
        `stand_hold` takes a dog asked to stand's slow drift out of its root (runtime/pose.py).
        The per-frame math runs in the native core (its numpy definition: tests/reference_frame.
        py); `native_frame` is for old callers (True only). docs/EMBEDDING.md has each."""
        tau, terrain = controller_options(
            count, max_dogs, tau, terrain, transition_model, native_frame
        )
        self.rng = random_generator(seed, "Controller: seed")
        self.model = model
        self.max_dogs = max_dogs  # add() refuses to go past it (a game's memory limit)
        self.transition_model = transition_model
        self.transition_worker = bool(transition_worker)
        # The worker's thread CPU (ms) for the steps that the last step waited for (and any
        # waited for since the step before it): in no stage of the caller's thread.
        self.transition_worker_cpu_ms = 0.0
        self.transitions: TransitionPlayer | None = None
        self.next_dog_id = 0  # ids are never reused (runtime/dog_ids.py)
        self.posture_waits: dict = {}  # PostureRequests waiting, by dog id (in the snapshot)
        self.count = count
        self.tau = tau
        self.terrain = terrain
        self.speed_tracking, self.stand_hold = speed_tracking, stand_hold
        self.speed_calibration = speed_calibration
        self.profiler = profiler or Profiler()
        self.profiler.use_model(model_used(model), dogs=count)
        self.skeleton = Skeleton.from_json(shipped_dog_skeleton_path())
        self.paws = self.skeleton.group("paws")
        self.keyframes = load_keyframes()
        self.ik = FullBodyIk(self.skeleton, count)
        self.foot_lock = FootLock(self.skeleton, count, enabled=foot_lock)
        # Bound once: x is written into the session's own input buffer every frame.
        self._bind(count)
        self._reader = OutputReader()  # y in float64, its views built once
        self.reset(start_pose=start_pose)
        self.state.dog_id = self._new_ids(count)

    def reset(
        self, root_xz_m=None, yaw_rad=None, start_pose: str = "stand", characters=None, ids=None
    ) -> None:
        """Puts every dog (or only `characters`: indices or a boolean mask of N; or `ids`)
        standing still at `root_xz_m` (n, 2) facing `yaw_rad` (n,) in `start_pose`; the other
        dogs go on as they were. The dogs keep their ids and where they look."""
        characters = self._named_rows(characters, ids, "reset")
        if characters is not None:
            rows = dog_rows(characters, self.count, "reset")
            fresh = self._fresh_state(len(rows), root_xz_m, yaw_rad, start_pose, "reset")
            self._settle_transitions()
            # The IK's easing, foot locks and transition rows go on; the shown pose is redrawn.
            kept = self.state.rows(rows)
            for name in ("ik", "foot_lock", "transitions", "dog_id", "look_at", *DISPLAY_ROWS):
                setattr(fresh, name, getattr(kept, name))
            self.state.put_rows(rows, fresh)
            if self.transitions is not None:
                self.transitions.active[rows] = False
            self._redraw()
            return
        fresh = self._fresh_state(self.count, root_xz_m, yaw_rad, start_pose, "reset")
        if hasattr(self, "state"):  # the IK's easing goes on; the locks are let go below
            fresh.ik, fresh.foot_lock = self.state.ik, self.state.foot_lock
            fresh.dog_id, fresh.look_at = self.state.dog_id, self.state.look_at
        if self.transitions is not None:
            self.transitions.close()
        rtn, worker = self.transition_model, self.transition_worker
        self.transitions = (
            None
            if rtn is None
            else TransitionPlayer(rtn, self.count, self.skeleton.parents, worker=worker)
        )
        self._set_state_object(fresh)
        self._has_prediction = False
        self.path_future_xz_m = None
        self.desired_future: GroundTrajectory | None = None
        self.offsets_active = False  # any hand-back offset left to decay
        self.non_finite_events = 0
        self.frame = 0
        self._redraw()
        # After the still pose is shown: the first step lands the locks, whether the lock was
        # on from construction or switched on before that step (as a replayed script does).
        self.foot_lock.reset(self.count)

    def place(self, state: DogState) -> None:
        """Puts every dog in `state` (a DogState with a row per dog, as rows() gives), its
        predicted_future taken as the network's last prediction, as though the dogs had been
        moving: training's rollouts start dogs in the mocap's state at a frame
        (training/torch_runtime.py). A state that does not fit is refused, the controller
        unchanged."""
        self.state.copy().put_rows(np.arange(self.count), state)  # refuses before any change
        ids = self.state.dog_id.copy()  # the same dogs: their ids stay
        self.state.put_rows(np.arange(self.count), state)
        self.state.dog_id[:] = ids
        self._has_prediction = True
        self.path_future_xz_m = None
        self._redraw()
        self.foot_lock.reset(self.count)

    def _fresh_state(self, n: int, root_xz_m, yaw_rad, start_pose: str, caller: str) -> DogState:
        """The state of `n` dogs standing still (what reset and add start dogs from)."""
        experts = getattr(self.model, "experts", None)
        fresh = still_state(
            self.skeleton, self.keyframes, experts, n, root_xz_m, yaw_rad, start_pose, caller
        )
        if self.transition_model is not None:
            fresh.transitions = TransitionRows.zeros(n, self.transition_model.noise_width)
        return fresh

    def add(self, count: int = 1, root_xz_m=None, yaw_rad=None, start_pose="stand") -> np.ndarray:
        """Adds `count` dogs standing still at `root_xz_m` (count, 2) facing `yaw_rad`
        (count,); returns their ids (int64; their rows are the last ones). Nothing changes on
        a bad argument or past Controller.max_dogs."""
        whole_number(count, 1, f"add: count must be a whole number of dogs >= 1, got {count!r}")
        if self.count + count > MAX_DOGS:
            raise ValueError(
                f"add: {count} more dog(s) would make {self.count + count}, past MAX_DOGS "
                f"({MAX_DOGS})"
            )
        if self.max_dogs is not None and self.count + count > self.max_dogs:
            raise ValueError(
                f"add: {count} more dog(s) would make {self.count + count}, past max_dogs "
                f"{self.max_dogs}"
            )
        fresh = self._fresh_state(count, root_xz_m, yaw_rad, start_pose, "add")
        fresh.dog_id = self._new_ids(count)
        self._settle_transitions()
        self._set_state_object(concat_states(self.state, fresh))
        self._resize(self.count + count)
        self._redraw()
        return fresh.dog_id.copy()

    def remove(self, indices=None, ids=None) -> None:
        """Takes the dogs `indices` (rows, or a boolean mask) or `ids` out; the others keep
        their order and ids, their rows renumbered from 0. At least one dog stays."""
        named = self._named_rows(indices, ids, "remove")
        rows = dog_rows(named, self.count, "remove", "indices" if ids is None else "ids")
        if not len(rows):  # nothing to take out: nothing changes (it reset the interpolation)
            return
        if len(rows) >= self.count:
            raise ValueError(f"remove: {rows.tolist()} would leave no dog; at least one stays")
        keep = np.setdiff1d(np.arange(self.count), rows)
        self._settle_transitions()
        self._set_state_object(self.state.rows(keep))
        self._resize(len(keep))
        self._settle_display()
        self._forget_removed_dogs()

    def _set_state_object(self, state: DogState) -> None:
        """`state` as the dogs' state, the IK, foot lock and transitions bound to its rows."""
        self.state = state
        self.ik.rows, self.foot_lock.rows = state.ik, state.foot_lock
        if self.transitions is not None:
            self.transitions.rows = state.transitions

    def _settle_transitions(self) -> None:
        """The transition worker's steps under way stored, before the rows change."""
        if self.transitions is not None:
            self.transitions.settle()

    def _redraw(self) -> None:  # the current pose shown, with no step to interpolate from
        self._update_display_pose(0.0)

    def _settle_display(self) -> None:
        """No step to interpolate from yet: display_pose(alpha) shows the current pose."""
        self.previous_display_positions = self.display_positions
        self.previous_display_rotations = self.display_rotations

    def _resize(self, count: int) -> None:
        """`count` dogs now (the state holds their rows): the network's buffers rebound to
        the new batch (their storage grows by doubling: not per frame)."""
        for name in ("path_future_xz_m", "desired_future"):
            setattr(self, name, None)  # rebuilt by the next step
        self.count = count
        self._bind(count, reuse=self._buffers)
        self.profiler.use_model(model_used(self.model), dogs=count)

    def _bind(self, count: int, reuse=None) -> None:
        """The network's buffers for `count` dogs, and the views of x's fields that the
        features are written through (built once per binding, not per frame)."""
        self._buffers = self.model.bind(count, **({} if reuse is None else {"reuse": reuse}))
        self._x_views = input_views(self._buffers.inputs["x"])

    def get_state(self) -> dict:
        """A plain, picklable snapshot of every dog (runtime/state.py)."""
        self._settle_transitions()
        return snapshot.capture(self)

    def set_state(self, state: dict) -> None:
        """Restores a get_state() snapshot exactly, or refuses it and changes nothing."""
        self._settle_transitions()
        snapshot.restore(self, state)

    def close(self) -> None:
        """Stops the transition worker's thread, if any (transitions then run in this one)."""
        self.transition_worker = False
        if self.transitions is not None:
            self.transitions.close()

    def _motion_network_idle(self) -> bool:
        """Whether every dog plays a transition frame this step: the transition then sets
        each one's root, pose, history and action (TransitionPlayer._show_next), so nothing
        reads the motion network's output, and its inference (the largest stage of a plain
        frame) is skipped; the rest of the step runs as usual on the last output. With some
        dogs not playing it runs for all (the bound batch is every dog). The readouts made
        from the output keep their last values meanwhile: the expert weights, and PFNN's
        phase goes on at its last rate."""
        t = self.transitions
        return t is not None and bool(t.playing.all())

    def _write_trajectory(self, x: np.ndarray) -> np.ndarray:
        """The desired future (kept as desired_future) and x's trajectory rows, in the native
        core (runtime/trajectory.py); returns the current sample's desired speed (N,)."""
        s = self.state
        self.desired_future = write_trajectory(
            s, self.path_future_xz_m, self.predicted_future, self.tau, x
        )
        return self.desired_future.speeds_mps[:, 0]

    def step(self, control: ControlState) -> np.ndarray:
        """Advances every character one frame; returns the network input x it used (a view
        of the bound input buffer: copy it to keep it). One call a stage, in the frame's
        order (the profiler's stages)."""
        if not isinstance(control, ControlState):
            raise TypeError(f"step: control must be a ControlState, got {type(control).__name__}")
        s, stage, t = self.state, self.profiler.stage, self.transitions
        x = self._buffers.inputs["x"]
        # What the input stage writes is put back if a stage up to the network fails (out of
        # memory, a lost GPU): until its output is applied the step is all or nothing.
        kept = {name: getattr(s, name).copy() for name in COMMAND_FIELDS}
        kept_future = self.path_future_xz_m, self.desired_future
        try:
            with stage("input"):
                held = t.leading if t is not None else None
                self.path_future_xz_m = command(
                    s, control, self.count, held, self.speed_tracking, self.speed_calibration
                )
            with stage("trajectory"):
                speed_now = self._write_trajectory(x)
            with stage("features"):
                write_features(s.pose, s.phase_rad, self._x_views, self._buffers.inputs)
            with stage("inference"):
                outputs = infer(self.model, self._buffers, self._motion_network_idle())
        except BaseException:
            for name, value in kept.items():
                getattr(s, name)[...] = value  # in place: views of them stay valid
            self.path_future_xz_m, self.desired_future = kept_future
            raise
        with stage("decode"):
            apply = lambda p: self._apply(p, speed_now)  # noqa: E731
            handed_back, shown, bad = decode(s, outputs, self._reader, apply)
        if bad is not None:
            self._count_non_finite(bad)
        if t is not None:
            self._play_transitions(handed_back)
        if shown is not None:
            start_handback_offsets(s, t.playing, handed_back, shown)
            self.offsets_active = True
        with stage("ik"):
            self._update_display_pose(DT_S)
        record_frame(s, s.contacts, measured_speed_mps(s))
        self.frame += 1
        self.profiler.end_step(self.count, s.root_velocity_xz_mps, s.expert_weights)
        if t is not None and t.worker:
            t.submit()  # last: the worker then runs between steps
        return x

    def _play_transitions(self, handed_back: np.ndarray) -> None:
        """The transition stage (runtime/transition_player.py), when a transition is asked
        for or playing; the worker's CPU, which is in no stage of this thread's, read."""
        t = self.transitions
        if t.active.any() or t.pending:
            with self.profiler.stage("transition"):
                t.step(self.state, self.desired_future)
                finished = self.state.handback_pending & ~handed_back  # handed back now
                if finished.any():
                    self.profiler.instant("hand-back", dogs=np.flatnonzero(finished).tolist())
            if t.worker:
                self.profiler.counter("transition worker", cpu_ms=t.worker_cpu_ms)
        self.transition_worker_cpu_ms = t.worker_cpu_ms
        t.worker_cpu_ms = 0.0

    def _count_non_finite(self, rows: np.ndarray) -> None:
        """The dogs `rows` whose network output was not finite kept their last good state (the
        others moved on, runtime/pose.py decode); the event is counted and logged."""
        self.non_finite_events += int(rows.sum())
        log.warning(
            "non-finite network output for characters %s at frame %d: they keep their "
            "last good state",
            np.flatnonzero(rows).tolist(),
            self.frame,
        )

    def _apply(self, p, speed_now_mps) -> None:
        """The prediction `p` applied: the root moved, the next pose, the predicted future in
        the world, the history pushed (with `speed_now_mps` (N,), the current sample's desired
        speed)."""
        s = self.state
        if self.stand_hold:
            p = hold_standing_root(p, speed_now_mps)
        self._advance_root(p, speed_now_mps)
        self._has_prediction = True
        if self.transition_model is not None:  # only transitions read it
            s.frame_history[:, :-1] = s.frame_history[:, 1:]
            s.frame_history[:, -1] = frame_vector(
                p.root_velocity_mps, p.root_yaw_velocity_radps, s.pose
            )

    def _advance_root(self, p, speed_now_mps) -> None:
        """The root update, next pose, predicted future and history push, in the native core
        (runtime/pose.py)."""
        advance_root(self.state, p, speed_now_mps, DT_S)

    def transition_to(
        self,
        target: str | Keyframe,
        frames: int = 30,
        characters=None,
        at_xz_m=None,
        yaw_rad=None,
        action: str | None = None,
        variation: float = 0.0,
        seed: int | None = None,
        ids=None,
    ) -> TransitionStart:
        """Hands `characters` (default all) to the transition network, which takes them from
        their last frames to `target` (a keyframe name or a Keyframe) in `frames` frames after
        a lead of LEAD_FRAMES steps, then back to the motion network holding `action` (default:
        the keyframe's). `variation` (0 to 1) samples a transition, from the controller's
        generator or one seeded by `seed` (docs/EMBEDDING.md, "Transitions"); `ids` names
        the dogs by id instead. Returns where each dog will stand when handed back, and when."""
        characters = self._named_rows(characters, ids, "transition_to")
        if not isinstance(target, (str, Keyframe)):
            raise TypeError(
                "transition_to: target must be a keyframe's name "
                f"({', '.join(self.keyframes)}) or a Keyframe, got {target!r}"
            )
        args = (target, frames, characters, at_xz_m, yaw_rad, action, variation, seed)
        return start_transition(self, *args)

    def _update_display_pose(self, dt_s: float) -> None:
        """The pose shown (runtime/pose.py), the hand-back offsets decayed by `dt_s`."""
        self.offsets_active = show(
            self.state,
            self.skeleton,
            self.paws,
            self.ik,
            self.foot_lock,
            self.terrain,
            self.in_transition(),
            self.offsets_active,
            dt_s,
            self._shown_pose,
        )

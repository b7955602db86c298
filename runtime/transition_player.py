"""Plays RTN transitions inside the controller (Controller.transition_to), generating each one
step by step over the frames that play it, one RTN step a frame, so that no frame pays for a
whole transition, nor for more than one step of it (issue 15: the worst frame near the median).

A dog's transition of P frames, asked for between two steps, runs in three parts:
- the lead, LEAD_FRAMES steps: the motion network keeps the dog going as it was commanded
  when the transition was asked for (the new command is held back), while the RTN reads its
  context: the last CONTEXT_FRAMES frames up to the end of the lead, each one in the step it
  happens (the RTN's hidden state is initialised from the first of them, in the first step);
- playback, P + 1 steps: each step shows the next generated frame: the dog's rows of the
  state are taken, given that frame's root, pose, trajectory history, action and context
  frame, and put back;
- the hand-back: the motion network continues from exactly that state (the root-frame pose is
  the one it reads, the history holds the path just walked, the action weights have reached
  the target's action), with the controller's decaying display offset for what differs.

Each step runs at most STEPS_PER_FRAME (one) RTN step, one call for every dog that needs one
(rows of different transitions share it), so a frame costs about one RTN step whether one dog
or many are in a transition; asking for a transition runs none. One step a frame keeps pace
with playback and cannot get further ahead: a context step cannot run before its frame is
made, so the lead is the context (its last step generates the first frame), and each step of
playback generates the frame after the one it shows. The RTN's target blend needs the
predicted target, the last step: it is spread over the frames shown from that step on, the
last two (the paper's blend duration d, eq. 16; see blend_window), not over the whole
transition as when a transition is generated at once; the shipped RTN's predicted target's
joints were within 0.34 cm of the keyframe's (45-frame transitions to each posture from a
stand, walk, trot and canter), which is what the blend moves them by.
TransitionModel.generate with target_blend(window=blend_window(P)) generates the same
transition at once (tests/test_transitions.py checks it).

With a worker (Controller(transition_worker=True)) the same steps run on a thread of their
own, from the end of one controller step to the start of the next: the frame's own thread
then pays for no RTN step, only for copying the step's inputs and storing its outputs. The
worker is a frame behind the in-step order through the lead (a context frame is made in the
frame whose step reads it) and catches up at the lead's end with two steps, so every frame is
shown with what it would have been shown with in the step (tests/test_transition_worker.py).
Whether it pays depends on a core being free while the frame's thread works (see
docs/RESULTS.md); without one, the two threads take turns.

A frame in which every dog plays a transition frame runs no motion-network inference
(Controller._motion_network_idle): playback sets everything the output would have set.

A transition asked for with a variation carries its dog's target noise (drawn once, when it is
asked for) into every step of it, context included, as TransitionModel.generate does.
"""

from __future__ import annotations

import math
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import fields
from typing import TYPE_CHECKING

import numpy as np
from canis.runtime.features import ACTION_ONE_HOT, FPS
from canis.runtime.pose import trust_axes
from canis.runtime.root import (
    from_root_xz,
    to_root_xz,
    yaw_direction_xz,
    yaw_from_direction,
)
from canis.runtime.transition import StepCall, TransitionModel, TransitionRows, run_step_call
from canis.runtime.transition_frames import (
    CONTEXT_FRAMES,
    blend_frames,
    blend_weights,
    placement,
    placement_to_world,
    root_motion,
    split_frame,
)

if TYPE_CHECKING:
    from canis.runtime.state import DogState

# 167 ms: with one RTN step a frame, the context's CONTEXT_FRAMES - 1 steps and the first
# frame's, and one more so that the predicted target is made a frame before it is shown (a
# blend over two frames, blend_window). Each frame of the lead is one the RTN reads.
LEAD_FRAMES = CONTEXT_FRAMES
STEPS_PER_FRAME = 1  # RTN steps per frame: one, so a transition's frame costs one step more
# With a worker, a dog's generated frames may run this far past the last one shown: the frame
# the next step shows and the one after it, which is what the step would have generated
# before showing (so the worker's frames, blend and hand-back are the in-step ones).
WORKER_AHEAD_FRAMES = 2


def blend_window(transition_frames: int) -> int:
    """How many of a streamed transition's last frames the target blend is spread over: those
    shown once the last RTN step (the predicted target) has run. The lead's end plus k frames
    of playback have had (LEAD_FRAMES + k) * STEPS_PER_FRAME steps; a transition needs
    CONTEXT_FRAMES - 1 of them for the context and one for each of its P + 1 frames."""
    count = transition_frames + 1
    steps = CONTEXT_FRAMES - 1 + count
    first = max(1, math.ceil(steps / STEPS_PER_FRAME) - LEAD_FRAMES)
    return count - first + 1


class TransitionPlayer:
    """Every dog's transition, as arrays with a leading N: a dog's transition is its rows
    alone, so asking for one for some dogs leaves the others' untouched.

    `worker`: the RTN steps run on a thread of their own between the controller's steps
    (submitted at the end of one, waited for in the next), so that on a machine with a
    spare core a frame of a transition costs about what a frame without one does. Each dog's
    steps, their inputs and their order are the in-step ones: one dog's transition is the
    same bit for bit (rows of several dogs may share a call differently, which ONNX Runtime
    may round differently). The worker reads only its StepCall (copies made by this thread)
    and writes nothing: its results are stored by this thread when it is waited for (settle),
    which every method that changes a dog's transition does first."""

    def __init__(
        self, model: TransitionModel, count: int, parents: np.ndarray, worker: bool = False
    ):
        self.model = model
        self.parents = parents
        self._executor = (
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="canis-rtn") if worker else None
        )
        self._pending: Future | None = None
        self.worker_cpu_ms = 0.0  # the worker's thread CPU since its reader last zeroed it
        self.reset(count)

    @property
    def worker(self) -> bool:
        return self._executor is not None

    @property
    def pending(self) -> bool:
        """Whether the worker has steps under way (or done and not yet settled)."""
        return self._pending is not None

    def settle(self) -> None:
        """Waits for the worker's steps, if any are under way (re-raising what failed)."""
        pending, self._pending = self._pending, None
        if pending is not None:
            call, results, cpu_ms = pending.result()
            self._store(call, results)
            self.worker_cpu_ms += cpu_ms

    def close(self) -> None:
        """Stops the worker thread (a closed player runs its steps in the caller's)."""
        self.settle()
        if self._executor is not None:
            self._executor.shutdown()
            self._executor = None

    def reset(self, count: int) -> None:
        """No dog in a transition: fresh rows (the controller binds them to its state's)."""
        self.settle()
        self.rows = TransitionRows.zeros(count, self.model.noise_width)

    @property
    def leading(self) -> np.ndarray:
        """(N,) dogs in a transition's lead (the motion network still drives them)."""
        return self.active & (self.lead_left > 0)

    @property
    def playing(self) -> np.ndarray:
        """(N,) dogs the transition network drives this frame."""
        return self.active & (self.lead_left == 0)

    def start(
        self,
        rows,
        state: DogState,
        target_frame,
        target_xz_m,
        target_yaw_rad,
        frames,
        action,
        target_noise=None,
    ) -> None:
        """A transition of `frames` frames for `rows` (checked by the caller), replacing any
        they had, with each row's `target_noise` (n, W) (default: none). Nothing is generated
        yet: the context is the lead's frames, each read in the step that makes it (so asking
        costs no RTN step)."""
        self.settle()
        self.target_noise[rows] = 0.0 if target_noise is None else target_noise
        self.active[rows] = True
        self.lead_left[rows] = LEAD_FRAMES
        self.length[rows] = frames
        self.window[rows] = blend_window(frames)
        self.steps_done[rows] = -1  # the hidden state's initialisation comes first
        self.shown[rows] = 0
        self.target_frame[rows] = target_frame
        self.target_xz_m[rows] = target_xz_m
        self.target_yaw_rad[rows] = target_yaw_rad
        self.target_action[rows] = action
        self.context_known[rows] = 0

    def _newest_placements(self, state: DogState, rows) -> np.ndarray:
        """(n, 4) placements of the rows' roots now relative to their targets."""
        yaw = yaw_from_direction(state.history.directions_xz[rows, -1])
        return placement(
            state.history.positions_xz_m[rows, -1],
            yaw,
            self.target_xz_m[rows],
            self.target_yaw_rad[rows],
        )

    def step(self, state: DogState, desired_future) -> None:
        """After the motion network's step: leading dogs' newest frame joins their context,
        the generator runs, and playing dogs are set to their next frame. Dogs handed back
        are marked in state.handback_pending. With a worker, the steps submitted at the
        end of the last controller step are waited for first, and the generator runs in
        the worker after submit()."""
        self.settle()
        playing = np.flatnonzero(self.playing)  # a lead ending now plays from the next step
        leading = np.flatnonzero(self.leading)
        if leading.size:
            slot = self.context_known[leading]
            self.context_frames[leading, slot] = state.frame_history[leading, -1]
            self.context_placements[leading, slot] = self._newest_placements(state, leading)
            self.context_known[leading] += 1
            self.lead_left[leading] -= 1
            starting = leading[self.lead_left[leading] == 0]
            if starting.size:  # the first frame moves from where the lead left the dog
                self.previous_xz_m[starting] = state.root_xz_m[starting]
                self.previous_yaw_rad[starting] = state.root_yaw_rad[starting]
                last = split_frame(
                    self.context_frames[starting, -1].astype(np.float64), self.parents
                )
                self.previous_positions_m[starting] = last.positions_m
                self.start_actions[starting] = state.action_weights[starting]
        if not self.worker:
            for _ in range(STEPS_PER_FRAME):
                self._generate_step()
        if playing.size:
            self._show_next(playing, state, desired_future)

    def submit(self) -> None:
        """With a worker, hands it the next steps (those the frames shown so far allow), to
        run until the next step settles them. The controller calls it last in its step:
        the worker's few Python lines take the GIL as soon as it wakes, and the frame's
        thread would wait for it in whatever it still had to do (the display pose)."""
        if self.worker and self._pending is None and self.active.any():
            call = self._prepare(ahead=WORKER_AHEAD_FRAMES)
            if call is not None:
                self._pending = self._executor.submit(self._worker_steps, call)

    def _worker_steps(self, call: StepCall) -> tuple[StepCall, list, float]:
        """Runs `call` on the worker's thread; returns what _store writes and its thread CPU
        time (ms). Only ONNX Runtime's calls and a little indexing happen here (the inputs
        were made in the controller's thread); even so, its Python lines wait for the GIL
        while the controller's thread runs Python (docs/RESULTS.md: why back-to-back
        steps gain nothing, and steps with a gap between them do)."""
        started = time.thread_time()
        results = run_step_call(self.model, call)
        return call, results, (time.thread_time() - started) * 1e3

    def _generate_step(self) -> None:
        """One RTN step in the caller's thread (see _prepare)."""
        call = self._prepare()
        if call is not None:
            self._store(call, run_step_call(self.model, call))

    def _prepare(self, ahead: int | None = None) -> StepCall | None:
        """The next RTN step of every dog whose next step has its input: a context frame
        (known once the lead has reached it) or the frame it generated last. With `ahead`
        (the worker), a step may generate at most `ahead` frames past the last one shown,
        and a dog whose following step is then allowed too takes it in the same call, on the
        frame just made (`then`). A dog's first step initialises the hidden state from its
        first context frame before it."""
        c = CONTEXT_FRAMES
        done = self.steps_done
        total = c + self.length  # c - 1 context steps, then P + 1 frames
        # The context frame the next step reads (the first one for the initialisation, at -1).
        reads = np.minimum(np.maximum(done, 0), c - 1)
        ready = self.active & (done < total) & (reads < self.context_known)
        if ahead is not None:  # the step makes frame k + 1, k = done - (c - 1)
            ready &= done - c + 2 <= self.shown + ahead
        rows = np.flatnonzero(ready)
        if not rows.size:
            return None
        if self.h is None:
            units = self.model.hidden_units
            self.h = np.zeros((len(self.active), units), dtype=np.float32)
            self.c = np.zeros_like(self.h)
        fresh = done[rows] < 0
        j = np.maximum(done[rows], 0)
        k = j - (c - 1)  # >= 0: generates frame k + 1 (k = P: the target)
        from_context = (k <= 0)[:, None]
        context_index = np.minimum(j, c - 1)
        generated_index = np.maximum(k - 1, 0)
        then = None
        if ahead is not None:
            again = (k >= 0) & (j + 1 < total[rows]) & (k + 2 <= self.shown[rows] + ahead)
            then = np.flatnonzero(again)
        return StepCall(
            rows=rows,
            fresh=fresh,
            first_frames=self.context_frames[rows[fresh], 0],
            frames=np.where(
                from_context,
                self.context_frames[rows, context_index],
                self.raw_frames[rows, generated_index],
            ),
            placements=np.where(
                from_context,
                self.context_placements[rows, context_index],
                self.raw_placements[rows, generated_index],
            ),
            targets=self.target_frame[rows],
            target_noise=self.target_noise[rows] if self.model.noise_width else None,
            to_arrival=c + self.length[rows] - j,
            h=self.h[rows],
            c=self.c[rows],
            k=k,
            then=then,
        )

    def _store(self, call: StepCall, results: list) -> None:
        """Writes a call's results: the rows' hidden states, the frames they made, and one
        more step done for each step taken."""
        self.steps_done[call.rows[call.fresh]] = 0
        for rows, k, frame, place, h, c in results:
            self.h[rows], self.c[rows] = h, c
            made = k >= 0
            self.raw_frames[rows[made], k[made]] = frame[made]
            self.raw_placements[rows[made], k[made]] = place[made]
            self.steps_done[rows] += 1

    def _show_next(self, rows: np.ndarray, state: DogState, desired_future) -> None:
        """Sets the rows' state to their next transition frame."""
        k = self.shown[rows] + 1  # 1..P + 1
        count = self.length[rows] + 1
        generated = self.steps_done[rows] - (CONTEXT_FRAMES - 1)
        window = self.window[rows]
        blended = count - k < window  # where blend_weights > 0: the target blend's frames
        if (generated < k).any() or (blended & (generated < count)).any():
            raise RuntimeError("transition generation fell behind its playback")
        frame = self.raw_frames[rows, k - 1].astype(np.float64)
        place = self.raw_placements[rows, k - 1].astype(np.float64)
        if blended.any():  # only the window's frames need the blend (and the target exists)
            weights = blend_weights(k, count, window)
            last = np.where(blended[:, None], self.raw_frames[rows, count - 1], frame)
            last_place = np.where(blended[:, None], self.raw_placements[rows, count - 1], place)
            frame, place = blend_frames(
                frame[:, None],
                place[:, None],
                weights[:, None],
                last,
                last_place,
                self.target_frame[rows],
            )
            frame, place = frame[:, 0], place[:, 0]
        xz, yaw = placement_to_world(place, self.target_xz_m[rows], self.target_yaw_rad[rows])
        parts = split_frame(frame, self.parents)
        before_xz, before_yaw = self.previous_xz_m[rows], self.previous_yaw_rad[rows]
        # Joint velocities: the last frame's positions moved into this frame's root frame,
        # then differenced.
        moved = self.previous_positions_m[rows].copy()
        world = from_root_xz(moved[..., [0, 2]], before_xz, before_yaw)
        moved[..., [0, 2]] = to_root_xz(world, xz, yaw)
        velocities = (parts.positions_m - moved) * FPS
        # The last frame is the target keyframe itself (the blend's weight is 1 there), a pose
        # at rest, and the motion network reads it so at the hand-back: with the last step's
        # joint velocities (up to ~2 m/s where the root still slides into a lie asked straight
        # from a trot), MANN's lie diverged 10-15 frames later (75-83 cm in a frame) for half
        # the trot's phases (docs/RESULTS.md, postures asked while moving).
        velocities[k == count] = 0.0
        root_velocity = (xz - before_xz) * FPS
        local_velocity, yaw_rate = root_motion(
            np.stack([before_xz, xz], axis=1), np.stack([before_yaw, yaw], axis=1)
        )
        shown_frame = frame.astype(np.float32)  # with the root motion of the blended path
        shown_frame[:, 0:2], shown_frame[:, 2] = local_velocity[:, 1], yaw_rate[:, 1]
        target = ACTION_ONE_HOT[self.target_action[rows]]
        start = self.start_actions[rows]
        actions = start + (target - start) * (k / count)[:, None]

        # The fields a transition frame sets, written into the rows in place: taking the rows
        # and putting them back (DogState.rows/put_rows) copied every array of the state, a
        # fifth of this method's time, every frame of playback.
        state.root_xz_m[rows] = xz
        state.root_yaw_rad[rows] = yaw
        state.root_velocity_xz_mps[rows] = root_velocity
        pose = state.pose
        # The RTN leaves the tail out of its arcs (training/rtn.py ARC_JOINTS), and between
        # two tail poses it can shrink a joint's axes through zero as the motion network
        # does (runtime/pose.py trusted_rotations): from a canter to a beg, Tail1's forward
        # fell to 0.02 and came back, and the tail's tip whipped 28 cm in a frame.
        forwards = np.array(parts.forwards, dtype=np.float64, order="C")
        ups = np.array(parts.ups, dtype=np.float64, order="C")
        trust_axes(forwards, ups, pose.forwards[rows], pose.ups[rows], yaw_rate[:, 1], 1 / FPS)
        pose.positions_m[rows], pose.forwards[rows] = parts.positions_m, forwards
        pose.ups[rows], pose.velocities_mps[rows] = ups, velocities
        state.action_weights[rows] = actions
        state.commanded_actions[rows] = actions
        h = state.history
        h.positions_xz_m[rows, -1] = xz
        h.directions_xz[rows, -1] = yaw_direction_xz(yaw)
        h.velocities_xz_mps[rows, -1] = root_velocity
        # The history's speed is the asked speed, as every motion-network step pushes it
        # (Controller._apply), not the root's: a transition asked at once from a canter still
        # slides 1-1.5 m/s at its last frame, and with that read as the speed asked, MANN-8
        # reared up after the hand-back to a sit (head to 1.17 m) at half the canter's phases.
        h.speeds_mps[rows, -1] = (
            desired_future.speeds_mps[rows, 0] if desired_future is not None else 0.0
        )
        h.actions[rows, -1] = actions
        # The network's own future for these rows is from a motion they did not make: hand the
        # desired one back instead, so the next blend is the command alone.
        if desired_future is not None:
            future = state.predicted_future
            for name in ("positions_xz_m", "directions_xz", "velocities_xz_mps"):
                getattr(future, name)[rows] = getattr(desired_future, name)[rows]
        state.frame_history[rows, -1] = shown_frame  # what the next transition reads

        self.previous_xz_m[rows], self.previous_yaw_rad[rows] = xz, yaw
        self.previous_positions_m[rows] = parts.positions_m
        self.shown[rows] = k
        finished = rows[k == count]
        self.active[finished] = False
        state.handback_pending[finished] = True


# The player's per-dog arrays are its rows' (TransitionRows, in DogState.transitions): each
# is an attribute of the player that reads and writes self.rows.<name>.
for _name in (f.name for f in fields(TransitionRows)):
    setattr(
        TransitionPlayer,
        _name,
        property(
            lambda self, n=_name: getattr(self.rows, n),
            lambda self, v, n=_name: setattr(self.rows, n, v),
        ),
    )

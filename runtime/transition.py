"""The transition network at runtime: two ONNX graphs exported by `canis export-rtn`, the
hidden-state initialiser (`rtn_init.onnx`: first context frame -> h, c) and one generation
step (`rtn_step.onnx`: frame, placement, target, frames to arrival, h, c -> next frame, next
placement, h, c). `generate` loops the step over the context and the transition; `target_blend`
is the RTN paper's post-process that makes the last frame the target exactly.

A model trained with RMI's scheduled target noise (`canis train-rtn --target-noise`) has one
more step input, `target_noise` (N, W): one vector per transition, in units of the noise it was
trained with, which the graph scales by the schedule (training/rtn.py). `variation` v draws it
as v x N(0, 1) once per transition and dog; v = 0 feeds zeros, the deterministic transition.
Models without that input (the RTNs before it) still load, and refuse a variation above 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from canis.runtime.arguments import finite_number
from canis.runtime.assets import SHIPPED_TRANSITION_MODEL, asset_path
from canis.runtime.features import ACTIONS
from canis.runtime.inference import (
    ModelError,
    check_model_file,
    common_problems,
    declared_precision,
    open_session,
    run_rows,
)
from canis.runtime.transition_frames import (
    CONTEXT_FRAMES,
    FRAME_SIZE,
    JOINT_COUNT,
    MAX_TRANSITION_FRAMES,
    MIN_TRANSITION_FRAMES,
    PLACEMENT_SIZE,
    transition_layout_hash,
)

STEP_INPUTS = ["frame", "placement", "target", "frames_to_arrival", "h", "c"]
NOISE_INPUT = "target_noise"  # the step's last input, in models trained with target noise
STEP_OUTPUTS = ["next_frame", "next_placement", "next_h", "next_c"]
INIT_INPUTS = ["first_frame"]
INIT_OUTPUTS = ["h", "c"]


# `variation` scales the noise the network was trained with: 1 is that level, and beyond it
# the network is asked what it never saw (1e39 overflowed float32 into a NaN dog for good).
MAX_VARIATION = 1.0


def shipped_transition_model_path() -> Path:
    return asset_path(SHIPPED_TRANSITION_MODEL, must_exist=False)


def check_transition_metadata(path: Path, session, kind: str, inputs, outputs) -> dict:
    meta = session.get_modelmeta().custom_metadata_map
    if meta.get("canis.kind") != kind:
        raise ModelError(
            f"{path}: is a {meta.get('canis.kind', 'non-canis')!r} model, not {kind!r} "
            "(export transition models with `canis export-rtn`)"
        )
    problems = []
    if meta.get("canis.transition_layout_hash") != transition_layout_hash():
        problems.append(
            f"transition layout {meta.get('canis.transition_layout_hash')} differs from the "
            f"runtime's {transition_layout_hash()}"
        )
    problems += common_problems(
        path,
        meta,
        [i.name for i in session.get_inputs()],
        [o.name for o in session.get_outputs()],
        inputs,
        outputs,
    )
    if problems:
        raise ModelError(f"{path}: does not match this runtime: " + "; ".join(problems))
    return meta


class TransitionModel:
    """The exported RTN: `rtn_step.onnx` and, beside it, `rtn_init.onnx`."""

    def __init__(self, step_path: str | Path | None = None, device: str = "cpu", threads=1):
        self.step_path = Path(step_path) if step_path else shipped_transition_model_path()
        self.init_path = self.step_path.with_name(self.step_path.name.replace("_step", "_init"))
        for path in (self.step_path, self.init_path):
            check_model_file(path, "transition model")
        self.step_session, self.device = open_session(self.step_path, device, threads)
        self.init_session, _ = open_session(self.init_path, device, threads)
        inputs = self.step_session.get_inputs()
        noisy = inputs and inputs[-1].name == NOISE_INPUT
        # W, the noise's width (0: a model trained without target noise).
        self.noise_width = int(inputs[-1].shape[1]) if noisy else 0
        self.metadata = check_transition_metadata(
            self.step_path,
            self.step_session,
            "rtn_step",
            STEP_INPUTS + [NOISE_INPUT] if noisy else STEP_INPUTS,
            STEP_OUTPUTS,
        )
        check_transition_metadata(
            self.init_path, self.init_session, "rtn_init", INIT_INPUTS, INIT_OUTPUTS
        )
        self.precision = declared_precision(self.metadata)
        # The LSTM's width, from the step's hidden-state input (N, H).
        self.hidden_units = int(self.step_session.get_inputs()[STEP_INPUTS.index("h")].shape[1])

    def init(self, first_frames: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The hidden state (h, c), (N, H) each, from the first context frames (N, D)."""
        return run_rows(self.init_session, INIT_OUTPUTS, {"first_frame": _f32(first_frames)})

    def target_noise(self, count: int, variation, rng=None, caller="variation") -> np.ndarray:
        """(count, W) target noise for `count` transitions: variation x N(0, 1) from `rng`
        (a numpy Generator; default a fresh one), zeros for variation 0. `variation` must be
        from 0 to MAX_VARIATION (1: the level the model was trained with), and above 0 only
        for a model trained with target noise."""
        variation = finite_number(variation, caller, low=0.0, high=MAX_VARIATION)
        if variation > 0 and not self.noise_width:
            raise ValueError(
                f"{caller} {variation:g} needs a transition model trained with target noise; "
                f"{self.step_path} has no {NOISE_INPUT!r} input (train one with "
                "`canis train-rtn --target-noise`)"
            )
        noise = np.zeros((count, self.noise_width), dtype=np.float32)
        if variation > 0:
            rng = rng if rng is not None else np.random.default_rng()
            noise[:] = variation * rng.standard_normal((count, self.noise_width))
        return noise

    def step(
        self, frames, placements, targets, frames_to_arrival, h, c, target_noise=None
    ) -> list[np.ndarray]:
        """One generation step for every row: (next frame, next placement, h, c). Each row
        carries its own frame (N, D), placement (N, 4), target (N, D), frames to arrival
        (N,) and hidden state, so rows of different transitions share one call (a single
        frames-to-arrival or target is used for every row). `target_noise` (N, W), for a
        model trained with it (default zeros), is each row's transition's noise."""
        feeds = self.step_feeds(frames, placements, targets, frames_to_arrival, h, c, target_noise)
        return run_rows(self.step_session, STEP_OUTPUTS, feeds)

    def step_feeds(
        self, frames, placements, targets, frames_to_arrival, h, c, target_noise=None
    ) -> dict[str, np.ndarray]:
        """The step graph's inputs for `step`'s arguments (canis bench times the graph on
        them)."""
        n = len(frames)
        tta = np.broadcast_to(
            np.asarray(frames_to_arrival, dtype=np.float32).reshape(-1, 1), (n, 1)
        )
        targets = np.broadcast_to(targets, (n, FRAME_SIZE))
        values = (frames, placements, targets, tta, h, c)
        feeds = {name: _f32(v) for name, v in zip(STEP_INPUTS, values, strict=True)}
        if self.noise_width:
            if target_noise is None:
                target_noise = np.zeros((n, self.noise_width), dtype=np.float32)
            feeds[NOISE_INPUT] = _f32(target_noise)
        elif target_noise is not None and np.any(target_noise):
            raise ValueError(f"{self.step_path}: has no {NOISE_INPUT!r} input (no target noise)")
        return feeds

    def generate(
        self,
        context_frames: np.ndarray,
        context_placements: np.ndarray,
        target_frame: np.ndarray,
        transition_frames: int,
        variation: float = 0.0,
        rng: np.random.Generator | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Frames (N, P + 1, D) and placements (N, P + 1, 4) of a P-frame transition and the
        predicted target, after context frames (N, C, D) / placements (N, C, 4) placed
        relative to the target (N, D), generated at once. Not yet blended: see target_blend.
        `variation` > 0 samples each row's transition with its own target noise drawn from
        `rng` (default: a fresh generator); 0 is the deterministic transition.
        The controller streams the same steps over the frames that play them
        (runtime/transition_player.py); this is the reference it is tested against, and what
        the offline tools use."""
        n = len(target_frame)
        check_transition_request(
            context_frames, context_placements, target_frame, transition_frames
        )
        noise = self.target_noise(n, variation, rng or np.random.default_rng())
        h, c = self.init(context_frames[:, 0])
        arrival = CONTEXT_FRAMES + transition_frames  # the target's index after the context
        for i in range(CONTEXT_FRAMES - 1):
            _, _, h, c = self.step(
                context_frames[:, i],
                context_placements[:, i],
                target_frame,
                arrival - i,
                h,
                c,
                noise,
            )
        frame, placement = context_frames[:, -1], context_placements[:, -1]
        frames = np.empty((n, transition_frames + 1, FRAME_SIZE), dtype=np.float32)
        placements = np.empty((n, transition_frames + 1, PLACEMENT_SIZE), dtype=np.float32)
        for k in range(transition_frames + 1):
            index = CONTEXT_FRAMES - 1 + k
            frame, placement, h, c = self.step(
                frame, placement, target_frame, arrival - index, h, c, noise
            )
            frames[:, k], placements[:, k] = frame, placement
        return frames, placements


def _f32(a) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float32)


def check_transition_request(context_frames, context_placements, target_frame, frames) -> None:
    n = len(target_frame)
    if not MIN_TRANSITION_FRAMES <= frames <= MAX_TRANSITION_FRAMES:
        raise ValueError(
            f"a transition of {frames} frames: the transition network was trained on "
            f"{MIN_TRANSITION_FRAMES} to {MAX_TRANSITION_FRAMES}"
        )
    for name, array, shape in (
        ("context frames", context_frames, (n, CONTEXT_FRAMES, FRAME_SIZE)),
        ("context placements", context_placements, (n, CONTEXT_FRAMES, PLACEMENT_SIZE)),
        ("target frame", target_frame, (n, FRAME_SIZE)),
    ):
        if np.shape(array) != shape:
            raise ValueError(f"{name} have shape {np.shape(array)}, not {shape}")
        if not np.all(np.isfinite(array)):
            raise ValueError(f"{name} hold non-finite values")


@dataclass
class StepCall:
    """One call of the RTN for the rows that step together: copies of their inputs, so
    running it (run_step_call) reads nothing of the player's."""

    rows: np.ndarray  # (n,) the dogs
    fresh: np.ndarray  # (n,) bool: the hidden state is initialised from first_frames first
    first_frames: np.ndarray  # (fresh rows, D)
    frames: np.ndarray  # (n, D) what each step reads
    placements: np.ndarray  # (n, 4)
    targets: np.ndarray  # (n, D)
    target_noise: np.ndarray | None  # (n, W) each dog's transition's, None: a model without
    to_arrival: np.ndarray  # (n,) frames
    h: np.ndarray  # (n, H)
    c: np.ndarray
    k: np.ndarray  # (n,) the step makes frame k + 1 of the transition (k < 0: context step)
    then: np.ndarray | None = None  # indices into rows that step again on the frame made


def run_step_call(model: TransitionModel, call: StepCall) -> list[tuple]:
    """(rows, k, frame, placement, h, c) for the call's step and its `then` steps."""
    h, c = call.h, call.c
    if call.fresh.any():
        h, c = h.copy(), c.copy()
        h[call.fresh], c[call.fresh] = model.init(call.first_frames)
    noise = call.target_noise
    frame, place, h, c = model.step(
        call.frames, call.placements, call.targets, call.to_arrival, h, c, noise
    )
    results = [(call.rows, call.k, frame, place, h, c)]
    if call.then is not None and call.then.size:
        t = call.then
        frame, place, h, c = model.step(
            frame[t],
            place[t],
            call.targets[t],
            call.to_arrival[t] - 1,
            h[t],
            c[t],
            None if noise is None else noise[t],
        )
        results.append((call.rows[t], call.k[t] + 1, frame, place, h, c))
    return results


@dataclass
class TransitionRows:
    """Every dog's transition (runtime/transition_player.py) as arrays with a leading N, held
    in the dogs' state (DogState.transitions) and read and written by the player."""

    active: np.ndarray  # (N,) bool: asked for and not yet handed back
    lead_left: np.ndarray  # (N,) lead steps still to come
    length: np.ndarray  # (N,) P: the transition's frames
    window: np.ndarray  # (N,) target blend window (frames)
    # (N,) RTN steps run (context, then frames), -1 before the hidden state's initialisation
    steps_done: np.ndarray
    shown: np.ndarray  # (N,) frames shown so far
    target_frame: np.ndarray  # (N, FRAME_SIZE) float32
    target_xz_m: np.ndarray  # (N, 2)
    target_yaw_rad: np.ndarray  # (N,)
    target_action: np.ndarray  # (N,)
    # (N, W) each dog's transition's target noise (TransitionModel), zeros without variation
    target_noise: np.ndarray
    start_actions: np.ndarray  # (N, A)
    context_frames: np.ndarray  # (N, CONTEXT_FRAMES, FRAME_SIZE) float32
    context_placements: np.ndarray  # (N, CONTEXT_FRAMES, PLACEMENT_SIZE) float32
    context_known: np.ndarray  # (N,)
    # Generated, not yet blended: frame k + 1 of the transition at k, the target at P.
    raw_frames: np.ndarray  # (N, MAX_TRANSITION_FRAMES + 1, FRAME_SIZE) float32
    raw_placements: np.ndarray  # (N, MAX_TRANSITION_FRAMES + 1, PLACEMENT_SIZE) float32
    # The frame shown last, which the next one's velocities are measured from.
    previous_xz_m: np.ndarray  # (N, 2)
    previous_yaw_rad: np.ndarray  # (N,)
    previous_positions_m: np.ndarray  # (N, J, 3)
    h: np.ndarray | None = None  # (N, H) the RTN's state, sized by the first initialisation
    c: np.ndarray | None = None

    @classmethod
    def zeros(cls, n: int, noise_width: int) -> TransitionRows:
        c, most = CONTEXT_FRAMES, MAX_TRANSITION_FRAMES + 1
        return cls(
            active=np.zeros(n, dtype=bool),
            lead_left=np.zeros(n, dtype=int),
            length=np.zeros(n, dtype=int),
            window=np.ones(n, dtype=int),
            steps_done=np.zeros(n, dtype=int),
            shown=np.zeros(n, dtype=int),
            target_frame=np.zeros((n, FRAME_SIZE), dtype=np.float32),
            target_xz_m=np.zeros((n, 2)),
            target_yaw_rad=np.zeros(n),
            target_action=np.zeros(n, dtype=int),
            target_noise=np.zeros((n, noise_width), dtype=np.float32),
            start_actions=np.zeros((n, len(ACTIONS))),
            context_frames=np.zeros((n, c, FRAME_SIZE), dtype=np.float32),
            context_placements=np.zeros((n, c, PLACEMENT_SIZE), dtype=np.float32),
            context_known=np.zeros(n, dtype=int),
            raw_frames=np.zeros((n, most, FRAME_SIZE), dtype=np.float32),
            raw_placements=np.zeros((n, most, PLACEMENT_SIZE), dtype=np.float32),
            previous_xz_m=np.zeros((n, 2)),
            previous_yaw_rad=np.zeros(n),
            previous_positions_m=np.zeros((n, JOINT_COUNT, 3)),
        )

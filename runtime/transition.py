"""The transition network's (RTN's) frame contract: what one frame of motion is to it, and
where the character stands relative to the transition's target.

A frame vector (N, FRAME_SIZE) holds, as the RTN paper's x_t does, the root's velocity and
the pose relative to the root:
- root_velocity: (x, z) m/s of the move from the previous frame, in the previous root's
  frame, and the yaw rate in rad/s (exactly the MANN output's root update);
- positions: every joint's position in the root frame (m);
- forwards, ups: the root-frame forward/up axes of the joints that have children (the end
  sites' rotations move nothing, so the network does not carry them).

A placement (N, 4) is the root relative to the target's root: (x, z) in metres in the
target's root frame, and the sine and cosine of the yaw from the target's root. The network
integrates it from the predicted root velocities (inside the exported graph, so training and
runtime share that code) and measures its offsets to the target from it.

The training windows (training/transition_data.py) and the runtime's character history
(runtime/controller.py) both build frames with `frame_vector`.

The transition network at runtime: two ONNX graphs exported by `canis export-rtn`, the
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

import functools
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from canis.runtime.arguments import finite_number
from canis.runtime.assets import SHIPPED_TRANSITION_MODEL, asset_path
from canis.runtime.features import FPS, LocalPose
from canis.runtime.inference import (
    ModelError,
    check_model_file,
    common_problems,
    declared_precision,
    open_session,
)
from canis.runtime.root import rotate_xz, to_root_xz, wrap_angle_rad
from canis.runtime.skeleton import DOG_JOINT_NAMES, Skeleton

CONTEXT_FRAMES = 10  # past frames the RTN reads before it generates
MIN_TRANSITION_FRAMES = 5
MAX_TRANSITION_FRAMES = 60
# The time-to-arrival embedding stops changing this many frames before the target (RMI:
# T_max + T_past - 5), so every context frame of a long transition looks equally "far".
TTA_CLAMP_FRAMES = MAX_TRANSITION_FRAMES + CONTEXT_FRAMES - 5
TTA_BASIS = 10000.0  # the embedding itself is computed in the exported graph (training/rtn.py)
JOINT_COUNT = len(DOG_JOINT_NAMES)


def rotated_joints(parents: np.ndarray) -> np.ndarray:
    """Indices of the joints that have children: the only rotations that move anything."""
    return np.array(sorted({int(p) for p in parents if p >= 0}))


def _dog_parents() -> np.ndarray:
    from canis.runtime.skeleton import shipped_dog_skeleton_path

    return Skeleton.from_json(shipped_dog_skeleton_path()).parents


ROTATED_JOINTS = rotated_joints(_dog_parents())
ROTATED_COUNT = len(ROTATED_JOINTS)
ROOT_VELOCITY = slice(0, 3)
POSITIONS = slice(3, 3 + 3 * JOINT_COUNT)
FORWARDS = slice(POSITIONS.stop, POSITIONS.stop + 3 * ROTATED_COUNT)
UPS = slice(FORWARDS.stop, FORWARDS.stop + 3 * ROTATED_COUNT)
FRAME_SIZE = UPS.stop
PLACEMENT_SIZE = 4


def contract_description() -> dict:
    return {
        "frame": {
            "root_velocity": [ROOT_VELOCITY.start, ROOT_VELOCITY.stop],
            "positions": [POSITIONS.start, POSITIONS.stop],
            "forwards": [FORWARDS.start, FORWARDS.stop],
            "ups": [UPS.start, UPS.stop],
        },
        "joints": list(DOG_JOINT_NAMES),
        "rotated_joints": ROTATED_JOINTS.tolist(),
        "placement": ["x_m", "z_m", "sin_yaw", "cos_yaw"],
        "context_frames": CONTEXT_FRAMES,
        "transition_frames": [MIN_TRANSITION_FRAMES, MAX_TRANSITION_FRAMES],
        "tta_clamp_frames": TTA_CLAMP_FRAMES,
        "fps": FPS,
    }


def transition_layout_hash() -> str:
    text = json.dumps(contract_description(), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def frame_vector(
    root_velocity_xz_mps: np.ndarray, root_yaw_rate_radps: np.ndarray, pose: LocalPose
) -> np.ndarray:
    """(N, FRAME_SIZE) float32 frames from the root's motion and a root-frame pose (N, J, 3)."""
    n = len(root_yaw_rate_radps)
    frames = np.empty((n, FRAME_SIZE), dtype=np.float32)
    frames[:, 0:2] = root_velocity_xz_mps
    frames[:, 2] = root_yaw_rate_radps
    frames[:, POSITIONS] = pose.positions_m.reshape(n, -1)
    frames[:, FORWARDS] = pose.forwards[:, ROTATED_JOINTS].reshape(n, -1)
    frames[:, UPS] = pose.ups[:, ROTATED_JOINTS].reshape(n, -1)
    return frames


@dataclass
class FrameParts:
    root_velocity_xz_mps: np.ndarray  # (N, 2)
    root_yaw_rate_radps: np.ndarray  # (N,)
    positions_m: np.ndarray  # (N, J, 3) root frame
    forwards: np.ndarray  # (N, J, 3): end sites take their parent's axes, as in FK
    ups: np.ndarray


@functools.lru_cache(maxsize=8)
def axis_sources(parents: tuple[int, ...]) -> np.ndarray:
    """(J,) for each joint, the index among the rotated joints whose axes it shows: its own,
    or for a joint without children (not carried) its nearest rotated ancestor's, as in FK."""
    rotated = rotated_joints(np.array(parents))
    slot = {int(joint): k for k, joint in enumerate(rotated)}
    sources = []
    for joint in range(len(parents)):
        while joint not in slot:
            joint = parents[joint]
        sources.append(slot[joint])
    return np.array(sources)


def split_frame(frames: np.ndarray, parents: np.ndarray) -> FrameParts:
    n = len(frames)
    # A gather rather than a loop over joints: the controller splits a frame every step of
    # a transition.
    sources = axis_sources(tuple(int(p) for p in parents))
    forwards = frames[:, FORWARDS].reshape(n, -1, 3)[:, sources]
    ups = frames[:, UPS].reshape(n, -1, 3)[:, sources]
    return FrameParts(
        frames[:, 0:2],
        frames[:, 2],
        frames[:, POSITIONS].reshape(n, JOINT_COUNT, 3),
        forwards,
        ups,
    )


def root_motion(root_xz_m: np.ndarray, root_yaw_rad: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-frame root velocities (..., F, 2) in the previous root's frame and yaw rates
    (..., F) of root paths (..., F, 2) / (..., F); the first frame repeats the second's."""
    step = root_xz_m[..., 1:, :] - root_xz_m[..., :-1, :]
    heading = root_yaw_rad[..., :-1]
    velocity = rotate_xz(step.reshape(-1, 1, 2), -heading.reshape(-1)).reshape(step.shape) * FPS
    yaw_rate = wrap_angle_rad(root_yaw_rad[..., 1:] - heading) * FPS
    return (
        np.concatenate([velocity[..., :1, :], velocity], axis=-2),
        np.concatenate([yaw_rate[..., :1], yaw_rate], axis=-1),
    )


def placement(root_xz_m, root_yaw_rad, target_xz_m, target_yaw_rad) -> np.ndarray:
    """(N, 4) placements of roots (N, 2) / (N,) relative to target roots (N, 2) / (N,)."""
    xz = to_root_xz(root_xz_m[:, None], target_xz_m, target_yaw_rad)[:, 0]
    yaw = wrap_angle_rad(root_yaw_rad - target_yaw_rad)
    return np.concatenate([xz, np.sin(yaw)[:, None], np.cos(yaw)[:, None]], axis=1)


def placement_to_world(placements, target_xz_m, target_yaw_rad):
    """World root (x, z) (N, 2) and yaw (N,) of placements (N, 4) relative to targets."""
    xz = rotate_xz(placements[:, None, :2], target_yaw_rad)[:, 0] + target_xz_m
    yaw = wrap_angle_rad(target_yaw_rad + np.arctan2(placements[:, 2], placements[:, 3]))
    return xz, yaw


STEP_INPUTS = ["frame", "placement", "target", "frames_to_arrival", "h", "c"]
NOISE_INPUT = "target_noise"  # the step's last input, in models trained with target noise
STEP_OUTPUTS = ["next_frame", "next_placement", "next_h", "next_c"]
INIT_INPUTS = ["first_frame"]
INIT_OUTPUTS = ["h", "c"]
ARRIVED = np.array([0.0, 0.0, 0.0, 1.0])  # the target's own placement


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
        return self.init_session.run(INIT_OUTPUTS, {"first_frame": _f32(first_frames)})

    def target_noise(self, count: int, variation, rng=None, caller="variation") -> np.ndarray:
        """(count, W) target noise for `count` transitions: variation x N(0, 1) from `rng`
        (a numpy Generator; default a fresh one), zeros for variation 0. `variation` must
        be a finite number >= 0, and above 0 only for a model trained with target noise."""
        variation = finite_number(variation, caller, low=0.0)
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
        return self.step_session.run(STEP_OUTPUTS, feeds)

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


def blend_weights(indices, count: int, window) -> np.ndarray:
    """The RTN paper's target-blend weight (its eq. 16) of transition frames `indices`
    (1..count, the last being the target): 1 - (count - t) / window, from 0 before the
    blend window's `window` frames to 1 at the target."""
    return np.clip(1.0 - (count - np.asarray(indices)) / np.asarray(window), 0.0, 1.0)


def blend_frames(frames, placements, weights, predicted_target, predicted_placement, target):
    """frames (N, K, D) / placements (N, K, 4) with weights (N, K) of the error between the
    true target (N, D) and the predicted one (N, D), placement (N, 4), added: the blend of
    any frames of a transition once its last frame is known."""
    w = np.asarray(weights)[..., None]
    frame_error = np.asarray(target)[:, None, :] - np.asarray(predicted_target)[:, None, :]
    placement_error = ARRIVED[None, None, :] - np.asarray(predicted_placement)[:, None, :]
    blended = placements + w * placement_error
    yaw = np.arctan2(blended[..., 2], blended[..., 3])  # sine/cosine back on the unit circle
    blended[..., 2], blended[..., 3] = np.sin(yaw), np.cos(yaw)
    return frames + w * frame_error, blended


def target_blend(frames, placements, target_frame, window=None) -> tuple[np.ndarray, np.ndarray]:
    """The RTN's target blend: the error between the true target and the predicted one is
    added to the last `window` generated frames (default: all of them) with a weight rising
    linearly to 1 at the target, so the last frame is the target and the correction is
    spread over the window."""
    count = frames.shape[1]
    weights = blend_weights(np.arange(1, count + 1), count, window or count)[None, :]
    return blend_frames(frames, placements, weights, frames[:, -1], placements[:, -1], target_frame)

"""The Recurrent Transition Network (Harvey & Pal 2018) with the time-to-arrival embedding of
Robust Motion In-betweening (Harvey et al. 2020), in PyTorch.

Residual (RESIDUALS): the paper's decoder adds to the current frame ("previous"). With
"interpolation" (the default) each step first moves the current frame 1/tta of the way to the
target, the root 1/tta of the way to the target's place and yaw, and the decoder adds its
correction to that: with a zero correction the rollout is exactly the linear interpolation from
the last context frame (the INT baseline), so the network learns what interpolation misses
(the idea of Oreshkin et al.'s Delta-interpolator, 2023). The frame's root velocity is then the
motion between the two placements. "rotations" is "interpolation" with each joint's axes moved
along the rotation they stand for (training/torch_runtime.py) instead of channel by
channel, which passes through zero when the rotations are far apart. Each is measured in
docs/RESULTS.md.

One `step` reads a frame (raw units, runtime/transition.py), where the root stands
relative to the target, the target frame, the frames left to the target, and the LSTM state;
it returns the next frame, the next placement and the new state. Standardisation, the offsets
to the target, the time-to-arrival embedding and the root integration are all inside `step`,
so the exported ONNX graph is the whole per-frame computation and the runtime only loops it.

Scheduled target noise (RMI section 3.4): a vector z, drawn once per transition, is added to
the concatenated target and offset codes, scaled by `target_noise_scale` of the frames left:
full from NOISE_FULL_FRAMES before the target, fading linearly to zero at NOISE_FREE_FRAMES,
none after, so the network sees a distorted target far from it and the true one near it.
Trained with it, the same request gives different transitions for different z that still land
on the target. `step` takes z in units of the trained standard deviation (`noise_sigma`), so
the runtime's `variation` 1 is the training noise and 0 (zeros) the deterministic transition;
the schedule and the sigma live in the step (and so in the exported graph) alone.
"""

from __future__ import annotations

import math

import torch
from canis.runtime.features import FPS
from canis.runtime.skeleton import DOG_JOINT_NAMES
from canis.runtime.transition_frames import (
    CONTEXT_FRAMES,
    FORWARDS,
    FRAME_SIZE,
    JOINT_COUNT,
    PLACEMENT_SIZE,
    POSITIONS,
    ROTATED_COUNT,
    ROTATED_JOINTS,
    TTA_BASIS,
    TTA_CLAMP_FRAMES,
    UPS,
)
from canis.training.torch_runtime import chain_positions, interpolate_axes, joint_axes
from torch import nn

FRAME_ENCODER = (512, 512)
FUTURE_ENCODER = (128, 128)  # the target encoder and the offset encoder each
LSTM_UNITS = 512
DECODER = (256, 128)
INITIALISER_HIDDEN = 256
LEAKY_SLOPE = 0.01


def layer_widths(units: int = LSTM_UNITS) -> dict[str, tuple[int, ...]]:
    """The hidden layers' widths of an RTN whose LSTM has `units`: each keeps its ratio to the
    LSTM's, the paper's at LSTM_UNITS."""
    named = {
        "frame encoder": FRAME_ENCODER,
        "target and offset encoders": FUTURE_ENCODER,
        "decoder": DECODER,
        "initialiser": (INITIALISER_HIDDEN,),
    }
    return {name: tuple(w * units // LSTM_UNITS for w in widths) for name, widths in named.items()}


OFFSET_SIZE = PLACEMENT_SIZE + FRAME_SIZE - 3  # placement + every pose part of the frame
RESIDUALS = ("interpolation", "rotations", "previous")
# The joints whose axes the rotations residual may move along their arc: all but the tail's.
# The capture holds Tail1's forward level (its vertical part is 0, standard deviation 3e-3)
# and the tail whips past 150 degrees between a window's last frame and its target in 2% of
# windows (the limbs in 0.2% or fewer): an arc there leaves the level by up to 8e-3, forty
# deviations in the standardised loss. With the tail's arcs the shipped weights' loss on
# training windows was 7-18x the interpolation residual's (1.5-1.9x with the arc only past
# 150 degrees); without them it is the same.
ARC_JOINTS = torch.tensor(
    [0.0 if DOG_JOINT_NAMES[j].startswith("Tail") else 1.0 for j in ROTATED_JOINTS]
)
# Each residual's layers, named by a residual that has them: a network trained with one can
# start another's fine-tuning where they name the same (the corrections then adapt to the base).
SAME_LAYERS = {
    "interpolation": "interpolation",
    "rotations": "interpolation",
    "previous": "previous",
}
# The interpolation residual's root correction, per unit of decoder output.
ROOT_CORRECTION_M = 0.05
YAW_CORRECTION_RAD = 0.05
# RMI's target-noise schedule (its eq. 4): lambda = 1 at tta >= 30, (tta - 5) / 25 between,
# 0 under 5 frames to arrival.
NOISE_FREE_FRAMES = 5.0
NOISE_FULL_FRAMES = 30.0


def mlp(sizes: list[int], last_activation: bool) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:], strict=False)):
        layers.append(nn.Linear(a, b))
        if last_activation or i < len(sizes) - 2:
            layers.append(nn.LeakyReLU(LEAKY_SLOPE))
    return nn.Sequential(*layers)


def tta_embedding(frames_to_arrival: torch.Tensor, width: int) -> torch.Tensor:
    """RMI's time-to-arrival embedding (N, width) of (N, 1) frame counts: sin on even and cos
    on odd dimensions of tta / basis^(2i/width), with tta clamped at TTA_CLAMP_FRAMES."""
    tta = torch.clamp(frames_to_arrival, max=float(TTA_CLAMP_FRAMES))
    exponents = torch.arange(0, width, 2, dtype=tta.dtype, device=tta.device) / width
    angles = tta / torch.pow(TTA_BASIS, exponents)
    return torch.stack([torch.sin(angles), torch.cos(angles)], dim=-1).reshape(-1, width)


def target_noise_scale(frames_to_arrival: torch.Tensor) -> torch.Tensor:
    """RMI's lambda_target (N, 1) of (N, 1) frames to arrival: 1 from NOISE_FULL_FRAMES on,
    falling linearly to 0 at NOISE_FREE_FRAMES, 0 closer to the target."""
    fade = (frames_to_arrival - NOISE_FREE_FRAMES) / (NOISE_FULL_FRAMES - NOISE_FREE_FRAMES)
    return torch.clamp(fade, min=0.0, max=1.0)


def rotate_xz(x: torch.Tensor, z: torch.Tensor, sin: torch.Tensor, cos: torch.Tensor):
    """runtime.root.rotate_xz for torch tensors: turns (x, z) by the yaw whose sine/cosine
    are given (broadcasting)."""
    return cos * x + sin * z, cos * z - sin * x


def to_target_frame(frames: torch.Tensor, placements: torch.Tensor):
    """Joint positions (N, J, 3), forwards and ups (N, R, 3) of frames seen from the target's
    root, given the placements (N, 4) of their roots."""
    n = frames.shape[0]
    sin, cos = placements[:, 2:3], placements[:, 3:4]

    def turn(vectors, translate: bool):
        x, z = rotate_xz(vectors[..., 0], vectors[..., 2], sin, cos)
        if translate:
            x, z = x + placements[:, 0:1], z + placements[:, 1:2]
        return torch.stack([x, vectors[..., 1], z], dim=-1)

    positions = turn(frames[:, POSITIONS].reshape(n, JOINT_COUNT, 3), True)
    forwards = turn(frames[:, FORWARDS].reshape(n, ROTATED_COUNT, 3), False)
    ups = turn(frames[:, UPS].reshape(n, ROTATED_COUNT, 3), False)
    return positions, forwards, ups


def offsets_to_target(frames, placements, targets) -> torch.Tensor:
    """(N, OFFSET_SIZE): the target's pose minus the current pose, both in the target's root
    frame (the paper's global offsets), after the current root's placement."""
    n = frames.shape[0]
    current = to_target_frame(frames, placements)
    wanted = (
        targets[:, POSITIONS].reshape(n, JOINT_COUNT, 3),
        targets[:, FORWARDS].reshape(n, ROTATED_COUNT, 3),
        targets[:, UPS].reshape(n, ROTATED_COUNT, 3),
    )
    parts = [placements] + [(w - c).reshape(n, -1) for w, c in zip(wanted, current, strict=True)]
    return torch.cat(parts, dim=1)


def advance_placement(placements: torch.Tensor, frames: torch.Tensor) -> torch.Tensor:
    """The placement after moving by the root velocity of `frames` (in the current root's
    frame) for one frame time; sine and cosine are renormalised so they never drift."""
    dt = 1.0 / FPS
    sin, cos = placements[:, 2:3], placements[:, 3:4]
    dx, dz = rotate_xz(frames[:, 0:1] * dt, frames[:, 1:2] * dt, sin, cos)
    turn = frames[:, 2:3] * dt
    new_sin = sin * torch.cos(turn) + cos * torch.sin(turn)
    new_cos = cos * torch.cos(turn) - sin * torch.sin(turn)
    norm = torch.sqrt(new_sin * new_sin + new_cos * new_cos)
    return torch.cat(
        [placements[:, 0:1] + dx, placements[:, 1:2] + dz, new_sin / norm, new_cos / norm], 1
    )


def interpolate_placement(placements, share, xz_correction_m, yaw_correction_rad):
    """The placement 'share' of the way to the target's (the origin, yaw 0), then corrected:
    (x, z) moved by xz_correction_m, the yaw turned by yaw_correction_rad."""
    xz = placements[:, :2] * (1.0 - share) + xz_correction_m
    sin, cos = placements[:, 2:3] * (1.0 - share), placements[:, 3:4] * (1.0 - share) + share
    norm = torch.sqrt(sin * sin + cos * cos).clamp(min=1e-6)  # nlerp toward yaw 0
    sin, cos = sin / norm, cos / norm
    turn_sin, turn_cos = torch.sin(yaw_correction_rad), torch.cos(yaw_correction_rad)
    return torch.cat([xz, sin * turn_cos + cos * turn_sin, cos * turn_cos - sin * turn_sin], 1)


def root_motion_between(placements, next_placements):
    """The frame's root_velocity (N, 3) of moving between two placements: the step in the
    first root's frame per frame time, and the yaw rate (asin of the turn's sine: a frame
    never turns 90 degrees)."""
    sin, cos = placements[:, 2:3], placements[:, 3:4]
    step = next_placements[:, :2] - placements[:, :2]
    x, z = rotate_xz(step[:, :1], step[:, 1:], -sin, cos)
    turn_sin = next_placements[:, 2:3] * cos - next_placements[:, 3:4] * sin
    return torch.cat([x, z, torch.asin(turn_sin.clamp(-1.0, 1.0))], dim=1) * FPS


def fk_positions(frames: torch.Tensor, parents, offsets_m: torch.Tensor) -> torch.Tensor:
    """Root-frame joint positions (N, J, 3) that forward kinematics makes of the frames' joint
    axes with the skeleton's bone offsets from the frames' hips position: what the runtime
    shows (runtime.kinematics.rotations_from_directions + FK), in torch for the training loss.
    Each axis pair becomes a rotation by Gram-Schmidt as in runtime.rotations.quat_from_forward_up
    (forward wins); a child sits at its parent plus the parent's rotation applied to its offset."""
    n = frames.shape[0]
    forward = frames[:, FORWARDS].reshape(n, ROTATED_COUNT, 3)
    up = frames[:, UPS].reshape(n, ROTATED_COUNT, 3)
    slot = {int(j): i for i, j in enumerate(ROTATED_JOINTS)}
    axes = joint_axes(forward, up)  # (N, R, 3, 3), columns x, y, z
    return chain_positions(frames[:, POSITIONS][:, 0:3], axes, parents, offsets_m, slot)


class LstmCell(nn.Module):
    """One LSTM step, written out (the same gates as torch.nn.LSTMCell) so the exported step
    is plain MatMul/Sigmoid/Tanh with the state as ordinary inputs and outputs."""

    def __init__(self, inputs: int, units: int):
        super().__init__()
        self.input_gates = nn.Linear(inputs, 4 * units)
        self.hidden_gates = nn.Linear(units, 4 * units, bias=False)
        bound = 1.0 / math.sqrt(units)
        for weight in (self.input_gates.weight, self.hidden_gates.weight):
            nn.init.uniform_(weight, -bound, bound)

    def forward(self, x, h, c):
        i, f, g, o = (self.input_gates(x) + self.hidden_gates(h)).chunk(4, dim=1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        return torch.sigmoid(o) * torch.tanh(c), c


class Rtn(nn.Module):
    kind = "rtn"

    def __init__(
        self,
        frame_mean,
        frame_std,
        offset_mean,
        offset_std,
        residual="interpolation",
        units: int = LSTM_UNITS,
        noise_sigma: float = 0.0,
    ):
        """`units`: the LSTM's size; every other width keeps its ratio to it (layer_widths;
        the paper's at 512). `noise_sigma`: the standard deviation
        of the scheduled target noise it is trained with (0: none, as the networks before it;
        its step then takes no noise)."""
        super().__init__()
        if not (math.isfinite(noise_sigma) and noise_sigma >= 0):
            raise ValueError(f"noise_sigma must be a finite number >= 0, got {noise_sigma!r}")
        self.noise_sigma = float(noise_sigma)
        if residual not in RESIDUALS:
            raise ValueError(f"unknown residual {residual!r}; choose {', '.join(RESIDUALS)}")
        self.residual = residual
        self.units = units
        frame_encoder, future_encoder, decoder, initialiser = layer_widths(units).values()
        self.frame_code, self.future_code = frame_encoder[-1], future_encoder[-1]
        self.register_buffer("frame_mean", torch.as_tensor(frame_mean, dtype=torch.float32))
        self.register_buffer("frame_std", torch.as_tensor(frame_std, dtype=torch.float32))
        self.register_buffer("offset_mean", torch.as_tensor(offset_mean, dtype=torch.float32))
        self.register_buffer("offset_std", torch.as_tensor(offset_std, dtype=torch.float32))
        self.frame_encoder = mlp([FRAME_SIZE, *frame_encoder], last_activation=True)
        self.target_encoder = mlp([FRAME_SIZE, *future_encoder], last_activation=True)
        self.offset_encoder = mlp([OFFSET_SIZE, *future_encoder], last_activation=True)
        self.lstm = LstmCell(self.frame_code + 2 * self.future_code, units)
        # root (x, z) and yaw corrections
        extra = 3 if SAME_LAYERS[residual] == "interpolation" else 0
        self.decoder = mlp([units, *decoder, FRAME_SIZE + extra], last_activation=False)
        if extra:  # start as exactly the interpolation
            nn.init.zeros_(self.decoder[-1].weight)
            nn.init.zeros_(self.decoder[-1].bias)
        self.initialiser = mlp([FRAME_SIZE, *initialiser, 2 * units], False)

    def standardise(self, frames: torch.Tensor) -> torch.Tensor:
        return (frames - self.frame_mean) / self.frame_std

    def initial_state(self, first_frames: torch.Tensor):
        """The learned hidden-state initialiser: (h, c) from the first context frame."""
        h, c = self.initialiser(self.standardise(first_frames)).chunk(2, dim=1)
        return h, c

    @property
    def noise_width(self) -> int:
        """The target noise's size: the target and offset codes together."""
        return 2 * self.future_code

    def step(self, frames, placements, targets, frames_to_arrival, h, c, target_noise=None):
        """`target_noise` (N, noise_width), in units of noise_sigma, or None (no noise)."""
        offsets = (offsets_to_target(frames, placements, targets) - self.offset_mean) / (
            self.offset_std
        )
        standard = self.standardise(frames)
        future = torch.cat(
            [
                self.target_encoder(self.standardise(targets))
                + tta_embedding(frames_to_arrival, self.future_code),
                self.offset_encoder(offsets) + tta_embedding(frames_to_arrival, self.future_code),
            ],
            dim=1,
        )
        if target_noise is not None:
            scale = target_noise_scale(frames_to_arrival) * self.noise_sigma
            future = future + target_noise * scale
        encoded = [
            self.frame_encoder(standard) + tta_embedding(frames_to_arrival, self.frame_code),
            future,
        ]
        h, c = self.lstm(torch.cat(encoded, dim=1), h, c)
        correction = self.decoder(h)
        if self.residual == "previous":
            next_frames = (standard + correction) * self.frame_std + self.frame_mean
            return next_frames, advance_placement(placements, next_frames), h, c
        share = 1.0 / torch.clamp(frames_to_arrival, min=1.0)
        base = standard + (self.standardise(targets) - standard) * share
        if self.residual == "rotations":
            base = self._axes_turned(base, frames, targets, share)
        pose = (base + correction[:, :FRAME_SIZE]) * self.frame_std + self.frame_mean
        next_placements = interpolate_placement(
            placements,
            share,
            correction[:, FRAME_SIZE : FRAME_SIZE + 2] * ROOT_CORRECTION_M,
            correction[:, FRAME_SIZE + 2 :] * YAW_CORRECTION_RAD,
        )
        motion = root_motion_between(placements, next_placements)
        return torch.cat([motion, pose[:, 3:]], dim=1), next_placements, h, c

    def _axes_turned(self, base, frames, targets, share):
        """`base` with its joint axes the rotations' own blend (training/torch_runtime.py)
        rather than the channels' linear one, standardised as the rest of it."""
        n = frames.shape[0]

        def axes(f):
            return (
                f[:, FORWARDS].reshape(n, ROTATED_COUNT, 3),
                f[:, UPS].reshape(n, ROTATED_COUNT, 3),
            )

        forward, up = interpolate_axes(*axes(frames), *axes(targets), share, ARC_JOINTS)
        turned = torch.cat([forward.reshape(n, -1), up.reshape(n, -1)], dim=1)
        axes_slice = slice(FORWARDS.start, UPS.stop)  # forwards then ups, adjacent
        turned = (turned - self.frame_mean[axes_slice]) / self.frame_std[axes_slice]
        return torch.cat([base[:, : FORWARDS.start], turned, base[:, UPS.stop :]], dim=1)


def empty_rtn(
    residual: str = "interpolation", units: int = LSTM_UNITS, noise_sigma: float = 0.0
) -> Rtn:
    """An RTN with placeholder statistics, to load a checkpoint into."""
    return Rtn(
        torch.zeros(FRAME_SIZE),
        torch.ones(FRAME_SIZE),
        torch.zeros(OFFSET_SIZE),
        torch.ones(OFFSET_SIZE),
        residual,
        units,
        noise_sigma,
    )


def parameter_bytes(model: nn.Module) -> int:
    return sum(p.numel() * p.element_size() for p in model.parameters())


def rollout(
    model: Rtn,
    context: torch.Tensor,
    context_placements: torch.Tensor,
    target: torch.Tensor,
    transition_frames: int,
    truth: tuple[torch.Tensor, torch.Tensor] | None = None,
    teacher_probability: float = 0.0,
    generator: torch.Generator | None = None,
    target_noise: torch.Tensor | None = None,
):
    """Generates transition_frames frames and the predicted target frame after the context
    (B, CONTEXT_FRAMES, D) / (B, CONTEXT_FRAMES, 4): (B, P + 1, D) frames and placements.

    With `truth` (frames, placements of the P + 1 frames) each sample's next input is the
    true frame with `teacher_probability` (the RTN's fixed teacher forcing), else its own.
    `target_noise` (B, noise_width): each sample's one z, for every step of its sequence."""
    h, c = model.initial_state(context[:, 0])
    arrival = float(CONTEXT_FRAMES + transition_frames)  # target index in the window
    ones = context.new_ones(context.shape[0], 1)
    for i in range(CONTEXT_FRAMES - 1):
        _, _, h, c = model.step(
            context[:, i],
            context_placements[:, i],
            target,
            ones * (arrival - i),
            h,
            c,
            target_noise,
        )
    frame, placement = context[:, -1], context_placements[:, -1]
    frames, placements = [], []
    for k in range(transition_frames + 1):
        tta = ones * (arrival - (CONTEXT_FRAMES - 1) - k)
        frame, placement, h, c = model.step(frame, placement, target, tta, h, c, target_noise)
        frames.append(frame)
        placements.append(placement)
        if truth is not None and teacher_probability > 0 and k < transition_frames:
            forced = (
                torch.rand(ones.shape, generator=generator, device=ones.device)
                < teacher_probability
            )
            frame = torch.where(forced, truth[0][:, k], frame)
            placement = torch.where(forced, truth[1][:, k], placement)
    return torch.stack(frames, dim=1), torch.stack(placements, dim=1)

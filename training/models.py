"""The motion networks (PyTorch): MANN, PFNN and the vanilla baseline.

All take standardised inputs and return standardised outputs; export/onnx_export.py folds the
standardisation into the exported graph. MANN and PFNN share one layer type: a linear layer
with K weight sets whose outputs are blended per sample. Because the blend is linear,
sum_k w_k (W_k v + b_k) == (sum_k w_k W_k) v + sum_k w_k b_k, so computing every set's output
with one matmul against the concatenated weights and blending those is the same function as
blending the weights (tests/test_models.py checks it) and much cheaper for small batches.
MANN's blend weights come from its gating network; PFNN's are Catmull-Rom spline coefficients
of the phase over its 4 control points.
"""

from __future__ import annotations

import math

import torch
from canis.runtime.features import INPUT, OUTPUT, gating_indices
from canis.training.optimisation import DROPOUT
from torch import nn
from torch.nn import functional as F

MODEL_KINDS = ("mann", "pfnn", "vnn")
GATING_HIDDEN = 32
MOTION_HIDDEN = 512
VNN_HIDDEN = 2048
PFNN_CONTROL_POINTS = 4


def command_columns() -> torch.Tensor:
    """The input columns that carry the player's command: the trajectory's action one-hots and
    speeds. The labels read a row's action off its pose, so with these dropped like any other
    input a network can predict the pose from the pose and ignore the command; MANN's gating
    reads them undropped, a PFNN has no such path (docs/DECISIONS.md)."""
    columns = (INPUT.indices("trajectory", "action"), INPUT.indices("trajectory", "speed"))
    return torch.as_tensor(sorted(int(c) for block in columns for c in block))


class InputDropout(nn.Module):
    """Dropout of the first layer's input, with `kept` columns (a bool mask) never dropped.
    The whole input goes through the dropout either way, so the random draws, and thus a run,
    do not depend on which columns are kept."""

    def __init__(self, dropout: float, kept: torch.Tensor | None = None):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("kept", kept, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dropped = self.dropout(x)
        return dropped if self.kept is None else torch.where(self.kept, x, dropped)


def kept_mask(inputs: int, drop_commands: bool) -> torch.Tensor | None:
    if drop_commands:
        return None
    mask = torch.zeros(inputs, dtype=torch.bool)
    mask[command_columns()] = True
    return mask


class BlendedLinear(nn.Module):
    """A linear layer with `sets` weight sets blended by per-sample weights (B, sets)."""

    def __init__(self, inputs: int, outputs: int, sets: int):
        super().__init__()
        self.inputs, self.outputs, self.sets = inputs, outputs, sets
        # (inputs, sets * outputs): set k's weights are columns k*outputs .. (k+1)*outputs.
        self.weight = nn.Parameter(torch.empty(inputs, sets * outputs))
        self.bias = nn.Parameter(torch.zeros(sets, outputs))
        bound = math.sqrt(6.0 / (inputs + outputs))  # Glorot-uniform per set
        nn.init.uniform_(self.weight, -bound, bound)

    def forward(self, x: torch.Tensor, blend: torch.Tensor) -> torch.Tensor:
        per_set = (x @ self.weight).view(-1, self.sets, self.outputs) + self.bias
        return (blend.unsqueeze(-1) * per_set).sum(dim=1)

    def forward_blending_weights(self, x: torch.Tensor, blend: torch.Tensor) -> torch.Tensor:
        """The same function the slow way: one blended weight matrix per sample."""
        weights = self.weight.view(self.inputs, self.sets, self.outputs)
        per_sample = torch.einsum("bk,iko->bio", blend, weights)
        return torch.einsum("bi,bio->bo", x, per_sample) + blend @ self.bias


class MotionNetwork(nn.Module):
    """Three ELU layers 480 -> h -> h -> 363 with blended weight sets and dropout."""

    def __init__(
        self,
        inputs: int,
        hidden: int,
        outputs: int,
        sets: int,
        dropout: float = DROPOUT,
        drop_commands: bool = True,
    ):
        super().__init__()
        self.layers = nn.ModuleList(
            [
                BlendedLinear(inputs, hidden, sets),
                BlendedLinear(hidden, hidden, sets),
                BlendedLinear(hidden, outputs, sets),
            ]
        )
        self.input_dropout = InputDropout(dropout, kept_mask(inputs, drop_commands))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, blend: torch.Tensor) -> torch.Tensor:
        for i, layer in enumerate(self.layers):
            x = layer(self.input_dropout(x) if i == 0 else self.dropout(x), blend)
            if i < len(self.layers) - 1:
                x = F.elu(x)
        return x


class MANN(nn.Module):
    kind = "mann"

    def __init__(
        self,
        experts: int = 8,
        hidden: int = MOTION_HIDDEN,
        dropout: float = DROPOUT,
        drop_commands: bool = True,
    ):
        super().__init__()
        self.experts = experts
        self.register_buffer("gating_indices", torch.as_tensor(gating_indices()), persistent=False)
        self.gating = nn.Sequential(
            nn.Linear(len(gating_indices()), GATING_HIDDEN),
            nn.ELU(),
            nn.Linear(GATING_HIDDEN, GATING_HIDDEN),
            nn.ELU(),
            nn.Linear(GATING_HIDDEN, experts),
        )
        self.motion = MotionNetwork(
            INPUT.size, hidden, OUTPUT.size, experts, dropout, drop_commands
        )

    def expert_weights(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.gating(x[:, self.gating_indices]), dim=-1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(y, expert blend weights (B, K)) from standardised x."""
        weights = self.expert_weights(x)
        return self.motion(x, weights), weights


def catmull_rom_weights(phase_rad: torch.Tensor, points: int = PFNN_CONTROL_POINTS):
    """Per-sample blend weights (B, points) of a cyclic cubic Catmull-Rom spline at the phase.

    With mu the fraction between control points k1 and k1+1 (indices mod `points`), the
    spline is y1 + mu(-y0/2 + y2/2) + mu^2(y0 - 5y1/2 + 2y2 - y3/2) + mu^3(-y0/2 + 3y1/2 -
    3y2/2 + y3/2) over y0..y3 = points k1-1 .. k1+2 (REFERENCE.md section 2).
    """
    position = torch.remainder(phase_rad.reshape(-1), 2 * math.pi) * points / (2 * math.pi)
    k1 = torch.floor(position)
    mu = (position - k1)[:, None]
    coefficients = torch.cat(
        [
            -0.5 * mu + mu**2 - 0.5 * mu**3,  # y0 = point k1 - 1
            1.0 - 2.5 * mu**2 + 1.5 * mu**3,  # y1 = point k1
            0.5 * mu + 2.0 * mu**2 - 1.5 * mu**3,  # y2 = point k1 + 1
            -0.5 * mu**2 + 0.5 * mu**3,  # y3 = point k1 + 2
        ],
        dim=1,
    )
    # Control point j takes the coefficient of its offset from k1 - 1.
    j = torch.arange(points, device=phase_rad.device, dtype=position.dtype)[None, :]
    offset = torch.remainder(j - k1[:, None] + 1, points).long()
    return torch.gather(coefficients, 1, offset)


class PFNN(nn.Module):
    """Phase-functioned network; its output has the phase increment appended (364)."""

    kind = "pfnn"

    def __init__(
        self, hidden: int = MOTION_HIDDEN, dropout: float = DROPOUT, drop_commands: bool = True
    ):
        super().__init__()
        self.motion = MotionNetwork(
            INPUT.size, hidden, OUTPUT.size + 1, PFNN_CONTROL_POINTS, dropout, drop_commands
        )

    def forward(self, x: torch.Tensor, phase_rad: torch.Tensor) -> torch.Tensor:
        return self.motion(x, catmull_rom_weights(phase_rad))


class VanillaNetwork(nn.Module):
    """The paper's baseline: one plain 480 -> 2048 -> 2048 -> 363 ELU network.

    The paper calls it parameter-matched to MANN-4; it matches in hidden units (4 x 512), but
    three dense layers of 2048 hold 5.9M parameters against MANN-4's 2.8M.
    """

    kind = "vnn"

    def __init__(
        self, hidden: int = VNN_HIDDEN, dropout: float = DROPOUT, drop_commands: bool = True
    ):
        super().__init__()
        self.input_dropout = InputDropout(dropout, kept_mask(INPUT.size, drop_commands))
        self.dropout = nn.Dropout(dropout)
        self.layers = nn.ModuleList(
            [
                nn.Linear(INPUT.size, hidden),
                nn.Linear(hidden, hidden),
                nn.Linear(hidden, OUTPUT.size),
            ]
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i, layer in enumerate(self.layers):
            x = layer(self.input_dropout(x) if i == 0 else self.dropout(x))
            if i < len(self.layers) - 1:
                x = F.elu(x)
        return x


def create_model(
    kind: str,
    experts: int = 8,
    hidden: int | None = None,
    dropout: float = DROPOUT,
    drop_commands: bool = True,
) -> nn.Module:
    """`hidden`: units per hidden layer, None for the paper's (512; the vanilla network's
    2048). Smaller networks are for test fixtures. `dropout`: the probability of dropping an
    input of each layer in training (no effect in eval mode, so exports need not know it).
    `drop_commands` False: the command columns (command_columns) are never dropped."""
    size = ({} if hidden is None else {"hidden": hidden}) | {
        "dropout": dropout,
        "drop_commands": drop_commands,
    }
    if kind == "mann":
        return MANN(experts, **size)
    if kind == "pfnn":
        return PFNN(**size)
    if kind == "vnn":
        return VanillaNetwork(**size)
    raise ValueError(f"unknown model kind {kind!r}; choose one of {', '.join(MODEL_KINDS)}")


def restored_model(checkpoint, path, dropout: float = DROPOUT) -> nn.Module:
    """The network a checkpoint (training/checkpoint.py) holds, its weights loaded: its kind,
    experts and width from the checkpoint's config, and whether its training dropped the
    command columns."""
    from canis.training.checkpoint import restore_model

    config = checkpoint.config
    if config.get("pose_residual"):
        raise ValueError(
            f"{path}: was trained with --pose-residual, which this version no longer has "
            "(docs/DECISIONS.md, 'The next pose is predicted whole')"
        )
    trained = (config.get("train") or {}).get("config") or {}
    model = create_model(
        config["kind"],
        config.get("experts") or 8,
        config.get("hidden"),
        dropout,
        trained.get("drop_commands", True),
    )
    restore_model(checkpoint, model, path)
    return model

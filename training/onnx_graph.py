"""The ONNX graph of a network in memory, as the runtime loads it: the network wrapped with its
standardisation (raw features in, raw outputs out, inputs clamped to the training range) and the
canis.* metadata that say what it is. Training writes it for the runtime's own dogs in
fine-tuning (training/moving_skating.py, placed_stillness.py), export/onnx_export.py for `canis
export` (which adds the parity check); it lives here, the lower layer, so that training
imports nothing of export's.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import torch
from canis.runtime.features import (
    CONTRACT_VERSION,
    FPS,
    INPUT,
    OUTPUT,
    PFNN_PHASE_INPUT,
    PFNN_PHASE_OUTPUT,
    contract_description,
    layout_hash,
)
from canis.runtime.inference import PRECISION_KEY
from canis.runtime.skeleton import DOG_JOINT_NAMES
from torch import nn

from canis import __version__

OPSET = 17
# Written by versions that had --pose-residual ("0": the pose predicted whole); read only to
# refuse a residual network's file (checkpoint_from_onnx).
POSE_RESIDUAL_KEY = "canis.pose_residual"
INPUT_RANGE_MARGIN = 0.1
LICENCE = (
    "CC BY-NC 4.0: trained on the MANN dog motion capture (Zhang, Starke, Komura, Saito, "
    "SIGGRAPH 2018) provided by Bandai-Namco Studios"
)


def input_range(normalisation: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """(low, high) raw inputs the exported graph clamps x to: the training range widened by
    INPUT_RANGE_MARGIN of it. Fine-tuning standardises its fed-back inputs through the same
    range (training/finetune_stretches.Standardiser), so that it trains what the game runs."""
    x_min, x_max = (torch.as_tensor(normalisation[k]).float() for k in ("x_min", "x_max"))
    span = x_max - x_min
    return x_min - INPUT_RANGE_MARGIN * span, x_max + INPUT_RANGE_MARGIN * span


class ExportedModel(nn.Module):
    """Wraps a trained network with its standardisation: raw in, raw out."""

    def __init__(self, model: nn.Module, normalisation: dict[str, torch.Tensor]):
        super().__init__()
        self.model = model.eval()
        self.kind = model.kind
        for name, value in normalisation.items():
            if name not in ("x_min", "x_max"):
                self.register_buffer(name, value.float().clone())
        x_low, x_high = input_range(normalisation)
        self.register_buffer("x_low", x_low)
        self.register_buffer("x_high", x_high)
        self.eval()  # torch.onnx.export restores this mode afterwards: it must be eval too

    def forward(self, x: torch.Tensor, phase: torch.Tensor | None = None):
        # Inputs outside what the network was trained on make its own outputs, fed back next
        # frame, run away exponentially (a dog asked to lie down at a gallop): clamp them to
        # the training range, widened by INPUT_RANGE_MARGIN of it.
        x = torch.minimum(torch.maximum(x, self.x_low), self.x_high)
        x_standard = (x - self.x_mean) / self.x_std
        if self.kind == "mann":
            y, expert_weights = self.model(x_standard)
            return y * self.y_std + self.y_mean, expert_weights
        if self.kind == "pfnn":
            out = self.model(x_standard, phase.reshape(-1))
            y = out[:, : OUTPUT.size] * self.y_std + self.y_mean
            phase_delta = out[:, OUTPUT.size :] * self.phase_delta_std + self.phase_delta_mean
            return y, phase_delta
        return self.model(x_standard) * self.y_std + self.y_mean


def io_names(kind: str) -> tuple[list[str], list[str]]:
    if kind == "mann":
        return ["x"], ["y", "expert_weights"]
    if kind == "pfnn":
        return ["x", PFNN_PHASE_INPUT], ["y", PFNN_PHASE_OUTPUT]
    return ["x"], ["y"]


def metadata(config: dict) -> dict[str, str]:
    train = config["train"]["config"]
    inputs, outputs = io_names(config["kind"])
    return {
        "canis.kind": config["kind"],
        PRECISION_KEY: "fp32",  # export/precision.py makes the fp16 and int8 variants
        "canis.experts": str(config.get("experts") or ""),
        "canis.layout_hash": layout_hash(),
        "canis.contract_version": str(CONTRACT_VERSION),
        "canis.contract": json.dumps(contract_description()),
        "canis.fps": str(FPS),
        "canis.joint_names": json.dumps(list(DOG_JOINT_NAMES)),
        "canis.inputs": json.dumps(inputs),
        "canis.outputs": json.dumps(outputs),
        "canis.licence": LICENCE,
        "canis.training_schedule": json.dumps(
            {
                k: train[k]
                for k in (
                    "schedule",
                    "epochs",
                    "batch_size",
                    "lr",
                    "weight_decay",
                    "restart_epochs",
                    "restart_mult",
                    "oversample",
                    "seed",
                )
            }
            | {"epochs_completed": config["epoch"], "precision": train.get("precision", "fp32")}
        ),
        "canis.training_result": json.dumps(
            {
                "last": config["last"],
                "best_validation_loss": config["best_validation_loss"],
                "machine": config["machine"],
            }
        ),
        "canis.dataset": json.dumps(config["dataset"]),
        "canis.input_clamp": f"training range widened by {INPUT_RANGE_MARGIN:.0%}",
        "canis.exported": datetime.now(UTC).isoformat(timespec="seconds"),
        "canis.version": __version__,
    }


def _example_inputs(kind: str, x: np.ndarray, phase: np.ndarray) -> tuple:
    tensors = (torch.as_tensor(x, dtype=torch.float32),)
    if kind == "pfnn":
        tensors += (torch.as_tensor(phase, dtype=torch.float32).reshape(-1, 1),)
    return tensors


def write_graph(module, example: tuple, path: Path, inputs, outputs, meta: dict) -> None:
    """One ONNX graph of `module` (eval mode, dynamic batch axis) with canis.* metadata,
    checked by onnx's checker."""
    import onnx

    torch.onnx.export(
        module.eval(),
        example,
        str(path),
        input_names=inputs,
        output_names=outputs,
        dynamic_axes={name: {0: "batch"} for name in inputs + outputs},
        opset_version=OPSET,
        dynamo=False,
    )
    graph = onnx.load(str(path))
    for key, value in meta.items():
        entry = graph.metadata_props.add()
        entry.key, entry.value = key, value
    graph.doc_string = f"canis {meta['canis.kind']} network; see canis.* metadata"
    onnx.checker.check_model(graph)
    onnx.save(graph, str(path))


def write_wrapped(wrapper: ExportedModel, config: dict, path: Path) -> None:
    """The wrapped network's graph with the metadata of a checkpoint's `config`; no parity
    check (export_onnx adds it; training's rollouts run the graph of the weights in memory)."""
    kind = config["kind"]
    inputs, outputs = io_names(kind)
    example = _example_inputs(kind, np.zeros((2, INPUT.size), np.float32), np.zeros(2, np.float32))
    write_graph(wrapper, example, path, inputs, outputs, metadata(config))

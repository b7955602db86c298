"""`canis export`: a training checkpoint -> a self-describing ONNX model for the runtime.

The graph takes raw features and returns raw outputs: the standardisation is part of it. The
batch axis is dynamic. Each blended layer is one MatMul against all weight sets followed by a
weighted sum, which ONNX Runtime runs fast on a CPU. Metadata says what the model is and what
it expects (see METADATA_KEYS); the runtime refuses a model whose contract differs. The export
checks itself against PyTorch on real and random inputs and fails above MAX_PARITY_ERROR.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch
from canis.runtime.features import INPUT
from canis.training.checkpoint import load_checkpoint
from canis.training.models import restored_model
from canis.training.onnx_graph import (  # noqa: F401  (export's names: their home is training)
    INPUT_RANGE_MARGIN,
    LICENCE,
    OPSET,
    ExportedModel,
    _example_inputs,
    input_range,
    io_names,
    metadata,
    write_graph,
    write_wrapped,
)

MAX_PARITY_ERROR = 1e-4


def load_for_export(checkpoint_path: Path, dataset_path: Path | None = None):
    """(wrapped model, checkpoint config). Checkpoints written before the input range was
    recorded get it from the dataset's training rows."""
    checkpoint = load_checkpoint(checkpoint_path)
    config = checkpoint.config
    model = restored_model(checkpoint, checkpoint_path)
    normalisation = checkpoint.section("norm/")
    if "x_min" not in normalisation:
        if dataset_path is None:
            raise ValueError(
                f"{checkpoint_path}: holds no input range; give --dataset so the "
                "export can clamp inputs to the training data's range"
            )
        from canis.training.dataset import load
        from canis.training.training_data import input_range

        data = load(dataset_path)
        normalisation |= {
            k: torch.as_tensor(v) for k, v in input_range(data["X"][~data["validation"]]).items()
        }
    return ExportedModel(model, normalisation), config


def parity_inputs(wrapper: ExportedModel, dataset_path: Path | None, rows: int = 256, seed=0):
    """Real rows from a dataset when given, and random rows in the standardised range."""
    rng = np.random.default_rng(seed)
    mean, std = wrapper.x_mean.numpy(), wrapper.x_std.numpy()
    random_x = (mean + std * rng.normal(size=(rows, INPUT.size))).astype(np.float32)
    sets = {"random": (random_x, rng.uniform(0, 2 * math.pi, size=rows).astype(np.float32))}
    if dataset_path is not None:
        from canis.training.dataset import load

        data = load(dataset_path)
        pick = rng.choice(len(data["X"]), size=min(rows, len(data["X"])), replace=False)
        sets["real"] = (data["X"][pick], data["phase"][pick])
    return sets


def export_onnx(checkpoint_path: Path, out: Path, dataset_path: Path | None = None) -> dict:
    """Writes the ONNX model and returns the parity report; raises if parity fails."""
    wrapper, config = load_for_export(checkpoint_path, dataset_path)
    kind = config["kind"]
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".partial")
    try:
        report = _parity(wrapper, config, tmp, dataset_path)
    except BaseException:  # a failed or interrupted export leaves nothing behind
        tmp.unlink(missing_ok=True)
        raise
    tmp.replace(out)
    return {"parity_max_abs_error": report, "bytes": out.stat().st_size, "kind": kind}


def _parity(wrapper, config: dict, tmp: Path, dataset_path: Path | None) -> dict:
    """Writes the graph to `tmp` and returns ONNX Runtime's max difference from PyTorch on
    each set of parity inputs; raises past MAX_PARITY_ERROR."""
    import onnxruntime as ort

    kind = config["kind"]
    inputs, outputs = io_names(kind)
    write_wrapped(wrapper, config, tmp)
    session = ort.InferenceSession(str(tmp), providers=["CPUExecutionProvider"])
    report = {}
    for name, (x, phase) in parity_inputs(wrapper, dataset_path).items():
        feeds = dict(zip(inputs, (t.numpy() for t in _example_inputs(kind, x, phase)), strict=True))
        with torch.no_grad():
            expected = wrapper(*_example_inputs(kind, x, phase))
        expected = expected if isinstance(expected, tuple) else (expected,)
        got = session.run(outputs, feeds)
        error = max(float(np.abs(g - e.numpy()).max()) for g, e in zip(got, expected, strict=True))
        report[name] = error
        if not error < MAX_PARITY_ERROR:
            raise ValueError(
                f"export parity failed on {name} inputs: ONNX Runtime differs from "
                f"PyTorch by {error:.2e} (limit {MAX_PARITY_ERROR:.0e})"
            )
    return report

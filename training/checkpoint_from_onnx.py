"""A shipped motion model (ONNX) back into a training checkpoint, so closed-loop fine-tuning
(`canis finetune --start assets/models/mann8.onnx`) can start from the network the game runs
without its original checkpoint, which is not shipped.

training/onnx_graph.py (`canis export`'s graph) writes the network's weights as initializers
named after the wrapped module's parameters (`model.<name>`) and its standardisation as
x_mean/x_std/y_mean/y_std. The checkpoint takes the weights as they are and the
standardisation from the dataset it will be trained on, after checking that the model's own
statistics are that dataset's: a model fine-tuned under another dataset's standardisation
would be silently wrong.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import torch
from canis.training.checkpoint import save_checkpoint
from canis.training.models import create_model
from canis.training.onnx_graph import POSE_RESIDUAL_KEY
from onnx import numpy_helper

WEIGHT_PREFIX = "model."
STATISTICS = ("x_mean", "x_std", "y_mean", "y_std")


def _read(path: Path) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    try:
        model = onnx.load(str(path))
    except Exception as error:  # onnx raises DecodeError, OSError, ... for a bad file
        raise ValueError(f"{path}: not a readable ONNX model ({error})") from None
    weights = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    return weights, {p.key: p.value for p in model.metadata_props}


def checkpoint_from_onnx(onnx_path: str | Path, dataset_path: str | Path, out: str | Path):
    """Writes `out` (a canis checkpoint) holding the weights of the fp32 motion model
    `onnx_path` and `dataset_path`'s standardisation; returns its config."""
    from canis.training.training_data import TrainingData

    onnx_path, out = Path(onnx_path), Path(out)
    weights, meta = _read(onnx_path)
    kind, precision = meta.get("canis.kind"), meta.get("canis.precision", "fp32")
    if kind not in ("mann", "pfnn", "vnn"):
        raise ValueError(f"{onnx_path}: not a canis motion model (canis.kind {kind!r})")
    if precision != "fp32":
        raise ValueError(
            f"{onnx_path}: is {precision}; start fine-tuning from the fp32 model it was made from"
        )
    data = TrainingData(str(dataset_path), kind, torch.device("cpu"))
    differ = [
        k
        for k in STATISTICS
        if k not in weights or not np.allclose(weights[k], data.normalisation[k].numpy(), rtol=1e-6)
    ]
    if differ:
        raise ValueError(
            f"{onnx_path}: was trained on another dataset than {dataset_path} "
            f"({', '.join(differ)} differ); give the dataset it was trained on"
        )
    tensors = {
        k[len(WEIGHT_PREFIX) :]: torch.as_tensor(v.copy())
        for k, v in weights.items()
        if k.startswith(WEIGHT_PREFIX)
    }
    if float(meta.get(POSE_RESIDUAL_KEY, "0")) > 0:
        raise ValueError(
            f"{onnx_path}: was trained with --pose-residual, which this version no longer has "
            "(docs/DECISIONS.md, 'The next pose is predicted whole')"
        )
    experts = int(meta["canis.experts"]) if meta.get("canis.experts") else None
    hidden = next(v.shape[-1] for k, v in tensors.items() if k.endswith("layers.0.bias"))
    network = create_model(kind, experts or 8, hidden)
    missing = sorted(set(network.state_dict()) ^ set(tensors))
    if missing:
        raise ValueError(f"{onnx_path}: its weights do not fit a {kind} network: {missing[:6]}")
    network.load_state_dict(tensors)
    schedule = json.loads(meta.get("canis.training_schedule", "{}"))
    result = json.loads(meta.get("canis.training_result", "{}"))
    config = {
        "kind": kind,
        "experts": experts,
        "hidden": hidden,
        "train": {"config": schedule | {"dataset": str(dataset_path)}, "identity": None},
        "epoch": schedule.get("epochs_completed"),
        "last": result.get("last"),
        "best_validation_loss": result.get("best_validation_loss"),
        "machine": result.get("machine"),
        "dataset": json.loads(meta.get("canis.dataset", "{}")),
        "from_onnx": str(onnx_path),
    }
    optimizer = torch.optim.AdamW(network.parameters())  # no state: a fresh start
    save_checkpoint(out, network, optimizer, data.normalisation, config)
    return config


def rtn_weights_from_onnx(step_path: str | Path, model) -> dict[str, torch.Tensor]:
    """The state dict of an exported RTN (`<name>_step.onnx` and its `_init` beside it) for
    `model` (training/rtn.py's Rtn, its residual and size those of the graphs), to fine-tune
    the shipped network (e.g. with target noise) without its checkpoint, which is not shipped.

    export/rtn_export.py writes the weights as `model.<name>` initializers, except the LSTM's
    hidden-gate matrix, which the exporter folds into a MatMul as its transpose under a
    generated name: it is the one other initializer of shape (units, 4 units)."""
    step_path = Path(step_path)
    init_path = step_path.with_name(step_path.name.replace("_step", "_init"))
    if "_step" not in step_path.name:
        raise ValueError(f"{step_path}: not an RTN step graph (name it <name>_step.onnx)")
    weights, meta = _read(step_path)
    init_weights, init_meta = _read(init_path)
    for path, m, kind in ((step_path, meta, "rtn_step"), (init_path, init_meta, "rtn_init")):
        if m.get("canis.kind") != kind:
            raise ValueError(f"{path}: not an RTN graph (canis.kind {m.get('canis.kind')!r})")
        if m.get("canis.precision", "fp32") != "fp32":
            raise ValueError(f"{path}: is {m['canis.precision']}; start from the fp32 model")
    from canis.training.rtn import SAME_LAYERS

    residual = meta.get("canis.residual")
    if SAME_LAYERS.get(residual) != SAME_LAYERS[model.residual]:
        raise ValueError(
            f"{step_path}: residual {residual!r}, whose layers are not those of the model's "
            f"{model.residual!r}"
        )
    tensors = {
        k[len(WEIGHT_PREFIX) :]: torch.as_tensor(v.copy())
        for source in (weights, init_weights)
        for k, v in source.items()
        if k.startswith(WEIGHT_PREFIX)
    }
    units = model.units
    hidden = [
        v
        for k, v in weights.items()
        if not k.startswith(WEIGHT_PREFIX) and v.shape == (units, 4 * units)
    ]
    if len(hidden) != 1:
        raise ValueError(
            f"{step_path}: expected one ({units}, {4 * units}) hidden-gate matrix, found "
            f"{len(hidden)}"
        )
    tensors["lstm.hidden_gates.weight"] = torch.as_tensor(hidden[0].T.copy())
    expected = model.state_dict()
    problems = sorted(set(expected) ^ set(tensors))
    problems += [k for k in expected if k in tensors and expected[k].shape != tensors[k].shape]
    if problems:
        raise ValueError(f"{step_path}: its weights do not fit this RTN: {problems[:6]}")
    return tensors

"""A MANN graph with one expert switched off, for the expert ablation (the MANN paper's
Table 5): the gating network's blending coefficient of that expert is set to zero and the
others are renormalised to sum to 1, so what remains is a blend of the other experts at the
scale the network was trained on. Done on the exported ONNX graph, so the shipped file alone
is enough to reproduce it; `expert_weights` then reports the coefficients actually used.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

WEIGHTS = "expert_weights"


def disable_expert(onnx_path: str | Path, expert: int, out_path: str | Path) -> Path:
    """Writes the graph of `onnx_path` with expert `expert` (0-based) disabled to out_path."""
    model = onnx.load(str(onnx_path))
    graph = model.graph
    producers = [n for n in graph.node if WEIGHTS in n.output]
    if len(producers) != 1 or producers[0].op_type != "Softmax":
        raise ValueError(f"{onnx_path}: no gating softmax producing {WEIGHTS!r}: not a MANN graph")
    softmax = producers[0]
    experts = _experts(model)
    if not 0 <= expert < experts:
        raise ValueError(f"expert {expert} out of range: the model has {experts} (0-{experts - 1})")
    raw = "gating_softmax"
    softmax.output[0] = raw
    mask = np.ones((1, experts), np.float32)
    mask[0, expert] = 0.0
    graph.initializer.extend(
        [
            numpy_helper.from_array(mask, "expert_mask"),
            numpy_helper.from_array(np.array([1], np.int64), "expert_axis"),
        ]
    )
    at = list(graph.node).index(softmax) + 1
    added = [
        helper.make_node("Mul", [raw, "expert_mask"], ["masked_weights"]),
        helper.make_node("ReduceSum", ["masked_weights", "expert_axis"], ["masked_total"]),
        helper.make_node("Div", ["masked_weights", "masked_total"], [WEIGHTS]),
    ]
    for offset, node in enumerate(added):
        graph.node.insert(at + offset, node)
    onnx.checker.check_model(model)
    out_path = Path(out_path)
    onnx.save(model, str(out_path))
    return out_path


def _experts(model) -> int:
    meta = {p.key: p.value for p in model.metadata_props}
    if "canis.experts" not in meta:
        raise ValueError("the model's metadata does not say how many experts it has")
    return int(meta["canis.experts"])

"""Gating sparsity, an experiment measured by the precision gate (evaluation/precision_gate.py):
a MANN graph in which each frame blends only the top-k experts, their coefficients
renormalised to sum to 1, so only k of the K experts' weights are read per character.

Done on the exported graph like export/expert_ablation.py. Each blended layer's weights
(in, K * out) become (K, in, out); the top-k experts' slices are gathered per character and
multiplied, instead of one MatMul against all K sets. ONNX has no operator that multiplies by
a slice in place, so the Gather copies the k slices: per frame this reads k/K of the weights
and writes as many again, and the copy grows with the batch (N * k slices). `expert_weights`
reports the coefficients used (zero outside the top k).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

WEIGHTS = "expert_weights"


def _initializers(graph) -> dict:
    return {t.name: t for t in graph.initializer}


def top_k_experts(onnx_path: str | Path, k: int, out_path: str | Path) -> Path:
    """Writes the graph of `onnx_path` blending only its top `k` experts to out_path."""
    model = onnx.load(str(onnx_path))
    graph = model.graph
    meta = {p.key: p.value for p in model.metadata_props}
    experts = int(meta.get("canis.experts") or 0)
    softmax = [n for n in graph.node if WEIGHTS in n.output]
    if meta.get("canis.kind") != "mann" or len(softmax) != 1 or softmax[0].op_type != "Softmax":
        raise ValueError(f"{onnx_path}: not a MANN graph (no gating softmax)")
    if not 1 <= k < experts:
        raise ValueError(f"top-k of {k}: the model has {experts} experts (1 <= k < {experts})")
    softmax = softmax[0]
    softmax.output[0] = "gating_softmax"
    consts = [
        numpy_helper.from_array(np.array([k], np.int64), "topk_k"),
        numpy_helper.from_array(np.array([1], np.int64), "topk_axis1"),
        numpy_helper.from_array(np.array([-1], np.int64), "topk_last"),
        numpy_helper.from_array(np.array([1, 2], np.int64), "topk_axes12"),
        numpy_helper.from_array(np.zeros((1, experts), np.float32), "topk_zeros"),
    ]
    added = [
        helper.make_node("TopK", ["gating_softmax", "topk_k"], ["topk_values", "topk_index"]),
        helper.make_node("ReduceSum", ["topk_values", "topk_axis1"], ["topk_total"]),
        helper.make_node("Div", ["topk_values", "topk_total"], ["topk_weights"]),
        helper.make_node("Unsqueeze", ["topk_weights", "topk_last"], ["topk_weights_3d"]),
        helper.make_node("Mul", ["gating_softmax", "topk_zeros"], ["topk_dense_zeros"]),
        helper.make_node(
            "ScatterElements",
            ["topk_dense_zeros", "topk_index", "topk_weights"],
            [WEIGHTS],
            axis=1,
        ),
    ]
    initializers = _initializers(graph)
    nodes = list(graph.node)
    blend_nodes = []
    for matmul in [n for n in nodes if n.op_type == "MatMul" and n.input[1] in initializers]:
        blend_nodes.append(_sparse_layer(graph, nodes, matmul, initializers, experts, consts))
    if not blend_nodes:
        raise ValueError(f"{onnx_path}: no blended layers found")
    dropped = {id(n) for old, _ in blend_nodes for n in old}
    replacement_at = {id(old[0]): new for old, new in blend_nodes}  # at the layer's MatMul
    new_nodes = []
    for node in nodes:
        new_nodes += replacement_at.get(id(node), [])
        if id(node) in dropped:
            continue
        new_nodes.append(node)
        if node is softmax:
            new_nodes += added
    del graph.node[:]
    graph.node.extend(_live(new_nodes, {o.name for o in graph.output}))
    graph.initializer.extend(consts)
    used = {i for n in graph.node for i in n.input}
    kept = [t for t in graph.initializer if t.name in used]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    entry = model.metadata_props.add()
    entry.key, entry.value = "canis.gating_top_k", str(k)
    onnx.checker.check_model(model)
    out_path = Path(out_path)
    onnx.save(model, str(out_path))
    return out_path


def _live(nodes: list, outputs: set[str]) -> list:
    """The nodes that the graph's outputs depend on, in their order (the dense layers' shape
    constants are left without readers)."""
    needed, live = set(outputs), []
    for node in reversed(nodes):
        if needed & set(node.output):
            live.append(node)
            needed |= set(node.input)
    return live[::-1]


def _sparse_layer(graph, nodes, matmul, initializers, experts, consts):
    """(the layer's nodes MatMul..ReduceSum to drop, their replacement)."""
    consumers = {}
    for n in nodes:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    reshape = consumers[matmul.output[0]][0]
    add = consumers[reshape.output[0]][0]
    mul = consumers[add.output[0]][0]
    reduce = consumers[mul.output[0]][0]
    unsqueeze = next(n for n in nodes if n.output[0] in mul.input and n.op_type == "Unsqueeze")
    if [reshape.op_type, add.op_type, mul.op_type, reduce.op_type] != [
        "Reshape",
        "Add",
        "Mul",
        "ReduceSum",
    ]:
        raise ValueError(f"layer of {matmul.input[1]}: not the blended-layer pattern")
    weight = numpy_helper.to_array(initializers[matmul.input[1]])
    size_in, size_out = weight.shape[0], weight.shape[1] // experts
    stacked = weight.reshape(size_in, experts, size_out).transpose(1, 0, 2)
    name = matmul.input[1]
    bias = next(i for i in add.input if i in initializers)
    consts.append(numpy_helper.from_array(np.ascontiguousarray(stacked), f"{name}.stacked"))
    h = matmul.input[0]
    new = [
        helper.make_node("Unsqueeze", [h, "topk_axes12"], [f"{name}.h4"]),
        helper.make_node("Gather", [f"{name}.stacked", "topk_index"], [f"{name}.picked"], axis=0),
        helper.make_node("MatMul", [f"{name}.h4", f"{name}.picked"], [f"{name}.mm"]),
        helper.make_node("Squeeze", [f"{name}.mm", "topk_axes12_2"], [f"{name}.mm3"]),
        helper.make_node("Gather", [bias, "topk_index"], [f"{name}.bias"], axis=0),
        helper.make_node("Add", [f"{name}.mm3", f"{name}.bias"], [f"{name}.biased"]),
        helper.make_node("Mul", [f"{name}.biased", "topk_weights_3d"], [f"{name}.weighted"]),
        helper.make_node(
            "ReduceSum", [f"{name}.weighted", "topk_axis1"], [reduce.output[0]], keepdims=0
        ),
    ]
    if not any(c.name == "topk_axes12_2" for c in consts):
        consts.append(numpy_helper.from_array(np.array([2], np.int64), "topk_axes12_2"))
    return [matmul, reshape, add, mul, reduce, unsqueeze], new

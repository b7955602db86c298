"""The numeric precision of a model file: what its `canis.precision` metadata declares and what
its graph holds, which must agree. Reduced-precision files are made from an fp32 export by
ONNX Runtime's own tools (export/precision.py); the runtime loads any of them the same way.

The graph is read with the `onnx` package (the one parser of the format; ONNX Runtime does not
expose a loaded model's weights or operators), once per file at load."""

from __future__ import annotations

from pathlib import Path

PRECISIONS = ("fp32", "fp16", "int8")
DEFAULT_PRECISION = "fp32"  # models exported before the precision was recorded are fp32
PRECISION_KEY = "canis.precision"

# Operators only a quantised graph has (onnxruntime.quantization's dynamic and static forms).
QUANTISED_OPS = {
    "DynamicQuantizeLinear",
    "DynamicQuantizeMatMul",
    "DynamicQuantizeLSTM",
    "MatMulInteger",
    "ConvInteger",
    "QLinearMatMul",
    "QLinearConv",
    "QuantizeLinear",
    "DequantizeLinear",
    "MatMulIntegerToFloat",
}


def declared_precision(meta: dict[str, str]) -> str:
    return meta.get(PRECISION_KEY, DEFAULT_PRECISION)


def graph_precision(model) -> str:
    """'int8' when the graph holds quantised operators or 8-bit weights, 'fp16' when it holds
    float16 weights, else 'fp32'. `model` is an onnx.ModelProto."""
    from onnx import TensorProto

    graph = model.graph
    types = {t.data_type for t in graph.initializer}
    types |= {
        a.t.data_type for n in graph.node if n.op_type == "Constant" for a in n.attribute if a.t
    }
    if {n.op_type for n in graph.node} & QUANTISED_OPS or types & {
        TensorProto.INT8,
        TensorProto.UINT8,
    }:
        return "int8"
    if TensorProto.FLOAT16 in types:
        return "fp16"
    return "fp32"


def read_graph(path: Path):
    """The onnx.ModelProto of a file ONNX Runtime has already loaded."""
    import onnx

    return onnx.load(str(path), load_external_data=False)


def precision_problems(path: Path, meta: dict[str, str]) -> list[str]:
    """How the declared precision disagrees with this runtime or with the file's own graph."""
    declared = declared_precision(meta)
    if declared not in PRECISIONS:
        return [f"precision {declared!r} is not one of {', '.join(PRECISIONS)}"]
    held = graph_precision(read_graph(path))
    if held != declared:
        return [f"its metadata says precision {declared} but its graph holds {held} weights"]
    return []


def unsupported_precision_message(path: Path, error: Exception) -> str | None:
    """The one-line error for a reduced-precision file the installed ONNX Runtime has no
    kernels for (its NOT_IMPLEMENTED at load), or None for any other load failure."""
    import onnxruntime as ort

    if "NOT_IMPLEMENTED" not in str(error):
        return None
    try:
        meta = {p.key: p.value for p in read_graph(path).metadata_props}
    except Exception:  # unreadable as well: the caller's general message says so
        return None
    precision = declared_precision(meta)
    if precision == DEFAULT_PRECISION:
        return None
    detail = str(error).strip().splitlines()[0]
    return (
        f"{path}: precision {precision} cannot run on the installed ONNX Runtime "
        f"{ort.__version__} ({', '.join(ort.get_available_providers())}): {detail}"
    )

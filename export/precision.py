"""Reduced-precision copies of an fp32 export (`canis export --precision`, `canis export-rtn
--precision`), made by ONNX Runtime's own tools, not by hand:

- int8: `onnxruntime.quantization.quantize_dynamic`: the MatMul and Gemm weights are stored as
  int8 with one scale per output channel; activations are quantised on the fly at each call
  (dynamic quantisation needs no calibration data). A quarter of the bytes to stream per frame.
  The weights use 7 of the 8 bits (`reduce_range`): on a CPU without VNNI (AMD Zen 1-3, older
  Intel) ONNX Runtime multiplies uint8 by int8 with VPMADDUBSW, whose pairwise
  int16 sums saturate at full range, so the same file gave other outputs there (MANN-8's
  largest error against fp32 0.115 std on an AMD EPYC Zen 3, 0.024 on a Xeon with VNNI).
  At 7 bits no sum saturates: the integer products are exact on every CPU.
  A MANN's small gating network stays float32 (see gating_nodes). ONNX Runtime's dynamic
  quantisation takes one activation scale over the whole batch, so a dog's motion would
  depend on its neighbours'; the graph is then rewritten to quantise each row (each dog) on
  its own (quantise_rows), which gives a lone dog exactly what it got before.
- fp16: `onnxruntime.transformers.float16.convert_float_to_float16`, ONNX Runtime's copy of
  onnxconverter-common's converter (so no further package is needed), keeping float32 inputs
  and outputs so the runtime's buffers stay as they are. Half the bytes; ONNX Runtime's CPU
  provider computes most float16 operators by casting to float32, so it is not faster there.
- fp32: the source as it is.

The canis metadata is carried over with `canis.precision` set and the conversion recorded.
Each variant is loaded by the runtime (which checks the declared precision against the graph)
and compared with its fp32 source on random inputs; the export fails when the variant gives
non-finite outputs or drifts past MAX_MEAN_ERROR_STD. Whether it moves as well as fp32 is the
closed-loop gate's question (evaluation/precision_gate.py), not this check's.
"""

from __future__ import annotations

import shutil
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import onnx
from canis.runtime.assets import file_sha256
from canis.runtime.inference import (
    DEFAULT_PRECISION,
    PRECISION_KEY,
    PRECISIONS,
    declared_precision,
)
from onnx import numpy_helper

# Mean absolute difference from fp32, in units of the output's standard deviation, above which
# a conversion is taken to be broken (int8 MANN-8 measures about 0.005).
MAX_MEAN_ERROR_STD = 0.05
PARITY_ROWS = 256


def variant_path(fp32_path: Path, precision: str) -> Path:
    """mann8.onnx -> mann8.int8.onnx; rtn_step.onnx -> rtn_step.int8.onnx (whose init graph
    is then rtn_init.int8.onnx, where the runtime looks for it)."""
    return fp32_path.with_name(f"{fp32_path.stem}.{precision}.onnx")


def _metadata(model) -> dict[str, str]:
    return {p.key: p.value for p in model.metadata_props}


def _set_metadata(model, meta: dict[str, str]) -> None:
    del model.metadata_props[:]
    for key, value in meta.items():
        entry = model.metadata_props.add()
        entry.key, entry.value = key, value


def _tool(precision: str) -> str:
    import onnxruntime as ort

    return {
        "fp32": "none (the fp32 export as it is)",
        "fp16": "onnxruntime.transformers.float16.convert_float_to_float16(keep_io_types=True)",
        "int8": "onnxruntime.quantization.quantize_dynamic(weight_type=QInt8, per_channel=True, "
        "reduce_range=True, "
        "gating network excluded), activations quantised per row (export/precision.py)",
    }[precision] + f", onnxruntime {ort.__version__}"


def gating_nodes(model) -> list[str]:
    """The MatMul and Gemm nodes of a MANN's gating network (everything the `expert_weights`
    softmax depends on). int8 leaves them in float32: they are 0.1% of MANN-8's weights, so
    quantising them saves nothing measurable, while every error in them moves the blend of
    all the experts at once."""
    producer = {o: n for n in model.graph.node for o in n.output}
    found, todo = [], ["expert_weights"]
    seen = set()
    while todo:
        node = producer.get(todo.pop())
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        if node.op_type == "MatMul":
            found.append(node.name)
        elif node.op_type == "Gemm":  # the quantiser first splits it into <name>_MatMul + Add
            found += [node.name, f"{node.name}_MatMul"]
        todo += list(node.input)
    return found


def quantise_rows(model) -> int:
    """Rewrites every DynamicQuantizeLinear -> MatMulInteger pair of `model` in place so that
    each row of the activation (one dog) gets its own scale and zero point, computed exactly
    as DynamicQuantizeLinear computes them for a tensor (range widened to hold 0, /255, the
    zero point rounded half to even), so a batch of one is quantised bit for bit as before.
    ONNX Runtime's MatMulInteger takes only one zero point for A, so the rows' zero points
    are taken off after the product: sum_k (a - za)(b - zb) = sum_k a (b - zb) - za * colsum,
    exact in int32. Only 2-D activations (batch, features) are rewritten. Returns how many
    activations were rewritten."""
    from onnx import TensorProto, helper

    graph = model.graph
    inferred = onnx.shape_inference.infer_shapes(model).graph
    rank = {
        v.name: len(v.type.tensor_type.shape.dim)
        for v in [*inferred.value_info, *inferred.input, *inferred.output]
        if v.type.tensor_type.HasField("shape")
    }
    weights = {t.name: t for t in graph.initializer}
    constants = []

    def constant(name: str, value, dtype=np.float32) -> str:
        constants.append(numpy_helper.from_array(np.array(value, dtype), name))
        return name

    rewritten, row_zero_points = [], {}
    for node in graph.node:
        if node.op_type == "DynamicQuantizeLinear" and rank.get(node.input[0]) == 2:
            (x,), (quantised, scale, zero_point) = node.input, node.output
            p = f"{node.name}_rows"
            zero, levels = constant(f"{p}_0", 0.0), constant(f"{p}_255", 255.0)
            one, flat = constant(f"{p}_1", 1.0), constant(f"{p}_flat", [-1], np.int64)
            rewritten += [
                helper.make_node("ReduceMin", [x], [f"{p}_min"], axes=[1], keepdims=1),
                helper.make_node("ReduceMax", [x], [f"{p}_max"], axes=[1], keepdims=1),
                helper.make_node("Min", [f"{p}_min", zero], [f"{p}_low"]),
                helper.make_node("Max", [f"{p}_max", zero], [f"{p}_high"]),
                helper.make_node("Sub", [f"{p}_high", f"{p}_low"], [f"{p}_range"]),
                helper.make_node("Div", [f"{p}_range", levels], [f"{p}_step"]),
                # An all-zero row: scale 1, as DynamicQuantizeLinear takes it.
                helper.make_node("Equal", [f"{p}_range", zero], [f"{p}_empty"]),
                helper.make_node("Where", [f"{p}_empty", one, f"{p}_step"], [scale]),
                helper.make_node("Div", [f"{p}_low", scale], [f"{p}_low_steps"]),
                helper.make_node("Sub", [zero, f"{p}_low_steps"], [f"{p}_zp"]),
                helper.make_node("Clip", [f"{p}_zp", zero, levels], [f"{p}_zp_clipped"]),
                helper.make_node("Round", [f"{p}_zp_clipped"], [f"{p}_zp_rounded"]),
                helper.make_node("Cast", [f"{p}_zp_rounded"], [zero_point], to=TensorProto.UINT8),
                helper.make_node("Reshape", [scale, flat], [f"{p}_scale_1d"]),
                helper.make_node("Reshape", [zero_point, flat], [f"{p}_zp_1d"]),
                helper.make_node(
                    "QuantizeLinear", [x, f"{p}_scale_1d", f"{p}_zp_1d"], [quantised], axis=0
                ),
            ]
            row_zero_points[zero_point] = quantised
        elif node.op_type == "MatMulInteger" and node.input[2] in row_zero_points:
            a, b, a_zero_point, b_zero_point = node.input
            w = numpy_helper.to_array(weights[b]).astype(np.int64)
            w_zero_point = numpy_helper.to_array(weights[b_zero_point]).astype(np.int64)
            p = f"{node.name}_rows"
            column_sums = constant(f"{p}_colsum", (w - w_zero_point).sum(axis=0)[None, :], np.int32)
            rewritten += [
                helper.make_node("MatMulInteger", [a, b, "", b_zero_point], [f"{p}_raw"]),
                helper.make_node("Cast", [a_zero_point], [f"{p}_za"], to=TensorProto.INT32),
                helper.make_node("Mul", [f"{p}_za", column_sums], [f"{p}_shift"]),
                helper.make_node("Sub", [f"{p}_raw", f"{p}_shift"], list(node.output)),
            ]
        else:
            rewritten.append(node)
    del graph.node[:]
    graph.node.extend(rewritten)
    graph.initializer.extend(constants)
    return len(row_zero_points)


def convert_graph(source: Path, out: Path, precision: str) -> Path:
    """Writes `source` (an fp32 canis ONNX file) at `precision` to `out`, metadata carried."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision {precision!r}: choose one of {', '.join(PRECISIONS)}")
    model = onnx.load(str(source))
    meta = _metadata(model)
    if "canis.kind" not in meta:
        raise ValueError(f"{source}: not a canis model (no canis.* metadata)")
    if declared_precision(meta) != DEFAULT_PRECISION:
        raise ValueError(
            f"{source}: is already {declared_precision(meta)}; convert from the fp32 export"
        )
    with tempfile.TemporaryDirectory() as folder:
        converted = Path(folder) / "converted.onnx"
        if precision == "int8":
            from onnxruntime.quantization import QuantType, quantize_dynamic

            quantize_dynamic(
                source,
                converted,
                weight_type=QuantType.QInt8,
                per_channel=True,
                reduce_range=True,  # no saturation without VNNI (the module's docstring)
                nodes_to_exclude=gating_nodes(model),
            )
            model = onnx.load(str(converted))
            quantise_rows(model)
        elif precision == "fp16":
            from onnxruntime.transformers.float16 import convert_float_to_float16
            from onnxruntime.transformers.onnx_model import OnnxModel

            model = convert_float_to_float16(model, keep_io_types=True)
            # The converter appends its input casts after their readers; the ONNX checker
            # wants the nodes in order, which ONNX Runtime's own sort gives.
            OnnxModel(model).topological_sort()
        meta[PRECISION_KEY] = precision
        if precision != DEFAULT_PRECISION:
            meta["canis.precision_source"] = f"{source.name} sha256 {file_sha256(source)[:16]}"
            meta["canis.precision_tool"] = _tool(precision)
            meta["canis.converted"] = datetime.now(UTC).isoformat(timespec="seconds")
        _set_metadata(model, meta)
        onnx.checker.check_model(model)
        out.parent.mkdir(parents=True, exist_ok=True)
        onnx.save(model, str(out))
    return out


def _initializer(path: Path, name: str) -> np.ndarray:
    for tensor in onnx.load(str(path)).graph.initializer:
        if tensor.name == name:
            return numpy_helper.to_array(tensor)
    raise ValueError(f"{path}: has no {name!r} initializer")


def motion_parity(source: Path, variant: Path, rows: int = PARITY_ROWS, seed: int = 0) -> dict:
    """Variant vs fp32 source on random rows in the standardised range, through the runtime:
    max and mean |difference| of y in units of y's standard deviation, and of the other output
    as is where the model has one (MANN's expert weights, PFNN's phase change; the vanilla
    network has none)."""
    from canis.runtime.inference import MotionModel

    reference, candidate = MotionModel(source, device="cpu"), MotionModel(variant, device="cpu")
    rng = np.random.default_rng(seed)
    mean, std = _initializer(source, "x_mean"), _initializer(source, "x_std")
    x = (mean + std * rng.normal(size=(rows, mean.size))).astype(np.float32)
    phase = rng.uniform(0, 2 * np.pi, size=rows).astype(np.float32)
    want, got = reference.run(x, phase), candidate.run(x, phase)
    y_error = np.abs(got["y"] - want["y"]) / _initializer(source, "y_std")
    report = {
        "finite": bool(all(np.all(np.isfinite(v)) for v in got.values())),
        "y_max_error_std": float(y_error.max()),
        "y_mean_error_std": float(y_error.mean()),
    }
    for other in (n for n in want if n != "y"):
        report[f"{other}_max_abs_error"] = float(np.abs(got[other] - want[other]).max())
    return report


def transition_parity(source_step: Path, variant_step: Path, rows=8, frames=30, seed=0) -> dict:
    """Variant vs fp32 over whole generated transitions from random windows around the
    frame statistics: max and mean |difference| of the frames in units of their deviation."""
    from canis.runtime.transition import TransitionModel
    from canis.runtime.transition_frames import CONTEXT_FRAMES

    reference, candidate = TransitionModel(source_step), TransitionModel(variant_step)
    rng = np.random.default_rng(seed)
    mean, std = (
        _initializer(source_step, "model.frame_mean"),
        _initializer(source_step, "model.frame_std"),
    )
    context = mean + std * rng.normal(size=(rows, CONTEXT_FRAMES, mean.size))
    yaw = rng.uniform(-np.pi, np.pi, size=(rows, CONTEXT_FRAMES, 1))
    placements = np.concatenate(
        [rng.normal(size=(rows, CONTEXT_FRAMES, 2)), np.sin(yaw), np.cos(yaw)], axis=-1
    )
    target = mean + std * rng.normal(size=(rows, mean.size))
    want, _ = reference.generate(context, placements, target, frames)
    got, _ = candidate.generate(context, placements, target, frames)
    error = np.abs(got - want) / std
    return {
        "finite": bool(np.all(np.isfinite(got))),
        "frames_max_error_std": float(error.max()),
        "frames_mean_error_std": float(error.mean()),
    }


def _check(report: dict, out: Path, precision: str) -> None:
    mean = next(v for k, v in report.items() if k.endswith("mean_error_std"))
    if not report["finite"] or not mean <= MAX_MEAN_ERROR_STD:
        raise ValueError(
            f"{out}: the {precision} conversion is broken: "
            + ("non-finite outputs" if not report["finite"] else f"mean error {mean:.3f} std")
            + f" against its fp32 source (limit {MAX_MEAN_ERROR_STD} std)"
        )


def convert_motion_model(source: Path, out: Path, precision: str) -> dict:
    """A motion network at `precision`: written to `out` and checked; returns the check."""
    partial = out.with_name(out.name + ".partial.onnx")
    convert_graph(source, partial, precision)
    try:
        report = motion_parity(source, partial)
        _check(report, out, precision)
    except Exception:
        partial.unlink(missing_ok=True)
        raise
    partial.replace(out)
    return report | {"precision": precision, "bytes": out.stat().st_size, "source": str(source)}


def _init_of(step: Path) -> Path:
    return step.with_name(step.name.replace("_step", "_init"))


def convert_transition_model(source_step: Path, out_step: Path, precision: str) -> dict:
    """Both RTN graphs at `precision` (<out_step> and its _init sibling), checked over whole
    generated transitions; returns the check."""
    if "_step" not in out_step.name:
        raise ValueError(f"{out_step}: name the step graph <name>_step...onnx")
    with tempfile.TemporaryDirectory() as folder:
        partial_step = Path(folder) / out_step.name
        convert_graph(source_step, partial_step, precision)
        convert_graph(_init_of(source_step), _init_of(partial_step), precision)
        report = transition_parity(source_step, partial_step)
        _check(report, out_step, precision)
        out_step.parent.mkdir(parents=True, exist_ok=True)
        for path in (partial_step, _init_of(partial_step)):
            shutil.move(path, out_step.parent / path.name)
    sizes = {p.name: p.stat().st_size for p in (out_step, _init_of(out_step))}
    return report | {"precision": precision, "bytes": sizes, "source": str(source_step)}

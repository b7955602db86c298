"""The numeric precision of a model file: what its `canis.precision` metadata declares and what
its graph holds, which must agree. Reduced-precision files are made from an fp32 export by
ONNX Runtime's own tools (export/precision.py); the runtime loads any of them the same way.

The graph is read with the `onnx` package (the one parser of the format; ONNX Runtime does not
expose a loaded model's weights or operators), once per file at load.

ONNX Runtime sessions for the motion networks, with the model's metadata checked against
the runtime's contract at load. CUDA when the provider is present and starts, else CPU.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnxruntime as ort
from canis.runtime.features import FPS, layout_hash
from canis.runtime.skeleton import DOG_JOINT_NAMES

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


log = logging.getLogger("canis.runtime")
KINDS = ("mann", "pfnn", "vnn")


class ModelError(ValueError):
    """A model file that the runtime cannot use; the message names the file and the problem."""


def common_problems(
    path: Path, meta: dict[str, str], input_names, output_names, inputs, outputs
) -> list:
    """What every canis model must agree on with this runtime (frame rate, skeleton, tensor
    names, a precision its graph really has), as readable differences."""
    problems = precision_problems(path, meta)
    if meta.get("canis.fps") != str(FPS):
        problems.append(f"frame rate {meta.get('canis.fps')} is not {FPS}")
    try:
        joints = tuple(json.loads(meta.get("canis.joint_names", "[]")))
    except json.JSONDecodeError:
        joints = ()
    if joints != DOG_JOINT_NAMES:
        problems.append("joint names differ from the dog skeleton's")
    if list(input_names) != inputs:
        problems.append(f"inputs {list(input_names)} are not {inputs}")
    if list(output_names) != outputs:
        problems.append(f"outputs {list(output_names)} are not {outputs}")
    return problems


def check_metadata(path: Path, meta: dict[str, str], input_names, output_names) -> str:
    """The model's kind, or ModelError naming every way the model differs from the contract."""
    if "canis.kind" not in meta:
        raise ModelError(
            f"{path}: not a canis model (no canis.* metadata; export it with `canis export`)"
        )
    problems = []
    kind = meta["canis.kind"]
    if kind not in KINDS:
        problems.append(f"kind {kind!r} is not one of {', '.join(KINDS)}")
    if meta.get("canis.layout_hash") != layout_hash():
        problems.append(
            f"feature layout {meta.get('canis.layout_hash')} differs from the "
            f"runtime's {layout_hash()}"
        )
    expected_inputs = ["x", "phase"] if kind == "pfnn" else ["x"]
    expected_outputs = {"mann": ["y", "expert_weights"], "pfnn": ["y", "phase_delta"]}.get(
        kind, ["y"]
    )
    problems += common_problems(
        path, meta, input_names, output_names, expected_inputs, expected_outputs
    )
    if problems:
        raise ModelError(f"{path}: does not match this runtime: " + "; ".join(problems))
    return kind


def graph_experts(path: Path, model: MotionModel) -> int:
    """canis.experts, checked at load against the width of the graph's expert_weights output:
    the IO-binding buffers are sized by it, and a disagreement fails at the first step."""
    width = next(o.shape[-1] for o in model.session.get_outputs() if o.name == "expert_weights")
    experts = model.metadata.get("canis.experts", "")
    if not (experts.isdigit() and (int(experts) == width or not isinstance(width, int))):
        raise ModelError(
            f"{path}: canis.experts {experts!r} disagrees with the graph's {width} expert weights"
        )
    return int(experts)


@dataclass
class BoundBuffers:
    inputs: dict[str, np.ndarray]  # write x (N, 480) and, for PFNN, phase (N, 1) here
    outputs: dict[str, np.ndarray]  # read the results here after MotionModel.run_bound
    binding: object
    device_inputs: dict
    device_outputs: dict
    on_cpu: bool
    # The full-capacity arrays the inputs and outputs are the first rows of: dogs added
    # later reuse them until they run out, so the batch size changes without allocating.
    storage: dict[str, np.ndarray] | None = None


def cuda_device_present() -> bool:
    """Whether trying the CUDA provider makes sense. onnxruntime-gpu lists it even on machines
    without a GPU, where trying it only prints library-loading errors."""
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        return False
    return not sys.platform.startswith("linux") or os.path.exists("/dev/nvidiactl")


def open_session(path: Path, device: str = "auto", threads: int = 1):
    """(session, 'cuda' or 'cpu') for an ONNX file: the CUDA provider when asked for or, with
    'auto', when a GPU is present and it starts; otherwise, or if it fails, the CPU with a
    warning. A file ONNX Runtime cannot load raises ModelError naming it."""
    options = ort.SessionOptions()
    # One character's frame is a few small matmuls: more threads mostly add sync cost;
    # `canis bench` measures 1 vs 2.
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    wants_cuda = device == "cuda" or (device == "auto" and cuda_device_present())
    try:
        if wants_cuda:
            # A missing CUDA library makes ORT print errors before it falls back; say it
            # once, as one warning, instead.
            ort.set_default_logger_severity(4)
            try:
                session = ort.InferenceSession(
                    str(path),
                    options,
                    providers=["CUDAExecutionProvider", "CPUExecutionProvider"],
                )
                if "CUDAExecutionProvider" in session.get_providers():
                    return session, "cuda"
                log.warning("%s: CUDA provider did not start; running on CPU", path)
            except Exception as error:  # a broken CUDA install must not stop the game
                log.warning("%s: CUDA provider failed (%s); running on CPU", path, error)
            finally:
                ort.set_default_logger_severity(2)  # ORT's default: warnings and up
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        return session, "cpu"
    except Exception as error:  # ORT raises its own types for bad files
        message = unsupported_precision_message(path, error)
        raise ModelError(message or f"{path}: not a loadable ONNX model ({error})") from None


def check_model_file(path: Path, what: str = "model") -> None:
    """A clear error for a model path that is missing, a folder or unreadable, before ONNX
    Runtime gives its own less specific one."""
    if path.is_dir():
        raise FileNotFoundError(f"{path}: is a folder, not an ONNX {what} file")
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such {what} file")
    if not os.access(path, os.R_OK):
        raise PermissionError(f"{path}: the {what} file cannot be read (permission denied)")


class MotionModel:
    """One exported network. `run` takes x (N, 480) and, for PFNN, phase (N,)."""

    def __init__(self, path: str | Path, device: str = "auto", threads: int = 1):
        self.path = Path(path)
        check_model_file(self.path)
        self.session, self.device = open_session(self.path, device, threads)
        self.input_names = [i.name for i in self.session.get_inputs()]
        self.output_names = [o.name for o in self.session.get_outputs()]
        self.metadata = self.session.get_modelmeta().custom_metadata_map
        self.kind = check_metadata(self.path, self.metadata, self.input_names, self.output_names)
        self.experts = graph_experts(self.path, self) if self.kind == "mann" else None
        self.precision = declared_precision(self.metadata)

    def bind(self, batch: int, reuse: BoundBuffers | None = None) -> BoundBuffers:
        """Preallocated input and output buffers for `batch` characters, bound to the session
        (ONNX Runtime IO binding). Write x (and phase) into them in place and call
        run_bound(): nothing is allocated per frame, and on the CPU the session reads and
        writes these very arrays. On CUDA the inputs are copied to device buffers once per
        run and the outputs back."""
        binding = self.session.io_binding()
        storage = reuse.storage if reuse is not None else None
        rows = max(batch, MIN_ROWS)  # what the session runs; the caller sees `batch`
        if storage is None or len(storage["x"]) < rows:
            # Grown by doubling, so adding dogs one by one reallocates only log(N) times.
            old = 0 if storage is None else len(storage["x"])
            capacity = max(rows, 2 * old)
            widths = {"x": 480, "phase": 1, "y": 363, "expert_weights": self.experts}
            widths["phase_delta"] = 1
            names = ["x"] + (["phase"] if self.kind == "pfnn" else []) + list(self.output_names)
            storage = {n: np.zeros((capacity, widths[n]), dtype=np.float32) for n in names}
        # The leading rows of a C-contiguous array are contiguous: ORT reads them in place.
        bound_in = {n: storage[n][:rows] for n in ("x", "phase") if n in storage}
        bound_out = {n: storage[n][:rows] for n in self.output_names}
        device = "cuda" if self.device == "cuda" else "cpu"
        device_inputs = {}
        for name, array in bound_in.items():
            value = ort.OrtValue.ortvalue_from_numpy(array, device, 0)
            binding.bind_ortvalue_input(name, value)
            device_inputs[name] = value
        device_outputs = {}
        for name, array in bound_out.items():
            value = ort.OrtValue.ortvalue_from_numpy(array, device, 0)
            binding.bind_ortvalue_output(name, value)
            device_outputs[name] = value
        return BoundBuffers(
            {n: a[:batch] for n, a in bound_in.items()},
            {n: a[:batch] for n, a in bound_out.items()},
            binding,
            device_inputs,
            device_outputs,
            on_cpu=device == "cpu",
            storage=storage,
        )

    def run_bound(self, buffers: BoundBuffers) -> dict[str, np.ndarray]:
        if not buffers.on_cpu:
            rows = buffers.device_inputs["x"].shape()[0]  # MIN_ROWS or more: what runs
            for name in buffers.inputs:
                buffers.device_inputs[name].update_inplace(buffers.storage[name][:rows])
        self.session.run_with_iobinding(buffers.binding)
        if not buffers.on_cpu:
            for name, value in buffers.device_outputs.items():
                buffers.outputs[name][...] = value.numpy()[: len(buffers.outputs[name])]
        return buffers.outputs

    def run(self, x: np.ndarray, phase: np.ndarray | None = None) -> dict[str, np.ndarray]:
        feeds = {"x": np.ascontiguousarray(x, dtype=np.float32)}
        if self.kind == "pfnn":
            feeds["phase"] = np.ascontiguousarray(phase, dtype=np.float32).reshape(-1, 1)
        outputs = run_rows(self.session, self.output_names, feeds)
        return dict(zip(self.output_names, outputs, strict=True))


# A lone row goes through another matrix kernel than a batch's rows do (ONNX Runtime's CPU
# GEMM takes a vector path for one row), which rounds differently: a dog alone moved up to
# 4e-7 apart (fp32; a quantisation step apart at int8) from itself beside others. Run at least
# two rows, and every dog's output is the same in any batch.
MIN_ROWS = 2


def run_rows(session, output_names, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """session.run on feeds whose first axis is the batch, with a batch of one run as two
    rows (MIN_ROWS) and the first returned."""
    batch = len(next(iter(feeds.values())))
    if batch >= MIN_ROWS:
        return session.run(output_names, feeds)
    padded = {name: np.repeat(value, MIN_ROWS, axis=0) for name, value in feeds.items()}
    return [out[:batch] for out in session.run(output_names, padded)]


def infer(model: MotionModel, buffers: BoundBuffers, idle: bool) -> dict[str, np.ndarray]:
    """The inference stage: the model run on its bound buffers, or, when the network is `idle`
    (every dog plays a transition frame), last step's outputs, read by no one this step."""
    return buffers.outputs if idle else model.run_bound(buffers)

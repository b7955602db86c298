"""`canis bench`: inference timings of the shipped models, written as JSON and as
docs/RESULTS.md. Figures are medians and 99th percentiles over many calls, measured side by
side in one run; the machine they ran on is part of the report."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import onnxruntime as ort
from canis.runtime.inference import MotionModel
from canis.runtime.machine import (
    benchmark_machine,
    last_level_cache_bytes,
    machine_paragraph,
    read_bandwidth_gbps,
)
from canis.runtime.profiler import percentiles_ms
from canis.runtime.root import yaw_direction_xz

BATCHES = (1, 8, 64, 256)
THREADS = (1, 2)


def time_alternating(
    calls: dict, rounds: int = 20, block: int = 50, warmup: int = 5, clock=time.perf_counter
) -> dict:
    """Times several calls side by side in one process: `rounds` blocks of `block` calls of
    each in turn, the first `warmup` of every block not counted. Blocks rather than call by
    call so that each call finds the caches as it would alone (two sessions' weights together
    may not fit where one does), and alternating so that whatever else the machine does weighs
    on all alike. `clock`: wall time by default; time.thread_time counts only this thread's
    CPU (what a busy shared machine's descheduling leaves out). Returns {name: p50_ms,
    p99_ms, calls}."""
    samples = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            for i in range(block):
                start = clock()
                call()
                if i >= warmup:
                    samples[name].append(clock() - start)
    return {
        name: percentiles_ms(np.asarray(s) * 1e3, ("p50", "p99")) | {"calls": len(s)}
        for name, s in samples.items()
    }


def time_calls(call, repeats: int, warmup: int = 20) -> dict:
    for _ in range(warmup):
        call()
    samples = np.empty(repeats)
    for i in range(repeats):
        start = time.perf_counter()
        call()
        samples[i] = time.perf_counter() - start
    ms = samples * 1e3
    return percentiles_ms(ms, ("p50", "p99", "mean")) | {
        "calls": repeats,
        "samples_ms": np.round(ms, 4).tolist(),  # for `canis compare`
    }


def benchmark_inference(
    model_path: Path, batches=BATCHES, threads=THREADS, seconds_per_case: float = 2.0
) -> list[dict]:
    rows = []
    rng = np.random.default_rng(0)
    for thread_count in threads:
        model = MotionModel(model_path, device="cpu", threads=thread_count)
        for batch in batches:
            x = rng.normal(size=(batch, 480)).astype(np.float32)
            phase = rng.uniform(0, 6.28, size=batch).astype(np.float32)
            once = time_calls(lambda: model.run(x, phase), repeats=5, warmup=3)  # noqa: B023
            repeats = int(np.clip(seconds_per_case / max(once["mean_ms"] / 1e3, 1e-6), 50, 5000))
            result = time_calls(lambda: model.run(x, phase), repeats)  # noqa: B023
            result |= {
                "model": model.kind,
                "file": Path(model_path).name,
                "device": "cpu",
                "threads": thread_count,
                "batch": batch,
                "per_character_ms": result["p50_ms"] / batch,
            }
            rows.append(result)
    return rows


def trotting_control(count: int):
    """N dogs asked to trot at 1.9 m/s, facing evenly spread directions."""
    from canis.runtime.features import ACTIONS
    from canis.runtime.trajectory import ControlState

    facing = np.linspace(0, 2 * np.pi, count, endpoint=False)
    return ControlState(
        1.9 * yaw_direction_xz(facing), facing, np.full(count, ACTIONS.index("move"))
    )


def benchmark_frames(
    model_path: Path,
    counts=BATCHES,
    terrain: str = "hills",
    frames: int = 600,
    foot_lock: bool = False,
    paced: bool = False,
) -> list[dict]:
    """Whole controller frames (everything but drawing) for N dogs trotting on a terrain.
    `paced`: a frame starts every 1/60 s, the rest of the period slept, as a game's (`canis
    run --pace`); back to back otherwise, the frame's floor (its caches stay warm)."""
    from canis.runtime.controller import Controller
    from canis.runtime.loop import wait_for_next_tick
    from canis.runtime.terrain import procedural

    rows = []
    model = MotionModel(model_path, device="cpu", threads=1)
    for count in counts:
        controller = Controller(
            model, count=count, terrain=procedural(terrain), foot_lock=foot_lock
        )
        control = trotting_control(count)
        steps = max(60, frames // max(1, count // 8))
        for _ in range(30):  # warm-up
            controller.step(control)
            controller.profiler.end_frame()
        controller.profiler = type(controller.profiler)()
        tick_s = time.perf_counter()
        for _ in range(steps):
            if paced:
                tick_s = wait_for_next_tick(tick_s)
            controller.step(control)
            controller.profiler.end_frame()
        stages = controller.profiler.summary()["stages"]
        rows.append(
            {
                "model": model.kind,
                "characters": count,
                "terrain": terrain,
                "foot_lock": foot_lock,
                "paced": paced,
                "frames": steps,
                "stages": stages,
                "samples": controller.profiler.samples(),  # for `canis compare`
                "frame_ms_per_character": stages["frame"]["p50_ms"] / count,
            }
        )
    return rows


def weight_bytes_per_frame(path: Path) -> int:
    """Bytes of weights one inference reads: every initializer and constant of the graph."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(path))
    total = 0
    tensors = list(model.graph.initializer) + [
        a.t for n in model.graph.node if n.op_type == "Constant" for a in n.attribute if a.t
    ]
    for tensor in tensors:
        total += numpy_helper.to_array(tensor).nbytes
    return total


def memory_floor(path: Path) -> dict:
    """Why a model is fast or slow here: the weight bytes one batch-1 inference reads, the rate
    one thread reads a working set of that size on this machine (from cache when it fits in
    the last-level cache, else from memory), and the time that reading alone takes."""
    weight_bytes = weight_bytes_per_frame(path)
    gbps = read_bandwidth_gbps(weight_bytes)
    cache = last_level_cache_bytes()
    return {
        "weight_bytes": weight_bytes,
        "fits_last_level_cache": cache is not None and weight_bytes <= cache,
        "read_gbps_at_size": gbps,
        "read_floor_ms": weight_bytes / gbps / 1e6,
    }


def raw_onnxruntime_floor(
    path: Path, threads: int = 1, batch: int = 1, rounds: int = 20, block: int = 50
) -> dict:
    """The same file run by a bare ONNX Runtime session (its default options, the same thread
    count, inputs and outputs bound once) beside the runtime's own call as the controller
    makes it (MotionModel.run_bound), timed in `rounds` alternating blocks of `block` calls:
    the ratio is what the runtime adds to ONNX Runtime's own floor."""
    model = MotionModel(path, device="cpu", threads=threads)
    buffers = model.bind(batch)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    binding = session.io_binding()
    rng = np.random.default_rng(0)
    for name, array in buffers.inputs.items():
        array[...] = rng.normal(size=array.shape)
        binding.bind_cpu_input(name, array.copy())
    for name in buffers.outputs:
        binding.bind_output(name, "cpu")
    timings = time_alternating(
        {
            "onnxruntime": lambda: session.run_with_iobinding(binding),
            "runtime": lambda: model.run_bound(buffers),
        },
        rounds=rounds,
        block=block,
    )
    return timings | {
        "ratio": timings["runtime"]["p50_ms"] / timings["onnxruntime"]["p50_ms"],
        "threads": threads,
        "batch": batch,
    }


def model_size_mb(path: Path) -> float:
    return Path(path).stat().st_size / 1e6


_MEMORY_PROBE = """
import sys, numpy as np
from canis.runtime.inference import MotionModel
from canis.tools.soak import rss_mb
before = rss_mb()
model = MotionModel(sys.argv[1], device="cpu", threads=1)
model.run(np.zeros((1, 480), np.float32), np.zeros(1, np.float32))
print(rss_mb() - before)
"""


def session_memory_mb(path: Path) -> float:
    """Resident memory one loaded model adds (session, weights, one run's buffers), measured
    in a fresh process so models measured before it do not blur the figure."""
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", _MEMORY_PROBE, str(path)],
        capture_output=True,
        text=True,
        check=True,
    )
    return float(out.stdout.strip().splitlines()[-1])


def markdown(report: dict) -> str:
    m = report["machine"]
    lines = [
        "## The last `canis bench` run",
        "",
        f"Measured {m['date']} by `canis bench` on this machine: {machine_paragraph(m)} "
        "CPU only: no CUDA GPU was available to this run. Reproduce with `./run canis bench --json "
        "bench.json`; compare two such files with `canis compare`.",
        "",
        *_floor_section(report),
        "## Inference (ONNX Runtime, CPU execution provider)",
        "",
        "One call steps a whole batch of characters. Medians (p50) and 99th percentiles (p99)",
        "over repeated calls with random inputs. Memory: the resident memory one loaded model",
        "adds (session, weights, one run), measured in a fresh process.",
        "",
        "| model | kind | precision | file size | memory | threads | batch | p50 ms | p99 ms | "
        "p50 per character ms |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in report["inference"]:
        memory = report.get("memory_mb", {}).get(row["file"])
        lines.append(
            f"| {row['file']} | {row['model']} | "
            f"{report.get('precisions', {}).get(row['file'], 'fp32')} | "
            f"{report['sizes_mb'][row['file']]:.1f} MB | "
            + (f"{memory:.1f} MB" if memory is not None else "")
            + f" | {row['threads']} | {row['batch']} | {row['p50_ms']:.3f} | "
            f"{row['p99_ms']:.3f} | {row['per_character_ms']:.4f} |"
        )
    one = report["frames"][0]["stages"]
    lines += [
        "",
        f"## Whole frames ({report['frame_model']}, one thread, trotting on rolling hills)",
        "",
        "Everything a game calls per 1/60 s step except drawing: command smoothing (input),",
        "trajectory, features, inference, decode and root update, display pose with full-body",
        "IK (ik). One dog:",
        "",
        "| stage | p50 ms | p99 ms |",
        "|---|---|---|",
    ]
    lines += [f"| {name} | {v['p50_ms']:.3f} | {v['p99_ms']:.3f} |" for name, v in one.items()]
    lines += [
        "",
        f"Outside inference: {report['non_inference_ms_p50']:.3f} ms (sum of stage medians).",
        "",
        "Batch scaling: N dogs stepped by one inference call per frame.",
        "",
        "| dogs | frame p50 ms | frame p99 ms | inference p50 ms | ik p50 ms | "
        "ik per dog ms | frame per dog ms |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in report["frames"]:
        lines.append(_frame_row(row))
    if report.get("frames_foot_lock"):
        lines += [
            "",
            "With the foot lock on (`Controller(foot_lock=True)`, runtime/kinematics.py: one "
            "native CCD per leg after the terrain IK, timed in the ik stage), same run:",
            "",
            "| dogs | frame p50 ms | frame p99 ms | inference p50 ms | ik p50 ms | "
            "ik per dog ms | frame per dog ms |",
            "|---|---|---|---|---|---|---|",
        ]
        lines += [_frame_row(row) for row in report["frames_foot_lock"]]
    if report.get("frames_paced"):
        paced = report["frames_paced"][0]["stages"]
        back_to_back = report["frames"][0]["stages"]
        lines += [
            "",
            "Paced as a game's frames (a frame every 1/60 s, the rest of the period slept, as "
            "`canis run --pace` does), one dog, same run:",
            "",
            "| frames | frame p50 ms | frame p99 ms | inference p50 ms | outside inference ms |",
            "|---|---|---|---|---|",
            *(
                f"| {name} | {st['frame']['p50_ms']:.3f} | {st['frame']['p99_ms']:.3f} | "
                f"{st['inference']['p50_ms']:.3f} | {outside_inference_ms(st):.3f} |"
                for name, st in (("back to back", back_to_back), ("paced", paced))
            ),
            "",
            "After a sleep a frame finds its weights and state out of the caches: the paced "
            f"frame is {paced['frame']['p50_ms'] / back_to_back['frame']['p50_ms']:.1f}x the "
            "back-to-back one at the median here, nearer what a game's frame pays.",
        ]
    text = "\n".join(lines) + "\n"
    if report.get("readouts"):
        from canis.evaluation import readout_benchmark  # it times with this module's tools

        text += readout_benchmark.markdown(report["readouts"])
    return text


def _floor_section(report: dict) -> list[str]:
    floors = report.get("floors")
    if not floors:
        return []
    lines = [
        "## Why a model is fast or slow here",
        "",
        "At one dog a frame, inference is mostly reading the weights: every weight is read",
        "once per call. *Weights read* counts them per batch-1 inference (the gating-sparsity",
        "experiment reads only its top experts' share). *Read rate* is how fast one thread",
        "reads a working set of that size on this machine (from the last-level cache when it",
        "fits, from memory when not), and *read floor* the time that reading alone takes.",
        "*ONNX Runtime* is the same file in a bare ONNX Runtime session (default options, one",
        "thread, inputs and outputs bound once) and *runtime* the call the controller makes",
        "(`MotionModel.run_bound`), timed side by side in alternating blocks of 50 calls; the",
        "target is runtime <= 1.1x ONNX Runtime. A working set under the cache's size can still",
        "read slowly (the last-level cache is shared with the other core and, in a virtual",
        "machine, with other tenants): the read rate is measured, not assumed.",
        "",
        "| model | precision | weights read | fits in last-level cache | read rate GB/s | "
        "read floor ms | ONNX Runtime p50 ms | runtime p50 ms | runtime / ONNX Runtime |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, f in floors.items():
        lines.append(
            f"| {name} | {report['precisions'][name]} | {f['weight_bytes'] / 1e6:.1f} MB | "
            f"{'yes' if f['fits_last_level_cache'] else 'no'} | {f['read_gbps_at_size']:.1f} | "
            f"{f['read_floor_ms']:.3f} | {f['onnxruntime']['p50_ms']:.3f} | "
            f"{f['runtime']['p50_ms']:.3f} | {f['ratio']:.2f}x |"
        )
    return lines + [""]


def _frame_row(row: dict) -> str:
    stages, n = row["stages"], row["characters"]
    return (
        f"| {n} | {stages['frame']['p50_ms']:.3f} | {stages['frame']['p99_ms']:.3f} | "
        f"{stages['inference']['p50_ms']:.3f} | {stages['ik']['p50_ms']:.3f} | "
        f"{stages['ik']['p50_ms'] / n:.4f} | {row['frame_ms_per_character']:.4f} |"
    )


def run_benchmarks(
    models: list[Path], seconds_per_case: float = 2.0, frame_model: Path | None = None
) -> dict:
    inference = []
    for path in models:
        inference += benchmark_inference(path, seconds_per_case=seconds_per_case)
    default = frame_model or models[0]
    frames = benchmark_frames(default)
    locked = benchmark_frames(default, counts=(1, 64), foot_lock=True)
    paced = benchmark_frames(default, counts=(1,), frames=240, paced=True)
    from canis.evaluation.readout_benchmark import benchmark_readouts

    one = frames[0]["stages"]
    return {
        "machine": benchmark_machine(),
        "inference": inference,
        "floors": {Path(p).name: memory_floor(p) | raw_onnxruntime_floor(p) for p in models},
        "precisions": {Path(p).name: MotionModel(p, device="cpu").precision for p in models},
        "frames": frames,
        "frames_foot_lock": locked,
        "frames_paced": paced,
        "readouts": benchmark_readouts(default),
        "sizes_mb": {Path(p).name: model_size_mb(p) for p in models},
        "memory_mb": {Path(p).name: session_memory_mb(p) for p in models},
        "frame_model": Path(default).name,
        "frame_ms_p50": one["frame"]["p50_ms"],
        "frame_ms_p99": one["frame"]["p99_ms"],
        "inference_ms_p50": one["inference"]["p50_ms"],
        "ik_ms_p50": one["ik"]["p50_ms"],
        "non_inference_ms_p50": outside_inference_ms(one),
    }


def outside_inference_ms(stages: dict) -> float:
    """The per-frame work outside inference: the sum of the other stages' medians."""
    return sum(v["p50_ms"] for k, v in stages.items() if k not in ("frame", "inference"))

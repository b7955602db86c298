"""`canis bench`: inference timings of the shipped models, written as JSON and as
docs/BENCHMARKS.md. Figures are medians and 99th percentiles over many calls, measured side by
side in one run; the machine they ran on is part of the report."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
from canis.runtime.inference import MotionModel
from canis.runtime.machine import describe_machine
from canis.runtime.root import yaw_direction_xz

BATCHES = (1, 8, 64, 256)
THREADS = (1, 2)


def machine() -> dict:
    """The shared machine description (canis.runtime.machine), as every report gives it."""
    return describe_machine()


def machine_line(m: dict) -> str:
    """The machine description in one sentence, for reports."""
    caches = ", ".join(f"{k} {v}" for k, v in m.get("caches", {}).items())
    return (
        f"{m['cpu']} (family {m.get('cpu_family')}, model {m.get('cpu_model_number')}, "
        f"stepping {m.get('cpu_stepping')}; {m.get('clock_mhz') or 0:.0f} MHz; {caches}; "
        f"{' '.join(m.get('flags', []))}), {m['logical_cores']} logical cores "
        f"({m.get('usable_cores')} usable), {m.get('os')}, Python {m.get('python')}, numpy "
        f"{m.get('numpy')}, ONNX Runtime {m['onnxruntime']}, canis {m.get('canis')} at "
        f"commit {m.get('commit') or 'unknown'}"
    )


def time_calls(call, repeats: int, warmup: int = 20) -> dict:
    for _ in range(warmup):
        call()
    samples = np.empty(repeats)
    for i in range(repeats):
        start = time.perf_counter()
        call()
        samples[i] = time.perf_counter() - start
    ms = samples * 1e3
    return {
        "p50_ms": float(np.median(ms)),
        "p99_ms": float(np.percentile(ms, 99)),
        "mean_ms": float(ms.mean()),
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


def benchmark_frames(
    model_path: Path,
    counts=BATCHES,
    terrain: str = "hills",
    frames: int = 600,
    foot_lock: bool = False,
) -> list[dict]:
    """Whole controller frames (everything but drawing) for N dogs trotting on a terrain."""
    from canis.runtime.controller import Controller
    from canis.runtime.features import ACTIONS
    from canis.runtime.terrain import procedural
    from canis.runtime.trajectory import ControlState

    rows = []
    model = MotionModel(model_path, device="cpu", threads=1)
    for count in counts:
        controller = Controller(
            model, count=count, terrain=procedural(terrain), foot_lock=foot_lock
        )
        facing = np.linspace(0, 2 * np.pi, count, endpoint=False)
        control = ControlState(
            1.9 * yaw_direction_xz(facing),
            facing,
            np.full(count, ACTIONS.index("move")),
        )
        steps = max(60, frames // max(1, count // 8))
        for _ in range(30):  # warm-up
            controller.step(control)
            controller.profiler.end_frame()
        controller.profiler = type(controller.profiler)()
        for _ in range(steps):
            controller.step(control)
            controller.profiler.end_frame()
        stages = controller.profiler.summary()["stages"]
        rows.append(
            {
                "model": model.kind,
                "characters": count,
                "terrain": terrain,
                "foot_lock": foot_lock,
                "frames": steps,
                "stages": stages,
                "samples": controller.profiler.samples(),  # for `canis compare`
                "frame_ms_per_character": stages["frame"]["p50_ms"] / count,
            }
        )
    return rows


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
        "# Benchmarks",
        "",
        f"Measured {m['date']} by `canis bench` on {machine_line(m)}. CPU only: no CUDA "
        "GPU was available to this run. Reproduce with `./run canis bench --json bench.json`; "
        "compare two such files with `canis compare`.",
        "",
        "## Inference (ONNX Runtime, CPU execution provider)",
        "",
        "One call steps a whole batch of characters. Medians (p50) and 99th percentiles (p99)",
        "over repeated calls with random inputs. Every model is float32: the runtime offers no",
        "reduced-precision variant. Memory: the resident memory one loaded model adds (session,",
        "weights, one run), measured in a fresh process.",
        "",
        "| model | kind | file size | memory | threads | batch | p50 ms | p99 ms | "
        "p50 per character ms |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in report["inference"]:
        memory = report.get("memory_mb", {}).get(row["file"])
        lines.append(
            f"| {row['file']} | {row['model']} | {report['sizes_mb'][row['file']]:.1f} MB | "
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
    lines += [
        f"| {name} | {v['p50_ms']:.3f} | {v['p99_ms']:.3f} |"
        for name, v in one.items()
        if name != "render"
    ]
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
            "With the foot lock on (`Controller(foot_lock=True)`, runtime/foot_lock.py: one "
            "native CCD per leg after the terrain IK, timed in the ik stage), same run:",
            "",
            "| dogs | frame p50 ms | frame p99 ms | inference p50 ms | ik p50 ms | "
            "ik per dog ms | frame per dog ms |",
            "|---|---|---|---|---|---|---|",
        ]
        lines += [_frame_row(row) for row in report["frames_foot_lock"]]
    return "\n".join(lines) + "\n"


def _frame_row(row: dict) -> str:
    stages, n = row["stages"], row["characters"]
    return (
        f"| {n} | {stages['frame']['p50_ms']:.3f} | {stages['frame']['p99_ms']:.3f} | "
        f"{stages['inference']['p50_ms']:.3f} | {stages['ik']['p50_ms']:.3f} | "
        f"{stages['ik']['p50_ms'] / n:.4f} | {row['frame_ms_per_character']:.4f} |"
    )


def run_benchmarks(models: list[Path], seconds_per_case: float = 2.0) -> dict:
    inference = []
    for path in models:
        inference += benchmark_inference(path, seconds_per_case=seconds_per_case)
    default = next((p for p in models if Path(p).name == "mann8.onnx"), models[0])
    frames = benchmark_frames(default)
    locked = benchmark_frames(default, counts=(1, 64), foot_lock=True)
    one = frames[0]["stages"]
    return {
        "machine": machine(),
        "inference": inference,
        "frames": frames,
        "frames_foot_lock": locked,
        "sizes_mb": {Path(p).name: model_size_mb(p) for p in models},
        "memory_mb": {Path(p).name: session_memory_mb(p) for p in models},
        "frame_model": Path(default).name,
        "frame_ms_p50": one["frame"]["p50_ms"],
        "frame_ms_p99": one["frame"]["p99_ms"],
        "inference_ms_p50": one["inference"]["p50_ms"],
        "ik_ms_p50": one["ik"]["p50_ms"],
        "non_inference_ms_p50": sum(
            v["p50_ms"] for k, v in one.items() if k not in ("frame", "inference")
        ),
    }

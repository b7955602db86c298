"""`canis bench`'s comparison of the per-frame math in the native core (runtime/native_frame.py,
the default) with the numpy code that defines it (`Controller(native_frame=False)`): the same
model and dogs trotting on the hills, the two controllers stepped in alternating blocks, so
that whatever else the machine does weighs on both alike. Stage times are the profiler's, per
frame; "outside inference" is each frame's input + trajectory + features + decode + ik.

`python -m canis.evaluation.native_frame_benchmark` prints the table."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from canis.runtime.inference import MotionModel
from canis.runtime.profiler import Profiler

OUTSIDE = ("input", "trajectory", "features", "decode", "ik")
KINDS = {"numpy": False, "native": True}


def benchmark_native_frame(
    model_path: Path, counts=(1, 64), rounds: int = 10, block: int = 100
) -> list[dict]:
    from canis.evaluation.benchmark import trotting_control
    from canis.runtime.controller import Controller
    from canis.runtime.terrain import procedural

    model = MotionModel(model_path, device="cpu", threads=1)
    rows = []
    for count in counts:
        controllers = {
            kind: Controller(model, count=count, terrain=procedural("hills"), native_frame=native)
            for kind, native in KINDS.items()
        }
        control = trotting_control(count)
        frames = {kind: [] for kind in KINDS}
        for round_ in range(rounds + 1):  # the first round warms up, and is not kept
            for kind, controller in controllers.items():
                controller.profiler = Profiler(max_frames=block)
                for _ in range(block):
                    controller.step(control)
                    controller.profiler.end_frame()
                if round_:
                    frames[kind].append(controller.profiler.samples())
        row = {"characters": count, "frames": rounds * block}
        for kind, blocks in frames.items():

            def stage(name, blocks=blocks):
                return np.concatenate([b[name] for b in blocks])

            outside = sum(stage(name) for name in OUTSIDE)
            row[kind] = {
                "frame_p50_ms": float(np.median(stage("frame"))),
                "frame_p99_ms": float(np.percentile(stage("frame"), 99)),
                "outside_p50_ms": float(np.median(outside)),
                "outside_p99_ms": float(np.percentile(outside, 99)),
            } | {f"{name}_p50_ms": float(np.median(stage(name))) for name in OUTSIDE}
        rows.append(row)
    return rows


def markdown(rows: list[dict]) -> str:
    lines = [
        "",
        "## The per-frame math: the native core against its numpy definition",
        "",
        "The trajectory stage (the future extrapolated and blended, the samples turned into the",
        "root frame and written into x), the root update (root, next pose, predicted future,",
        "history) and the shown pose (rotations, IK and FK; runtime/display.py: up to the",
        "foot lock when it is on) are one native call each (runtime/native_frame.py, the",
        "default); "
        "`Controller(native_frame=False)` runs the numpy code that defines them (the same motion",
        "to float64 rounding: tests/test_native_frame.py). The two controllers trot on the hills",
        "with the model above, stepped in alternating blocks of frames; stage medians per frame "
        "(ms).",
        "",
        "| dogs | math | input | trajectory | features | decode | ik | outside inference p50 / "
        "p99 | frame p50 / p99 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        for kind in KINDS:
            r = row[kind]
            lines.append(
                f"| {row['characters']} | {kind} | "
                + " | ".join(f"{r[f'{name}_p50_ms']:.3f}" for name in OUTSIDE)
                + f" | {r['outside_p50_ms']:.3f} / {r['outside_p99_ms']:.3f} | "
                f"{r['frame_p50_ms']:.3f} / {r['frame_p99_ms']:.3f} |"
            )
    lines.append("")
    lines += [
        f"{row['characters']} dog(s): outside inference "
        f"{row['native']['outside_p50_ms'] / row['numpy']['outside_p50_ms']:.2f}x, whole frame "
        f"{row['native']['frame_p50_ms'] / row['numpy']['frame_p50_ms']:.2f}x at the median "
        "(native / numpy)."
        for row in rows
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    from canis.runtime.assets import shipped_model_path
    from canis.runtime.machine import benchmark_machine, machine_paragraph

    print(machine_paragraph(benchmark_machine()))
    print(markdown(benchmark_native_frame(shipped_model_path())))

"""`canis bench`: what reading every dog's readouts each step costs beside the step itself.

Two controllers of the same dogs trotting on the same terrain are stepped side by side in
alternating blocks (benchmark.time_alternating): one only steps, the other steps and then
reads everything a game might each frame: gaits, footfalls, contacts, ground heights, bounds,
events and the pose to draw. The target is step + readouts <= READOUT_TARGET_RATIO x the
step alone at READOUT_DOGS dogs, on the CPU."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
from canis.evaluation.benchmark import time_alternating, trotting_control
from canis.runtime.inference import MotionModel
from canis.runtime.machine import benchmark_machine, machine_paragraph
from canis.runtime.profiler import percentiles_ms

READOUT_DOGS = 256
READOUT_TARGET_RATIO = 1.2


def read_everything(dogs) -> None:
    """Every per-step readout of every dog, as a game with all of them in use reads them."""
    dogs.gaits()
    dogs.footfalls()
    dogs.contacts  # noqa: B018 (a readout: an attribute, read)
    dogs.ground_height_m()
    dogs.bounds_m()
    dogs.events()
    dogs.display_pose()


def benchmark_readouts(
    model_path: Path,
    count: int = READOUT_DOGS,
    terrain: str = "hills",
    rounds: int = 60,
    block: int = 10,
) -> dict:
    """Medians and p99s (ms) of the step alone and of the step with every readout, side by
    side in one run (`rounds` alternating blocks of `block` steps, the first 2 of each not
    counted: short blocks, so that the shared machine's slow spells fall on both alike), one
    thread, and their ratios; and the readouts' own time inside the second."""
    from canis.runtime.controller import Controller
    from canis.runtime.terrain import procedural

    model = MotionModel(model_path, device="cpu", threads=1)
    alone, reading = (Controller(model, count=count, terrain=procedural(terrain)) for _ in range(2))
    control = trotting_control(count)
    for _ in range(30):  # past the start, where the dogs stand: a trot's footfalls
        alone.step(control)
        reading.step(control)

    readouts_s = []

    def step_and_read() -> None:
        reading.step(control)
        started = time.perf_counter()
        read_everything(reading)
        readouts_s.append(time.perf_counter() - started)

    timed = time_alternating(
        {"step": lambda: alone.step(control), "step_and_readouts": step_and_read},
        rounds=rounds,
        block=block,
        warmup=2,
    )
    step, both = timed["step"], timed["step_and_readouts"]
    readouts = percentiles_ms(np.asarray(readouts_s) * 1e3, ("p50", "p99"))
    return {
        "model": model.kind,
        "file": Path(model_path).name,
        "characters": count,
        "terrain": terrain,
        "step": step,
        "step_and_readouts": both,
        "readouts": readouts | {"calls": len(readouts_s)},
        "ratio_p50": both["p50_ms"] / step["p50_ms"],
        "ratio_p99": both["p99_ms"] / step["p99_ms"],
        "target_ratio": READOUT_TARGET_RATIO,
    }


def markdown(report: dict, machine: dict | None = None) -> str:
    """The readouts' section of the bench page (`machine`: named when run on its own)."""
    where = f" Measured on this machine: {machine_paragraph(machine)}" if machine else ""
    return "\n".join(
        [
            "",
            f"## Readouts ({report['file']}, {report['characters']} dogs trotting on "
            f"{report['terrain']}, one thread, CPU)",
            "",
            "A step alone against a step followed by every readout a game may call each frame "
            "(`gaits()`, `footfalls()`, `contacts`, `ground_height_m()`, `bounds_m()`, "
            "`events()`, `display_pose()`), two controllers timed side by side in alternating "
            f"blocks. Target: at most {report['target_ratio']:.1f}x the step alone.{where}",
            "",
            "| | p50 ms | p99 ms | calls |",
            "|---|---|---|---|",
            *(
                f"| {name} | {report[key]['p50_ms']:.2f} | {report[key]['p99_ms']:.2f} | "
                f"{report[key]['calls']} |"
                for name, key in (("step", "step"), ("step + readouts", "step_and_readouts"))
            ),
            f"| ratio | {report['ratio_p50']:.3f}x | {report['ratio_p99']:.3f}x | |",
            "",
            f"The readouts alone, timed inside the second: p50 {report['readouts']['p50_ms']:.2f} "
            f"ms, p99 {report['readouts']['p99_ms']:.2f} ms (the rest of the difference is the "
            "step after them finding less of its data in the caches, and the machine's noise).",
            "",
        ]
    )


def run_readouts_only(model_path: Path) -> dict:
    """`canis bench --readouts-only`: this benchmark alone, with the machine it ran on."""
    return {"machine": benchmark_machine(), "readouts": benchmark_readouts(model_path)}

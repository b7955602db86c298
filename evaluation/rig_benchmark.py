"""`canis bench --rig FILE`: what retargeting onto a rig (runtime/retarget.py) costs a frame.

Two controllers of N dogs trotting (evaluation/benchmark.py trotting_control), stepped side
by side in one process (benchmark.time_alternating: blocks of each in turn, so the machine's
other work weighs on both alike): the built-in dog on the terrain with its IK and foot lock,
and the same dogs retargeted onto the rig (the controller on flat ground, the rig's own
display stage on the terrain with its IK and foot lock). Each call is a whole frame, the
rig's update included.
"""

from __future__ import annotations

import time
from pathlib import Path

from canis.evaluation.benchmark import time_alternating, trotting_control
from canis.runtime.machine import describe_machine, model_used


def benchmark_rig_frames(
    model_path: Path,
    rig_path: Path,
    count: int = 64,
    terrain: str = "hills",
    rounds: int = 20,
    block: int = 50,
) -> dict:
    from canis.runtime.controller import Controller
    from canis.runtime.inference import MotionModel
    from canis.runtime.retarget import RigDogs
    from canis.runtime.rig import Rig
    from canis.runtime.terrain import procedural

    rig = Rig.load(rig_path)  # a bad rig is refused before any timing
    model = MotionModel(model_path, device="cpu", threads=1)
    ground = procedural(terrain)
    plain = Controller(model, count=count, terrain=ground, foot_lock=True)
    network = Controller(model, count=count)
    dogs = RigDogs(network, rig, terrain=ground, foot_lock=True)
    control = trotting_control(count)
    asked = dogs.control(control)

    def plain_frame():
        plain.step(control)
        plain.profiler.end_frame()

    def rig_frame():
        network.step(asked)
        dogs.update()
        network.profiler.end_frame()

    for _ in range(30):  # both walking before any frame is timed
        plain_frame()
        rig_frame()
    calls = {"plain": plain_frame, "rig": rig_frame}
    timed = time_alternating(calls, rounds, block)
    cpu = time_alternating(calls, rounds, block, clock=time.thread_time)
    return {
        "report": "canis bench --rig",
        "rig": str(rig_path),
        "characters": count,
        "terrain": terrain,
        "foot_lock": True,
        "frames": timed,
        "ratio_p50": timed["rig"]["p50_ms"] / timed["plain"]["p50_ms"],
        "ratio_p99": timed["rig"]["p99_ms"] / timed["plain"]["p99_ms"],
        # The same frames timed again by this thread's CPU time: on a shared machine the wall
        # times above carry other processes' work, which the thread's CPU time does not.
        "cpu": cpu,
        "cpu_ratio_p50": cpu["rig"]["p50_ms"] / cpu["plain"]["p50_ms"],
        "cpu_ratio_p99": cpu["rig"]["p99_ms"] / cpu["plain"]["p99_ms"],
        "machine": describe_machine(**model_used(model)),
    }


def summary_line(report: dict) -> str:
    plain, rig, cpu = report["frames"]["plain"], report["frames"]["rig"], report["cpu"]
    return (
        f"{report['characters']} dogs on {report['terrain']} (foot lock on), frames side by side: "
        f"built-in dog p50 {plain['p50_ms']:.3f} ms, p99 {plain['p99_ms']:.3f} ms; on "
        f"{Path(report['rig']).name} p50 {rig['p50_ms']:.3f} ms, p99 {rig['p99_ms']:.3f} ms; "
        f"ratio p50 {report['ratio_p50']:.2f}x, p99 {report['ratio_p99']:.2f}x; by thread CPU "
        f"time p50 {cpu['plain']['p50_ms']:.3f} against {cpu['rig']['p50_ms']:.3f} ms, ratio "
        f"p50 {report['cpu_ratio_p50']:.2f}x, p99 {report['cpu_ratio_p99']:.2f}x "
        f"({report['machine'].get('cpu', 'CPU unknown')})"
    )

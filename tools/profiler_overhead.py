"""What the Profiler costs a frame: `python -m canis.tools.profiler_overhead`. Times frames of
seven empty stages with and without keep_trace, and the clock calls they are built on;
medians of 7 rounds of 3000 frames (200,000 calls for the clocks), interleaved. A frame's cost
is given in wall time and in the thread's CPU time: on a loaded machine the wall time also
counts the time the thread waited for a core, the CPU time does not."""

from __future__ import annotations

import time

import numpy as np
from canis.runtime.profiler import STAGES, Profiler


def frame_cost_us(keep_trace: bool, frames: int = 3000, clock=time.perf_counter_ns) -> float:
    profiler = Profiler(keep_trace=keep_trace)
    velocity, experts = np.ones((1, 2)), np.full((1, 8), 0.125)
    start = clock()
    for _ in range(frames):
        profiler.begin_frame()
        for name in STAGES[:7]:
            with profiler.stage(name):
                pass
        profiler.end_step(1, velocity, experts)
        profiler.end_frame()
    return (clock() - start) / frames / 1e3


def call_cost_ns(clock, calls: int = 200_000) -> float:
    start = time.perf_counter_ns()
    for _ in range(calls):
        clock()
    return (time.perf_counter_ns() - start) / calls


def main() -> None:
    results = {
        "frame": [],
        "frame, thread CPU time": [],
        "frame, keep_trace": [],
        "thread_time_ns": [],
        "perf_counter_ns": [],
    }
    for _ in range(7):
        results["frame"].append(frame_cost_us(False))
        results["frame, thread CPU time"].append(frame_cost_us(False, clock=time.thread_time_ns))
        results["frame, keep_trace"].append(frame_cost_us(True))
        results["thread_time_ns"].append(call_cost_ns(time.thread_time_ns) / 1e3)
        results["perf_counter_ns"].append(call_cost_ns(time.perf_counter_ns) / 1e3)
    for name, values in results.items():
        print(f"{name}: {np.median(values):.2f} us (median of 7)")


if __name__ == "__main__":
    main()

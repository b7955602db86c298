"""The shipped int8 MANN-8 against its fp32 source, timed side by side in one process, and the
read rate at fp32's weight size beside the rate from memory, measured in alternation: the one
speed-up figure the docs quote (docs/BENCHMARKS.md, "int8 against fp32"), with its conditions.

    .venv/bin/python -m canis.tools.precision_speedup

Both models run through the runtime's call (MotionModel.run_bound), batch 1, one thread, in
alternating blocks (tools/benchmark.time_alternating), so the machine's load weighs on both
alike; the two read rates alternate the same way."""

from __future__ import annotations

import numpy as np
from canis.runtime.assets import shipped_model_path
from canis.runtime.inference import MotionModel
from canis.runtime.machine import RAM_PROBE_BYTES, describe_machine, read_bandwidth_gbps
from canis.tools.benchmark import time_alternating, weight_bytes_per_frame

VARIANTS = ("MANN-8", "MANN-8 fp32")  # the shipped int8 default, and the fp32 it is made from


def measure(rounds: int = 20, read_repeats: int = 5) -> dict:
    models = {n: MotionModel(shipped_model_path(n), device="cpu", threads=1) for n in VARIANTS}
    buffers = {n: m.bind(1) for n, m in models.items()}
    rng = np.random.default_rng(0)
    for bound in buffers.values():
        for array in bound.inputs.values():
            array[...] = rng.normal(size=array.shape)
    timings = time_alternating(
        {n: (lambda m=m, b=buffers[n]: m.run_bound(b)) for n, m in models.items()}, rounds
    )
    fp32_bytes = weight_bytes_per_frame(shipped_model_path("MANN-8 fp32"))
    at_size, from_memory = [], []
    for _ in range(read_repeats):
        at_size.append(read_bandwidth_gbps(fp32_bytes))
        from_memory.append(read_bandwidth_gbps(RAM_PROBE_BYTES))
    return {
        "timings": timings,
        "speedup_p50": timings["MANN-8 fp32"]["p50_ms"] / timings["MANN-8"]["p50_ms"],
        "fp32_weight_bytes": fp32_bytes,
        "read_gbps_at_fp32_size": at_size,
        "read_gbps_from_memory": from_memory,
        "machine": describe_machine(threads=1),
    }


def main() -> None:
    r = measure()
    t = r["timings"]
    print(
        f"int8 p50 {t['MANN-8']['p50_ms']:.3f} ms (p99 {t['MANN-8']['p99_ms']:.3f}), fp32 p50 "
        f"{t['MANN-8 fp32']['p50_ms']:.3f} ms (p99 {t['MANN-8 fp32']['p99_ms']:.3f}): "
        f"int8 is {r['speedup_p50']:.1f}x faster at the median"
    )
    print(
        f"read rate at fp32's {r['fp32_weight_bytes'] / 1e6:.1f} MB of weights: median "
        f"{np.median(r['read_gbps_at_fp32_size']):.1f} GB/s "
        f"(runs {np.round(r['read_gbps_at_fp32_size'], 1).tolist()}); from memory "
        f"({RAM_PROBE_BYTES >> 20} MB): median {np.median(r['read_gbps_from_memory']):.1f} GB/s "
        f"(runs {np.round(r['read_gbps_from_memory'], 1).tolist()})"
    )
    m = r["machine"]
    print(f"{m['cpu']}, {m['logical_cores']} logical cores, {m['date']}")


if __name__ == "__main__":
    main()

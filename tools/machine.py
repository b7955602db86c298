"""What `canis bench` says about the machine it ran on, so that a reader can tell why a model
is fast or slow there: the CPU, its caches and threads, the vector instructions that matter
to ONNX Runtime's kernels (AVX-512 VNNI runs int8 dot products in one instruction), and
how fast one thread reads memory, from RAM and at a given working-set size."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
from canis.runtime.machine import FLAGS_THAT_MATTER

RAM_PROBE_BYTES = 256 * 2**20  # far beyond any last-level cache


def caches() -> list[dict]:
    """One entry per cache of CPU 0 (Linux sysfs): level, type, size in bytes, and how many
    logical CPUs share it."""
    found = []
    for folder in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        try:
            size = (folder / "size").read_text().strip()
            shared = (folder / "shared_cpu_list").read_text().strip()
            found.append(
                {
                    "level": int((folder / "level").read_text()),
                    "type": (folder / "type").read_text().strip(),
                    "bytes": int(size.rstrip("KMG"))
                    * {"K": 2**10, "M": 2**20, "G": 2**30}.get(size[-1], 1),
                    "shared_by_cpus": _count_cpus(shared),
                }
            )
        except (OSError, ValueError):
            continue
    return found


def _count_cpus(cpu_list: str) -> int:
    count = 0
    for part in cpu_list.split(","):
        low, _, high = part.partition("-")
        count += int(high or low) - int(low) + 1
    return count


def last_level_cache_bytes() -> int | None:
    sizes = [c["bytes"] for c in caches() if c["type"] in ("Unified", "Data")]
    return max(sizes) if sizes else None


def read_bandwidth_gbps(working_set_bytes: int = RAM_PROBE_BYTES, seconds: float = 0.3) -> float:
    """One thread reading a float32 array of this size over and over (numpy's SIMD max, a pure
    read): the best rate in GB/s.
    At RAM_PROBE_BYTES this is the rate from memory; at a model's weight size it is the rate
    at which that model's weights can be read, cached or not, on this machine."""
    data = np.ones(max(working_set_bytes // 4, 1024), np.float32)
    data.max()  # first touch
    best = np.inf
    deadline = time.perf_counter() + seconds
    repeats = 0
    while repeats < 3 or time.perf_counter() < deadline:
        start = time.perf_counter()
        data.max()
        best = min(best, time.perf_counter() - start)
        repeats += 1
    return data.nbytes / best / 1e9


def machine() -> dict:
    """The shared machine description (canis.runtime.machine: the one every run, soak and
    trace carries, so `canis compare` can check two benches' machines), plus what only the
    benchmark needs to explain a speed: every cache level in bytes and one thread's memory
    read rate."""
    from canis.runtime.machine import describe_machine

    return describe_machine() | {
        "cache_levels": caches(),
        "ram_read_gbps": read_bandwidth_gbps(),
    }


def describe(m: dict) -> str:
    """One paragraph naming the machine for a report."""
    cache_text = ", ".join(
        f"L{c['level']}{'d' if c['type'] == 'Data' else 'i' if c['type'] == 'Instruction' else ''}"
        f" {_size(c['bytes'])}"
        + (f" shared by {c['shared_by_cpus']}" if c["shared_by_cpus"] > 1 else " per core")
        for c in m["cache_levels"]
    )
    flags = ", ".join(m["flags"]) or "none of " + ", ".join(FLAGS_THAT_MATTER)
    clock = f"{m['clock_mhz']:.0f} MHz as reported" if m.get("clock_mhz") else "clock not reported"
    return (
        f"{m['cpu']} (family {m.get('cpu_family')} model {m.get('cpu_model_number')}, {clock}), "
        f"{m['logical_cores']} logical cores ({m['usable_cores']} usable); caches: "
        f"{cache_text or 'not reported'}; vector flags: {flags}; one "
        f"thread reads memory at {m['ram_read_gbps']:.1f} GB/s (reading a "
        f"{RAM_PROBE_BYTES // 2**20} MB array). ONNX Runtime {m['onnxruntime']}, {m['os']}."
    )


def _size(n: int) -> str:
    return f"{n / 2**20:g} MB" if n >= 2**20 else f"{n / 2**10:g} KB"

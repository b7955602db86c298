"""One description of the machine a run was timed on, shared by `canis run --json`,
`canis bench`, `canis soak` and every trace the Profiler writes, so two timings can be told
apart by more than a CPU label (two machines both called "AMD EPYC, 2 cores" have differed 8x).

Read from the standard library, /proc and /sys (Linux; elsewhere the fields it cannot read
are None): CPU model, family, model number, stepping, clock, caches, the instruction-set
flags inference kernels choose by, cores the process may use; OS, Python, numpy and ONNX
Runtime versions; the canis version and, in a git checkout, its commit.

`canis bench` adds what it needs to explain a speed (benchmark_machine): every cache level in
bytes and one thread's memory read rate. They live here too, torch-free, and cost nothing
until called (the read-rate probe takes about 0.3 s, so only the bench runs it).
"""

from __future__ import annotations

import functools
import os
import platform
import subprocess
import sys
import time
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

# The flags ONNX Runtime's and numpy's kernels dispatch on, as /proc/cpuinfo spells them.
FLAGS_THAT_MATTER = (
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "f16c",
    "avx512f",
    "avx512bw",
    "avx512_vnni",
    "avx512_bf16",
    "avx_vnni",
    "amx_int8",
    "asimd",  # arm64
)
RAM_PROBE_BYTES = 256 * 2**20  # far beyond any last-level cache
# Fields that must agree for two timings to be compared as like for like.
COMPARABLE_FIELDS = ("cpu", "cpu_family", "cpu_model_number", "logical_cores", "usable_cores")


def _cpuinfo() -> dict[str, str]:
    """The first processor's block of /proc/cpuinfo."""
    fields: dict[str, str] = {}
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return fields
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break
            continue
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    return fields


def _cache_folders() -> list[tuple[str, str, str, str]]:
    """(level, type, size as sysfs writes it, e.g. "32K", shared CPU list) of each cache of
    CPU 0 (Linux sysfs; none elsewhere)."""
    found = []
    for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        try:
            found.append(
                tuple(
                    (index / name).read_text().strip()
                    for name in ("level", "type", "size", "shared_cpu_list")
                )
            )
        except OSError:
            continue
    return found


def _caches() -> dict[str, str]:
    """Cache sizes of CPU 0 by level and type, e.g. {"L1d": "32K", "L2": "512K"}."""
    suffix = {"Data": "d", "Instruction": "i"}
    return {f"L{level}{suffix.get(kind, '')}": size for level, kind, size, _ in _cache_folders()}


def cache_levels() -> list[dict]:
    """One entry per cache of CPU 0: level, type, size in bytes, and how many logical CPUs
    share it."""
    found = []
    for level, kind, size, shared in _cache_folders():
        try:
            found.append(
                {
                    "level": int(level),
                    "type": kind,
                    "bytes": int(size.rstrip("KMG"))
                    * {"K": 2**10, "M": 2**20, "G": 2**30}.get(size[-1], 1),
                    "shared_by_cpus": _count_cpus(shared),
                }
            )
        except (ValueError, IndexError):
            continue
    return found


def _count_cpus(cpu_list: str) -> int:
    count = 0
    for part in cpu_list.split(","):
        low, _, high = part.partition("-")
        count += int(high or low) - int(low) + 1
    return count


def last_level_cache_bytes() -> int | None:
    sizes = [c["bytes"] for c in cache_levels() if c["type"] in ("Unified", "Data")]
    return max(sizes) if sizes else None


def read_bandwidth_gbps(working_set_bytes: int = RAM_PROBE_BYTES, seconds: float = 0.3) -> float:
    """One thread reading a float32 array of this size over and over (numpy's SIMD max, a pure
    read): the best rate in GB/s.
    At RAM_PROBE_BYTES this is the rate from memory; at a model's weight size it is the rate
    at which that model's weights can be read, cached or not, on this machine."""
    import numpy as np

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


def _max_clock_mhz() -> float | None:
    try:
        khz = Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq").read_text()
        return int(khz) / 1000
    except (OSError, ValueError):
        return None


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def git_commit() -> str | None:
    """The commit of the checkout canis runs from (with "-dirty" if it has changes), or None
    for an installed wheel."""
    root = Path(__file__).resolve().parent.parent
    if not (root / ".git").exists():
        return None
    try:
        commit = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return commit + ("-dirty" if dirty else "")


@functools.cache
def _static_description() -> dict:
    import numpy as np
    import onnxruntime as ort

    info = _cpuinfo()
    flags = set(info.get("flags", info.get("Features", "")).split())
    mhz = info.get("cpu MHz")
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = os.cpu_count()
    return {
        "cpu": info.get("model name") or platform.processor() or platform.machine(),
        "cpu_vendor": info.get("vendor_id"),
        "cpu_family": info.get("cpu family"),
        "cpu_model_number": info.get("model"),
        "cpu_stepping": info.get("stepping"),
        "clock_mhz": float(mhz) if mhz else None,
        "max_clock_mhz": _max_clock_mhz(),
        "caches": _caches(),
        "flags": [f for f in FLAGS_THAT_MATTER if f in flags],
        "logical_cores": os.cpu_count(),
        "usable_cores": usable,
        "os": platform.platform(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "onnxruntime": ort.__version__,
        "providers": ort.get_available_providers(),
        "canis": _version("canis"),
        "commit": git_commit(),
        "executable": sys.executable,
    }


def describe_machine(**used) -> dict:
    """The machine, plus what this run used (e.g. threads=1, device="cpu",
    provider="CPUExecutionProvider") and when."""
    return (
        _static_description()
        | {k: v for k, v in used.items() if v is not None}
        | {"date": datetime.now(UTC).isoformat(timespec="seconds")}
    )


def model_used(model) -> dict:
    """What a trace or report says about a MotionModel: file, kind, precision, where it runs
    and on how many threads. Precision is the model's `canis.precision` metadata; a model
    without it is a float32 export (the only kind `canis export` made before precisions)."""
    session = getattr(model, "session", None)  # stand-ins in tests have none
    metadata = getattr(model, "metadata", None) or {}
    used = {
        "model": Path(getattr(model, "path", "unknown")).name,
        "kind": getattr(model, "kind", None),
        "precision": getattr(model, "precision", None)
        or metadata.get("canis.precision", "float32"),
        "device": getattr(model, "device", None),
    }
    if session is not None:
        used["provider"] = session.get_providers()[0]
        used["threads"] = session.get_session_options().intra_op_num_threads
    return used


def mismatches(a: dict, b: dict) -> list[str]:
    """The fields by which two machine descriptions differ enough to make timings
    incomparable, as readable lines."""
    return [
        f"{field}: {a.get(field)!r} vs {b.get(field)!r}"
        for field in COMPARABLE_FIELDS
        if a.get(field) != b.get(field)
    ]


def benchmark_machine() -> dict:
    """describe_machine() plus what only `canis bench` needs to explain a speed: every cache
    level in bytes and one thread's memory read rate (measured now, about 0.3 s)."""
    return describe_machine() | {
        "cache_levels": cache_levels(),
        "ram_read_gbps": read_bandwidth_gbps(),
    }


def machine_paragraph(m: dict) -> str:
    """One paragraph naming a benchmark_machine() for a report."""
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

"""`canis compare BEFORE.json AFTER.json`: two runs (`canis run --json`, `canis soak --json`)
or two benches (`canis bench --json`) compared stage by stage: medians, p99 and worst of
each, and the ratio of medians (after / before) with a 95% confidence interval from the
frame samples.

The interval is a moving-block bootstrap: frames are resampled in blocks of consecutive
frames, not one by one, because frame times come in runs (a busy neighbour slows many
frames in a row) and resampling single frames would make the interval too narrow.

The interval covers the noise within each run, not the machine's load changing between two
runs: on the shared 2-core development machine two runs of the same command, one after the
other, differed by up to 9% in a stage's median with intervals that excluded 1. So a stage
counts as changed only when its whole interval lies beyond 1 +- `threshold` (default 5%);
an interval that excludes 1 but not the threshold is reported as a change under the
threshold. Machines that differ, and runs of different models or workloads, are flagged as
warnings above the table.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
from canis.runtime.machine import mismatches
from canis.runtime.profiler import percentiles_ms

BLOCK_FRAMES = 30  # half a second of frames at 60 Hz per bootstrap block
CONFIDENCE = 0.95
THRESHOLD = 0.05  # smallest relative change reported as one (see above)
RUN_REPORTS = ("canis run", "canis soak")
# What must agree for two runs to time the same work.
WORKLOAD_FIELDS = ("characters", "threads", "device", "terrain", "foot_lock")


def load_report(path: str | Path) -> dict:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    try:
        report = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{path}: not a JSON file ({error})") from None
    if isinstance(report, dict) and report.get("report") in RUN_REPORTS:
        if not isinstance(report.get("frame_time"), dict):
            raise ValueError(f"{path}: a {report['report']} JSON without frame times")
        return report | {"_kind": "run", "_path": str(path)}
    if isinstance(report, dict) and {"machine", "inference", "frames"} <= set(report):
        return report | {"_kind": "bench", "_path": str(path)}
    raise ValueError(
        f"{path}: not a canis run, soak or bench JSON (write one with `canis run --json`, "
        "`canis soak --json` or `canis bench --json`)"
    )


def bootstrap_ratio(
    before, after, resamples: int = 2000, block: int = BLOCK_FRAMES, seed: int = 0
) -> tuple[float, float]:
    """The CONFIDENCE interval of median(after) / median(before) by a moving-block
    bootstrap of each sample."""
    rng = np.random.default_rng(seed)

    def medians(values: np.ndarray) -> np.ndarray:
        n = len(values)
        size = min(block, n)
        blocks = math.ceil(n / size)
        starts = rng.integers(0, n - size + 1, size=(resamples, blocks))
        index = (starts[:, :, None] + np.arange(size)).reshape(resamples, -1)[:, :n]
        return np.median(values[index], axis=1)

    ratios = medians(np.asarray(after, float)) / medians(np.asarray(before, float))
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(ratios, [tail, 100 - tail])
    return float(low), float(high)


def compare_samples(name: str, before, after, resamples: int, threshold: float = THRESHOLD) -> dict:
    before, after = np.asarray(before, float), np.asarray(after, float)
    broken = [int(np.sum(~np.isfinite(v))) for v in (before, after)]
    if any(broken):  # NaN compares as nothing, which read as "no significant difference"
        return {
            "stage": name,
            "frames": [len(before), len(after)],
            "before": _stats(before[np.isfinite(before)]),
            "after": _stats(after[np.isfinite(after)]),
            "ratio": None,
            "interval": None,
            "verdict": f"NOT COMPARED: non-finite times ({broken[0]} before, {broken[1]} after)",
        }
    row = {
        "stage": name,
        "frames": [len(before), len(after)],
        "before": _stats(before),
        "after": _stats(after),
    }
    if len(before) < 2 or len(after) < 2 or row["before"]["p50_ms"] <= 0:
        return row | {"ratio": None, "interval": None, "verdict": "too few samples"}
    ratio = row["after"]["p50_ms"] / row["before"]["p50_ms"]
    low, high = bootstrap_ratio(before, after, resamples)
    changed = low > 1 + threshold or high < 1 / (1 + threshold)
    if changed:
        verdict = f"SLOWER x{ratio:.2f}" if ratio > 1 else f"FASTER x{1 / ratio:.2f}"
    elif low > 1 or high < 1:
        verdict = f"changed, not clearly by over {threshold:.0%}"
    else:
        verdict = "no significant difference"
    return row | {
        "ratio": ratio,
        "interval": [low, high],
        "significant": changed,
        "verdict": verdict,
    }


def _stats(values: np.ndarray) -> dict:
    return percentiles_ms(values, ("p50", "p99", "max"))


def _warnings(a: dict, b: dict) -> list[str]:
    machine_a, machine_b = a.get("machine") or {}, b.get("machine") or {}
    if not (machine_a and machine_b):
        return ["a file has no machine description: cannot tell whether the machines agree"]
    warnings = [f"different machines: {m}" for m in mismatches(machine_a, machine_b)]
    if machine_a.get("commit") != machine_b.get("commit"):
        warnings.append(
            f"different code: commit {machine_a.get('commit')} vs {machine_b.get('commit')}"
        )
    return warnings


def compare_runs(a: dict, b: dict, resamples: int, threshold: float = THRESHOLD) -> dict:
    warnings = _warnings(a, b)
    notes = []
    if a.get("kind") != b.get("kind"):
        warnings.append(
            f"DIFFERENT MODELS: {a.get('model')} ({a.get('kind')}) vs "
            f"{b.get('model')} ({b.get('kind')}): the stages do different work"
        )
    elif a.get("model") != b.get("model") or a.get("precision") != b.get("precision"):
        notes.append(
            f"models: {Path(a['model']).name} ({a.get('precision', '?')}) vs "
            f"{Path(b['model']).name} ({b.get('precision', '?')})"
        )
    for field in WORKLOAD_FIELDS:
        if a.get(field) != b.get(field):
            warnings.append(f"different workload: {field} {a.get(field)!r} vs {b.get(field)!r}")
    samples_a = a.get("frame_samples_ms") or {}
    samples_b = b.get("frame_samples_ms") or {}
    rows = []
    names = [n for n in samples_a if n in samples_b]
    for name in names:
        rows.append(compare_samples(name, samples_a[name], samples_b[name], resamples, threshold))
    if not names:
        warnings.append("no per-frame samples in these files: medians only, no intervals")
        stages_a, stages_b = a["frame_time"]["stages"], b["frame_time"]["stages"]
        for name in (n for n in stages_a if n in stages_b):
            rows.append(
                {
                    "stage": name,
                    "before": stages_a[name],
                    "after": stages_b[name],
                    "ratio": stages_b[name]["p50_ms"] / stages_a[name]["p50_ms"],
                    "interval": None,
                    "verdict": "no samples",
                }
            )
    return {
        "kind": "run",
        "before": a["_path"],
        "after": b["_path"],
        "warnings": warnings,
        "notes": notes,
        "rows": rows,
    }


def compare_benches(a: dict, b: dict, resamples: int, threshold: float = THRESHOLD) -> dict:
    warnings, rows = _warnings(a, b), []

    def keyed(report, key):
        return {key(r): r for r in report.get("inference", [])}

    key = lambda r: (r["file"], r["threads"], r["batch"])  # noqa: E731
    inference_a, inference_b = keyed(a, key), keyed(b, key)
    for k in (k for k in inference_a if k in inference_b):
        ra, rb = inference_a[k], inference_b[k]
        name = f"inference {k[0]} threads {k[1]} batch {k[2]}"
        if "samples_ms" in ra and "samples_ms" in rb:
            rows.append(
                compare_samples(name, ra["samples_ms"], rb["samples_ms"], resamples, threshold)
            )
    missing = set(inference_a) ^ set(inference_b)
    if missing:
        warnings.append(f"inference cases in only one file: {sorted(missing)}")
    frames_a = {r["characters"]: r for r in a.get("frames", [])}
    frames_b = {r["characters"]: r for r in b.get("frames", [])}
    for count in (c for c in frames_a if c in frames_b):
        sa, sb = frames_a[count].get("samples", {}), frames_b[count].get("samples", {})
        for stage in (s for s in sa if s in sb):
            rows.append(
                compare_samples(
                    f"{count} dogs: {stage}", sa[stage], sb[stage], resamples, threshold
                )
            )
    if not rows:
        warnings.append("no per-call or per-frame samples in these benches: nothing to compare")
    return {
        "kind": "bench",
        "before": a["_path"],
        "after": b["_path"],
        "warnings": warnings,
        "notes": [],
        "rows": rows,
    }


def compare_files(
    before: str | Path, after: str | Path, resamples: int = 2000, threshold: float = THRESHOLD
) -> dict:
    if resamples < 100:
        raise ValueError(f"--resamples must be at least 100, got {resamples}")
    if not 0 <= threshold < 1:
        raise ValueError(f"--threshold must be from 0 to 1 (a share), got {threshold}")
    a, b = load_report(before), load_report(after)
    if a["_kind"] != b["_kind"]:
        raise ValueError(
            f"{before} is a {a['_kind']} and {after} a {b['_kind']}: compare like with like"
        )
    if a["_kind"] == "run":
        return compare_runs(a, b, resamples, threshold)
    return compare_benches(a, b, resamples, threshold)


def format_comparison(result: dict) -> str:
    lines = [f"before: {result['before']}", f"after:  {result['after']}"]
    lines += [f"WARNING: {w}" for w in result["warnings"]]
    lines += [f"note: {n}" for n in result["notes"]]
    lines.append(
        f"{'stage':34s} {'p50 before':>10s} {'p50 after':>10s} {'p99 before':>10s} "
        f"{'p99 after':>10s} {'max before':>10s} {'max after':>10s}  after/before [95% CI]"
    )
    for row in result["rows"]:
        a, b = row["before"], row["after"]
        interval = (
            f" [{row['interval'][0]:.3f}, {row['interval'][1]:.3f}]" if row["interval"] else ""
        )
        ratio = f"{row['ratio']:.3f}" if row["ratio"] is not None else "-"
        lines.append(
            f"{row['stage']:34s} {a['p50_ms']:10.3f} {b['p50_ms']:10.3f} {a['p99_ms']:10.3f} "
            f"{b['p99_ms']:10.3f} {a.get('max_ms', float('nan')):10.3f} "
            f"{b.get('max_ms', float('nan')):10.3f}  {ratio}{interval}  {row['verdict']}"
        )
    lines.append(
        "ms; [95% CI]: moving-block bootstrap of the frame samples; a stage has changed "
        "(SLOWER/FASTER) when the whole interval lies beyond the threshold"
    )
    return "\n".join(lines)

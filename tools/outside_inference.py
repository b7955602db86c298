"""`python -m canis.tools.outside_inference --before A1.csv A2.csv --after B1.csv B2.csv`:
the per-frame work outside inference of `canis run --csv` runs, two versions side by side.

For each file: every stage's median (p50) and p99 over the frames where it ran, the frame's
wall and thread CPU time, and "outside": per frame, the sum of OUTSIDE_STAGES (the work a
step does besides the networks: command, trajectory, features, decode and root update,
display pose with IK and foot lock). Then, for each figure, the median over the files of
each version and the ratio after / before, with the range of the per-pair ratios of p50
(files paired in the order given: run them alternately, A1 B1 A2 B2 ...). The transition
stage (the RTN's own inference) is left out of "outside" and shown on its own.

Prints a markdown table (docs/BENCHMARKS.md's side-by-side sections). With `--frame-kinds`,
instead: each version's frames pooled by kind (those that ask for a transition, the first of a
run of frames with a transition stage; those of a transition; those without one; all), their
wall time p50 / p99 / max, and the same of their thread CPU time: a frame whose wall time is
well above its CPU time was descheduled or waiting, not working (the machine, not the frame).
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import numpy as np

OUTSIDE_STAGES = ("input", "trajectory", "features", "decode", "ik")
ROWS = (*OUTSIDE_STAGES, "outside", "inference", "transition", "frame", "frame_cpu")


FRAME_KINDS = ("that ask", "of a transition", "without one", "all")


def _frames(path: str | Path) -> list[dict]:
    """The frame rows of one `canis run --csv` file; a clear error for anything else."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    with open(path, newline="") as source:
        rows = list(csv.DictReader(source))
    needed = {"wall_ms", "cpu_ms"} | {f"{s}_ms" for s in OUTSIDE_STAGES}
    missing = needed - set(rows[0] if rows else ())
    if missing:
        raise ValueError(
            f"{path}: not a `canis run --csv` file with frames (no {', '.join(sorted(missing))})"
        )
    return rows


def file_figures(path: str | Path) -> dict[str, tuple[float, float]]:
    """{figure: (p50 ms, p99 ms)} of one `canis run --csv` file."""
    rows = _frames(path)

    def column(name: str) -> np.ndarray:
        return np.array([float(r[name] or 0.0) for r in rows])

    def ran(name: str) -> np.ndarray:
        return np.array([float(r[name]) for r in rows if r.get(name)])

    per_frame = {
        "outside": sum(column(f"{s}_ms") for s in OUTSIDE_STAGES),
        "frame": column("wall_ms"),
        "frame_cpu": column("cpu_ms"),
    }
    for stage in (*OUTSIDE_STAGES, "inference", "transition"):
        values = ran(f"{stage}_ms")
        if values.size:
            per_frame[stage] = values
    return {k: (float(np.median(v)), float(np.percentile(v, 99))) for k, v in per_frame.items()}


def side_by_side(before: list[str | Path], after: list[str | Path]) -> str:
    """The markdown table of the two versions' figures and their ratios."""
    if not before or not after:
        raise ValueError("outside_inference: give at least one --before and one --after file")
    a = [file_figures(p) for p in before]
    b = [file_figures(p) for p in after]
    lines = [
        "| figure (ms) | before p50 | after p50 | after / before p50 | per-pair range "
        "| before p99 | after p99 | after / before p99 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name in ROWS:
        if not all(name in f for f in a + b):
            continue
        p50_a, p50_b = (float(np.median([f[name][0] for f in fs])) for fs in (a, b))
        p99_a, p99_b = (float(np.median([f[name][1] for f in fs])) for fs in (a, b))
        pairs = [y[name][0] / x[name][0] for x, y in zip(a, b, strict=False) if x[name][0] > 0]
        span = f"{min(pairs):.2f}-{max(pairs):.2f}" if pairs else "-"
        lines.append(
            f"| {name} | {p50_a:.3f} | {p50_b:.3f} | {p50_b / p50_a:.2f}x | {span} "
            f"| {p99_a:.3f} | {p99_b:.3f} | {p99_b / p99_a:.2f}x |"
        )
    return "\n".join(lines) + "\n"


def frame_kinds(paths: list[str | Path], column: str = "wall_ms") -> dict[str, np.ndarray]:
    """The frames' times (ms; `column`: wall_ms or cpu_ms) of `canis run --csv` files, pooled
    by FRAME_KINDS."""
    pooled = {kind: [] for kind in FRAME_KINDS}
    for path in paths:
        before = False  # whether the frame before had a transition stage
        for row in _frames(path):
            now = bool(row.get("transition_ms"))
            kind = ("of a transition" if before else "that ask") if now else "without one"
            before = now
            for name in (kind, "all"):
                pooled[name].append(float(row[column]))
    return {kind: np.array(values) for kind, values in pooled.items()}


def kinds_side_by_side(before: list[str | Path], after: list[str | Path]) -> str:
    """The markdown table of both versions' frames by kind: count, wall p50 / p99 / max, and
    thread CPU p50 / p99 / max."""
    if not before or not after:
        raise ValueError("outside_inference: give at least one --before and one --after file")
    a, b = frame_kinds(before), frame_kinds(after)
    a_cpu, b_cpu = frame_kinds(before, "cpu_ms"), frame_kinds(after, "cpu_ms")

    def figures(values: np.ndarray) -> str:
        if not values.size:
            return "-"
        p50, p99 = np.median(values), np.percentile(values, 99)
        return f"{p50:.2f} / {p99:.2f} / {values.max():.2f}"

    lines = [
        "| frames | count before | count after | before p50 / p99 / max | after p50 / p99 / max "
        "| before CPU p50 / p99 / max | after CPU p50 / p99 / max |",
        "|---|---|---|---|---|---|---|",
    ]
    for kind in FRAME_KINDS:
        lines.append(
            f"| {kind} | {a[kind].size} | {b[kind].size} | {figures(a[kind])} | "
            f"{figures(b[kind])} | {figures(a_cpu[kind])} | {figures(b_cpu[kind])} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", nargs="+", required=True, help="canis run --csv files")
    parser.add_argument("--after", nargs="+", required=True, help="canis run --csv files")
    parser.add_argument(
        "--frame-kinds",
        action="store_true",
        help="each version's frames pooled by kind (asking, of a transition, without one, all)",
    )
    args = parser.parse_args(argv)
    table = kinds_side_by_side if args.frame_kinds else side_by_side
    print(table(args.before, args.after), end="")


if __name__ == "__main__":
    main()

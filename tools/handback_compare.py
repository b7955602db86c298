"""Two transition networks' hand-back and postures figures compared figure by figure: the JSONs
of `canis evaluate transitions [--handback-only] --json` for each (deterministic runs), how
many figures are more than `threshold` worse or better, which are worse, and the two worst
figures tests/test_demo.py holds the demo's postures to.

    python -m canis.tools.handback_compare BEFORE.json AFTER.json [--threshold 0.05]

The figures are the transition network's: the hand-back table's largest per-frame joint step
in the transition and after the hand-back, and each posture's asked at once and stopping first.
The motion network's own stop ("stopping") is left out: it changes only with the phase that
the worst stopping-first request was asked at.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

THRESHOLD = 0.05
HANDBACK_FIGURES = ("transition_cm_per_frame", "after_cm_per_frame")
POSTURE_FIGURES = ("at_once_cm_per_frame", "stopped_first_cm_per_frame")


def figures(report: dict) -> dict[tuple, float]:
    """{(table, where..., figure): cm per frame} of one evaluation's JSON."""
    out = {}
    for run in report["handback"]["runs"]:
        for name in HANDBACK_FIGURES:
            out[("hand-back", run["start"], run["target"], name)] = run[name]
    for run in report["postures"]["runs"]:
        for name in POSTURE_FIGURES:
            out[("postures", run["ground"], run["start"], run["target"], name)] = run[name]
    return out


def demo_limits(report: dict) -> dict[str, float]:
    """The two worst figures the demo's posture keys are held to (tests/test_demo.py)."""
    return {
        "after the hand-back": max(r["after_cm_per_frame"] for r in report["handback"]["runs"]),
        "stopping first": max(r["stopped_first_cm_per_frame"] for r in report["postures"]["runs"]),
    }


def compare(before: dict, after: dict, threshold: float = THRESHOLD) -> dict:
    a, b = figures(before), figures(after)
    if a.keys() != b.keys():
        raise ValueError("the two evaluations measured different runs; compare like with like")
    worse = {k: (a[k], b[k]) for k in a if b[k] > a[k] * (1 + threshold)}
    better = {k: (a[k], b[k]) for k in a if b[k] < a[k] / (1 + threshold)}
    limits = {k: (v, demo_limits(after)[k]) for k, v in demo_limits(before).items()}
    return {"count": len(a), "worse": worse, "better": better, "demo_limits": limits}


def report_lines(result: dict, threshold: float) -> list[str]:
    pct = round(threshold * 100)
    lines = [
        f"{result['count']} figures: {len(result['worse'])} more than {pct}% worse, "
        f"{len(result['better'])} more than {pct}% better"
    ]
    by_change = sorted(result["worse"].items(), key=lambda kv: -kv[1][1] / kv[1][0])
    for key, (x, y) in by_change:
        lines.append(f"  worse: {' / '.join(key)}: {x:.2f} -> {y:.2f} ({(y / x - 1) * 100:+.0f}%)")
    for name, (x, y) in result["demo_limits"].items():
        lines.append(f"demo limit, {name}: {x:.2f} -> {y:.2f} ({(y / x - 1) * 100:+.1f}%)")
    return lines


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--threshold", type=float, default=THRESHOLD)
    args = parser.parse_args(argv)
    before, after = (json.loads(p.read_text()) for p in (args.before, args.after))
    print("\n".join(report_lines(compare(before, after, args.threshold), args.threshold)))


if __name__ == "__main__":
    main()

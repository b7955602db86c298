"""The generalisation study's table and figure (docs/EVALUATION.md, issue 17 item 3) from the
runs' log.csv and their validation breakdowns (training/validation_breakdown.py --json):

    python -m canis.training.generalisation_table --breakdown runs/breakdown_NAME.json ... \
        --figure docs/images/generalisation_curves.png \
        --run "baseline=runs/baseline_s0" --run "dropout 0=runs/dropout0" ...

Every number it prints is read from those files; nothing is computed that the runs did not
log, except the breakdown's sums over rows (the held-out loss without one clip, and on the
locomotion rows alone).
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path


def read_log(run_dir: Path) -> list[dict]:
    path = run_dir / "log.csv"
    if not path.exists():
        raise FileNotFoundError(f"--run {run_dir}: no log.csv in it")
    with open(path, newline="") as file:
        return [{k: float(v) for k, v in row.items()} for row in csv.DictReader(file)]


def without_clip(breakdown: dict, clip: str) -> float:
    """Held-out validation MSE over the rows of every other held-out clip."""
    others = [c for c in breakdown["clips"] if c["clip"] != clip]
    return sum(c["mse"] * c["rows"] for c in others) / sum(c["rows"] for c in others)


def locomotion(breakdown: dict) -> float:
    """Held-out validation MSE over the rows labelled with a gait."""
    gaits = [g for g in breakdown["labels"]["gait"] if g["label"] != "none"]
    return sum(g["mse"] * g["rows"] for g in gaits) / sum(g["rows"] for g in gaits)


def clip_mse(breakdown: dict, clip: str) -> float:
    return next(c["mse"] for c in breakdown["clips"] if c["clip"] == clip)


def table(runs: dict[str, list[dict]], breakdowns: dict[str, dict], clip: str) -> str:
    lines = [
        "| run | train loss epoch 1 / 5 | held-out validation epoch 1 / 5 (best) | within-clip "
        f"validation epoch 1 / 5 | training MSE, eval mode | {clip} | other held-out clips "
        "| held-out locomotion rows |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for label, rows in runs.items():
        first, last = rows[0], rows[-1]
        best = min(r["validation_loss"] for r in rows)
        key = "within_clip_validation_loss"
        within = f"{first[key]:.3f} / {last[key]:.3f}" if key in last else ""
        cells = [
            label,
            f"{first['train_loss']:.3f} / {last['train_loss']:.3f}",
            f"{first['validation_loss']:.3f} / {last['validation_loss']:.3f} ({best:.3f})",
            within,
        ]
        b = breakdowns.get(label)
        cells += (
            [
                f"{b['training_sample_mse']:.3f}",
                f"{clip_mse(b, clip):.3f}",
                f"{without_clip(b, clip):.3f}",
                f"{locomotion(b):.3f}",
            ]
            if b
            else ["", "", "", ""]
        )
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def figure(runs: dict[str, list[dict]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4), dpi=90)
    colours = plt.get_cmap("tab20")
    for i, (label, rows) in enumerate(runs.items()):
        epochs = [r["epoch"] for r in rows]
        colour = colours(i % 20)
        left.plot(epochs, [r["train_loss"] for r in rows], color=colour, label=label)
        right.plot(epochs, [r["validation_loss"] for r in rows], color=colour, label=label)
        if "within_clip_validation_loss" in rows[0]:
            right.plot(
                epochs,
                [r["within_clip_validation_loss"] for r in rows],
                color=colour,
                linestyle="--",
                label=f"{label}: within-clip",
            )
    left.set(
        title="training loss as logged (dropout, noise on)",
        xlabel="epoch",
        ylabel="MSE, standardised",
    )
    right.set(title="validation: held-out clips (solid), within-clip (dashed)", xlabel="epoch")
    for axes in (left, right):
        axes.set_yscale("log")
        axes.grid(alpha=0.3)
    right.legend(fontsize=6, loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", action="append", required=True, help="LABEL=RUN_DIR")
    parser.add_argument(
        "--breakdown",
        type=Path,
        action="append",
        default=[],
        help="a validation_breakdown --json output (repeatable)",
    )
    parser.add_argument("--clip", default="D1_071_KAN02_002", help="held-out clip to split out")
    parser.add_argument("--figure", type=Path, help="PNG of the per-epoch curves")
    args = parser.parse_args(argv)
    runs, directories = {}, {}
    for spec in args.run:
        label, separator, folder = spec.partition("=")
        if not separator:
            parser.error(f"--run {spec!r}: expected LABEL=RUN_DIR")
        directories[label] = Path(folder)
        runs[label] = read_log(Path(folder))
    by_run = {
        Path(b["checkpoint"]).parent: b
        for path in args.breakdown
        for b in json.loads(path.read_text())
    }
    breakdowns = {label: by_run[d] for label, d in directories.items() if d in by_run}
    print(table(runs, breakdowns, args.clip))
    if args.figure:
        figure(runs, args.figure)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The ablation table of issue 17 (plain / + closed loop / + contact / both), written from the
files the measuring commands leave, so no figure in it is typed by hand:

- `canis evaluate controllers --json EV.json` (skating, leg stiffness, path following, gaits),
- `canis finetune --start CKPT --own-frames 8 --measure` (one JSON line: the one-step and the
  closed-loop validation losses on the same held-out rows for every model),
- the model card's `NAME.closed_loop.json` (`canis export --card`: the speed reached with the
  runtime's speed tracking off, the network alone).

    python -m canis.training.finetune_ablation --ev runs/ev.json \
        --row "plain (shipped)=MANN8:runs/shipped_measure.txt:assets/models/mann8.closed_loop.json"

Each --row is LABEL=MODEL:MEASURE:CARD, MODEL a name in EV.json; MEASURE or CARD may be "-"
when not measured (the cell then says so).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

SCENARIOS = ("walk", "canter", "turn")
MISSING = "not measured"


def parse_row(text: str) -> tuple[str, str, Path | None, Path | None]:
    label, sep, rest = text.partition("=")
    parts = rest.split(":")
    if not sep or not label or len(parts) != 3 or not parts[0]:
        raise ValueError(f"--row {text!r}: expected LABEL=MODEL:MEASURE_JSON:CARD_JSON")
    model, measure, card = parts
    return (
        label,
        model,
        None if measure == "-" else Path(measure),
        None if card == "-" else Path(card),
    )


def read_measure(path: Path | None) -> dict | None:
    """The last line of `canis finetune --measure`'s output (earlier lines are progress)."""
    if path is None:
        return None
    lines = [line for line in path.read_text().splitlines() if line.startswith("{")]
    if not lines:
        raise ValueError(f"{path}: holds no `canis finetune --measure` JSON line")
    return json.loads(lines[-1])


def untracked_speed_error(card: dict) -> tuple[float, float]:
    """Worst and mean relative error of the speed reached with speed tracking off, over the
    card's runs (the paper's four speeds, forward and turning)."""
    errors = [run["untracked"]["speed_error"] for run in card["runs"]]
    return max(errors), sum(errors) / len(errors)


def _gaits(entry: dict) -> str:
    """Each speed's majority gait, its share of the frames and the speed reached."""
    return ", ".join(
        f"{g['verdict']} {g['share']:.0%} {g['mean_speed_mps']:.2f}"
        for g in entry["gaits"].values()
    )


def table(ev: dict, rows: list[tuple[str, str, Path | None, Path | None]]) -> str:
    head = (
        "| model | validation loss | closed-loop validation loss | skating walk / canter / turn "
        "cm/frame | leg stiffness walk / canter / turn deg/frame | path cm (mean of 4) | "
        "path deg (mean of 4) | gait, m/s at 0.5 / 1.1 / 1.9 / 3.3 | speed error, tracking "
        "off (worst / mean of 8 runs) |"
    )
    lines = [head, "|---" * 9 + "|"]
    truth = ev["GT"]
    lines.append(
        "| mocap (GT) | | | "
        + " / ".join(f"{truth['skating_cm'][s]:.3f}" for s in SCENARIOS)
        + " | "
        + " / ".join(f"{truth['stiffness_deg'][s]:.2f}" for s in SCENARIOS)
        + " | | | "
        + _gaits(truth)
        + " | |"
    )
    for label, model, measure_path, card_path in rows:
        if model not in ev:
            raise ValueError(f"--row {label}: model {model!r} is not in the evaluation JSON")
        entry, measure = ev[model], read_measure(measure_path)
        losses = (
            f"{measure['validation_loss']:.4f} | {measure['validation_closed_loop_loss']:.4f}"
            if measure
            else f"{MISSING} | {MISSING}"
        )
        if card_path is None:
            speed = MISSING
        else:
            worst, mean = untracked_speed_error(json.loads(card_path.read_text()))
            speed = f"{100 * worst:.0f}% / {100 * mean:.0f}%"
        paths_cm = sum(entry["path_cm"].values()) / len(entry["path_cm"])
        paths_deg = sum(entry["path_deg"].values()) / len(entry["path_deg"])
        lines.append(
            f"| {label} | {losses} | "
            + " / ".join(f"{entry['skating_cm'][s]:.3f}" for s in SCENARIOS)
            + " | "
            + " / ".join(f"{entry['stiffness_deg'][s]:.2f}" for s in SCENARIOS)
            + f" | {paths_cm:.1f} | {paths_deg:.1f} | {_gaits(entry)} | {speed} |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ev", type=Path, required=True, help="canis evaluate controllers --json")
    parser.add_argument("--row", action="append", required=True, help="LABEL=MODEL:MEASURE:CARD")
    args = parser.parse_args(argv)
    rows = [parse_row(text) for text in args.row]
    print(table(json.loads(args.ev.read_text()), rows), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

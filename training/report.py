"""The dataset report: label tables like the MANN paper's Table 1, gait vs speed like its
Fig. 5, class balance before/after oversampling, and per-clip label timelines."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from canis.runtime.features import ACTIONS, FPS
from canis.runtime.readouts import GAITS, NO_GAIT
from canis.training.labels import PAW_NAMES

ACTION_COLOURS = ("#9e9e9e", "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#8c564b")
GAIT_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728")
SPEED_BINS_MPS = np.arange(0.0, 5.75, 0.25)
# A clip's table row lists the actions and gaits that take at least these shares of it.
SHOWN_ACTION_SHARE, SHOWN_GAIT_SHARE = 0.03, 0.1


def pyplot():
    import matplotlib

    matplotlib.use("Agg")  # files only; never needs a display
    import matplotlib.pyplot as plt

    return plt


def action_table(action_index: np.ndarray, weights: np.ndarray | None = None) -> list[dict]:
    """Per action: seconds, frames and share, optionally under per-frame sampling weights."""
    weights = np.ones(len(action_index)) if weights is None else weights
    total = weights.sum()
    rows = []
    for i, name in enumerate(ACTIONS):
        selected = action_index == i
        share = float(weights[selected].sum() / total) if total else 0.0
        rows.append(
            {
                "action": name,
                "frames": int(selected.sum()),
                "seconds": float(selected.sum() / FPS),
                "share": share,
            }
        )
    return rows


def gait_table(gait_index: np.ndarray, speeds_mps: np.ndarray, weights=None) -> list[dict]:
    weights = np.ones(len(gait_index)) if weights is None else weights
    moving = gait_index != NO_GAIT
    total = weights[moving].sum()
    rows = []
    for i, name in enumerate(GAITS):
        selected = gait_index == i
        rows.append(
            {
                "gait": name,
                "frames": int(selected.sum()),
                "share": float(weights[selected].sum() / total) if total else 0.0,
                "median_speed_mps": float(np.median(speeds_mps[selected]))
                if selected.any()
                else None,
            }
        )
    return rows


def label_shares(clip) -> tuple[np.ndarray, np.ndarray]:
    """(share of the clip's frames per action, share of its locomotion frames per gait)."""
    labels = clip.labels
    actions = np.bincount(labels.action_index, minlength=len(ACTIONS)) / clip.frame_count
    gaits = labels.gait_index[labels.gait_index != NO_GAIT]
    return actions, np.bincount(gaits, minlength=len(GAITS)) / max(len(gaits), 1)


def default_timeline_clip(clips) -> str | None:
    """The clip whose timeline shows the most: the most actions and gaits listed in its table
    row, the first by name among equals (a rule, so that rebuilding the report rewrites the
    same files)."""

    def shown(clip):
        actions, gaits = label_shares(clip)
        return int((actions >= SHOWN_ACTION_SHARE).sum() + (gaits >= SHOWN_GAIT_SHARE).sum())

    ranked = sorted(clips, key=lambda clip: (-shown(clip), clip.name))
    return ranked[0].name if ranked else None


def clip_summary_rows(clips) -> list[dict]:
    """One row per clip: its main actions, number of jumps, gaits and top speed, for checking
    labels against what each clip is known to contain."""
    rows = []
    for clip in clips:
        labels = clip.labels
        actions, gait_shares = label_shares(clip)
        jumping = labels.action_index == ACTIONS.index("jump")
        rows.append(
            {
                "clip": clip.name,
                "seconds": clip.frame_count / FPS,
                "actions": ", ".join(
                    f"{ACTIONS[i]} {actions[i]:.0%}"
                    for i in np.argsort(-actions)
                    if actions[i] >= SHOWN_ACTION_SHARE
                ),
                "jumps": len(true_spans(jumping)),
                "gaits": ", ".join(
                    f"{GAITS[i]} {gait_shares[i]:.0%}"
                    for i in np.argsort(-gait_shares)
                    if gait_shares[i] >= SHOWN_GAIT_SHARE
                )
                or "-",
                "top_speed_mps": float(labels.root_speed_mps.max()),
            }
        )
    return rows


def plot_gait_vs_speed(gait_index: np.ndarray, speeds_mps: np.ndarray, path: Path) -> None:
    """Seconds of each gait per speed bin, and each bin's gait shares (the paper's Fig. 5)."""
    plt = pyplot()
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    centres = 0.5 * (SPEED_BINS_MPS[1:] + SPEED_BINS_MPS[:-1])
    seconds = np.stack(
        [
            np.histogram(speeds_mps[gait_index == i], SPEED_BINS_MPS)[0] / FPS
            for i in range(len(GAITS))
        ]
    )
    shares = seconds / np.maximum(seconds.sum(axis=0, keepdims=True), 1e-9)
    below_top, below_bottom = np.zeros(len(centres)), np.zeros(len(centres))
    for i, name in enumerate(GAITS):
        top.bar(
            centres, seconds[i], width=0.23, bottom=below_top, color=GAIT_COLOURS[i], label=name
        )
        bottom.bar(centres, shares[i], width=0.23, bottom=below_bottom, color=GAIT_COLOURS[i])
        below_top += seconds[i]
        below_bottom += shares[i]
    for speed, name in ((0.5, "walk"), (1.1, "pace"), (1.9, "trot"), (3.3, "canter")):
        for ax in (top, bottom):
            ax.axvline(speed, color="k", lw=0.6, ls=":")
        bottom.text(speed, 1.02, f"paper {name}", fontsize=7, ha="center", va="bottom")
    top.set(ylabel="seconds (mirrored data)", title="Gait by root speed (footfall classifier)")
    top.legend()
    bottom.set(xlabel="root speed (m/s)", ylabel="share of the speed bin", ylim=(0, 1.12))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_clip_timeline(clip, path: Path) -> None:
    """Label timelines of one clip: heights and speed, contacts, actions, gait and phase."""
    plt = pyplot()
    labels = clip.labels
    seconds = np.arange(clip.frame_count) / FPS
    fig, axes = plt.subplots(
        5, 1, figsize=(12, 8.5), sharex=True, gridspec_kw={"height_ratios": [2, 1.2, 1.2, 0.5, 1]}
    )
    ax = axes[0]
    ax.plot(seconds, labels.hips_height_m * 100, label="hips above ground (cm)", color="k")
    ax.plot(seconds, labels.ground_m * 100, label="ground (cm)", color="#8c564b")
    ax.plot(seconds, labels.body_pitch_deg, label="body pitch (deg)", color="#9467bd", lw=0.8)
    ax.plot(seconds, labels.root_speed_mps * 20, label="speed (x20 m/s)", color="#1f77b4", lw=0.8)
    ax.legend(loc="upper right", fontsize=7, ncol=4)
    ax.set_title(clip.name)
    ax = axes[1]
    for p in range(len(PAW_NAMES)):
        spans = true_spans(labels.contacts[:, p])
        ax.broken_barh([(s / FPS, (e - s) / FPS) for s, e in spans], (p - 0.4, 0.8), color="k")
    ax.set_yticks(range(4), PAW_NAMES, fontsize=7)
    ax.invert_yaxis()
    ax.set_ylabel("contacts", fontsize=8)
    ax = axes[2]
    ax.stackplot(seconds, labels.actions.T, colors=ACTION_COLOURS, labels=ACTIONS)
    ax.set_ylabel("actions", fontsize=8)
    ax.legend(loc="upper right", fontsize=7, ncol=6)
    ax = axes[3]
    for i, name in enumerate(GAITS):
        spans = true_spans(labels.gait_index == i)
        ax.broken_barh(
            [(s / FPS, (e - s) / FPS) for s, e in spans], (0, 1), color=GAIT_COLOURS[i], label=name
        )
    ax.set_yticks([])
    ax.set_ylabel("gait", fontsize=8)
    ax.legend(loc="upper right", fontsize=7, ncol=4)
    axes[4].plot(seconds, labels.phase_rad, color="k", lw=0.8)
    axes[4].set(ylabel="phase (rad)", xlabel="seconds")
    fig.tight_layout()
    fig.savefig(path, dpi=60)
    plt.close(fig)


def true_spans(mask: np.ndarray) -> list[tuple[int, int]]:
    edges = np.diff(np.concatenate([[0], mask.astype(np.int8), [0]]))
    return list(zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1), strict=True))


def markdown_table(rows: list[dict], columns: list[str], formats: dict | None = None) -> str:
    formats = formats or {}
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        cells = []
        for column in columns:
            value = row[column]
            cells.append("-" if value is None else formats.get(column, "{}").format(value))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_report(result, report_dir: Path, timeline_clip: str | None = None) -> Path:
    """dataset.md with the tables, gait_vs_speed.png, the chosen clip's timeline and one
    label timeline per clip under labels/."""
    from canis.training.dataset import class_balance

    report_dir.mkdir(parents=True, exist_ok=True)
    arrays, metadata = result.arrays, result.metadata
    plot_gait_vs_speed(arrays["gait"], arrays["speed"], report_dir / "gait_vs_speed.png")
    (report_dir / "labels").mkdir(exist_ok=True)
    for clip in result.clips:
        plot_clip_timeline(clip, report_dir / "labels" / f"{clip.name}.png")
    names = [clip.name for clip in result.clips]
    timeline_clip = timeline_clip or default_timeline_clip(result.clips)
    if timeline_clip is not None and timeline_clip not in names:
        raise ValueError(f"--timeline-clip {timeline_clip!r} is not among the clips built")

    balance = class_balance(arrays)
    balance_rows = [
        {
            "class": name,
            "before": balance["before"][kind][name],
            "after": balance["after"][kind][name],
        }
        for kind in ("actions", "gaits")
        for name in balance["before"][kind]
    ]
    validation = arrays["validation"]
    lines = [
        "# Dataset report",
        "",
        f"Built from `{metadata['source']}` (layout hash `{metadata['layout_hash']}`; when, "
        f"and in how long, is in the dataset file's metadata). {len(validation)} training pairs "
        f"(clips and their mirrors), {int(validation.sum())} of them held out for validation: "
        f"{', '.join(metadata['validation_clips'])} ({metadata['validation_rule']}, seed "
        f"{metadata['seed']}).",
        "",
        "## Actions (all pairs, mirrored included; the paper's Table 1)",
        "",
        markdown_table(
            action_table(arrays["action"]),
            ["action", "seconds", "frames", "share"],
            {"seconds": "{:.1f}", "share": "{:.1%}"},
        ),
        "",
        "## Gaits of locomotion frames (footfall classifier)",
        "",
        markdown_table(
            gait_table(arrays["gait"], arrays["speed"]),
            ["gait", "frames", "share", "median_speed_mps"],
            {"share": "{:.1%}", "median_speed_mps": "{:.2f}"},
        ),
        "",
        "![gait vs speed](gait_vs_speed.png)",
        "",
        "## Class balance before and after oversampling",
        "",
        f"Sampling weights {metadata['oversample_weights']} per frame (the paper copies trot "
        "and canter cycles 11 times). Action shares are over all pairs, gait shares over "
        "locomotion pairs.",
        "",
        markdown_table(
            balance_rows, ["class", "before", "after"], {"before": "{:.1%}", "after": "{:.1%}"}
        ),
        "",
        "## Labels per clip (as captured, not mirrored)",
        "",
        markdown_table(
            clip_summary_rows(result.clips),
            ["clip", "seconds", "actions", "jumps", "gaits", "top_speed_mps"],
            {"seconds": "{:.1f}", "top_speed_mps": "{:.1f}"},
        ),
        "",
        "## Skipped clips",
        "",
        "\n".join(f"- {s['clip']}: {s['reason']}" for s in metadata["skipped"]) or "None.",
        "",
        *(
            f"Resampled to 60 fps: {r['clip']} (captured at {r['from_fps']:g} fps).\n"
            for r in metadata.get("resampled", [])
        ),
        f"## Contacts, actions, gait and phase of {timeline_clip}",
        "",
        f"![timeline](labels/{timeline_clip}.png)" if timeline_clip else "No clip.",
        "",
        "Every clip's timeline is in `labels/`.",
    ]
    path = report_dir / "dataset.md"
    path.write_text("\n".join(lines) + "\n")
    (report_dir / "summary.json").write_text(
        json.dumps(
            {
                # Without the build's date and duration: the same data gives the same report.
                "metadata": {
                    k: v for k, v in metadata.items() if k not in ("built", "build_seconds")
                },
                "class_balance": balance,
                "actions": action_table(arrays["action"]),
                "gaits": gait_table(arrays["gait"], arrays["speed"]),
            },
            indent=1,
        )
        + "\n"
    )
    return path

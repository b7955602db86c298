"""`canis evaluate ablation`: which fine-tuning terms earn their keep, and which of the recipe's
settings move the held-out figures, on the held-out replay.

Each row is a network made with one term off or one setting changed (or the recipe as it
is), named NAME@SEED; the first name is the reference every other row is compared with at
the same seed. A change counts when it moves a held-out figure by more than the reference
moves between seeds (the spread: the largest difference between two seeds' runs of the
reference). The figures are the replay's (evaluation/replay.py) and the pose after a
jump and a stop (after_actions.py)."""

from __future__ import annotations

from itertools import combinations

# (label, how to read it from one model's results): the held-out figures a term is judged on.
FIGURES = {
    "walk skating x": lambda r: r["walk"]["skating_vs_mocap"],
    "turn skating x": lambda r: r["turn"]["skating_vs_mocap"],
    "canter skating x": lambda r: r["canter"]["skating_vs_mocap"],
    "moving skating x": lambda r: r["moving"]["skating_vs_mocap"],
    "moving speed reached": lambda r: r["moving"]["speed_reached"],
}
HEAD = "head pitch deg (moving median)"
# The results page's sections this command writes: (section title, what each row is).
SECTIONS = {
    "ablation": (
        "Fine-tuning terms, one off at a time (held-out replay)",
        "Each row is fine-tuned from the plain network of its seed with one term off; "
        "`{reference}` has every term.",
    ),
    "generalisation": (
        "The recipe's settings (held-out replay)",
        "Each row is the recipe (training/configs/mann8.toml) with one setting changed, "
        "made by its command from a copy of the file so changed; `{reference}` is the recipe "
        "with `sniffing = true`, which every other row also sets but `sniffing rows left "
        "undrawn` (the file with `jump_oversample = 1`) and `jump rows drawn Nx` (the file "
        "with `jump_oversample = N`: 3 is the file as it is).",
    ),
}


def parse_row(name: str) -> tuple[str, str]:
    """ "no moving skating@2" -> ("no moving skating", "2"); a name without @ is seed ""."""
    row, _, seed = name.rpartition("@")
    return (row, seed) if row else (name, "")


def figures(results: dict, name: str) -> dict[str, float]:
    """FIGURES and the head's median pitch of one model's replay results."""
    row = {label: read(results[name]) for label, read in FIGURES.items()}
    row[HEAD] = results[name]["moving"]["pose_p10_p50_p90"]["head_pitch_deg"][1]
    return row


def spread(results: dict, reference: str) -> dict[str, float] | None:
    """The reference's largest difference between two seeds, per figure (None: one seed)."""
    runs = [figures(results, m) for m in results["models"] if parse_row(m)[0] == reference]
    if len(runs) < 2:
        return None
    return {k: max(abs(a[k] - b[k]) for a, b in combinations(runs, 2)) for k in runs[0]}


def table(results: dict) -> list[dict]:
    """One entry per model: its row, seed, figures, the change from the reference at the same
    seed, and the figures whose change is beyond the reference's seed spread."""
    models = results["models"]
    reference = parse_row(models[0])[0]
    by_seed = {parse_row(m)[1]: figures(results, m) for m in models if parse_row(m)[0] == reference}
    limit = spread(results, reference)
    rows = []
    for model in models:
        row, seed = parse_row(model)
        own = figures(results, model)
        base = by_seed.get(seed)
        change = None if base is None or row == reference else {k: own[k] - base[k] for k in own}
        beyond = None
        if change is not None and limit is not None:
            beyond = [k for k, d in change.items() if abs(d) > limit[k]]
        after = results["after_actions"][model]
        rows.append(
            {
                "row": row, "seed": seed, "figures": own, "change": change, "beyond": beyond,
                "after_jump_head": after["jump from a stand"]["head_share"],
                "after_stop_head": after["stop from a walk"]["head_share"],
            }
        )  # fmt: skip
    return rows


def _cell(label: str, value: float, sign: str = "") -> str:
    """A figure as the table shows it: shares in %, the head in whole degrees."""
    if "reached" in label:
        return f"{value:{sign}.0%}"
    return f"{value:{sign}.0f}" if label == HEAD else f"{value:{sign}.2f}"


def markdown(results: dict, command: str, machine: str, section: str = "ablation") -> str:
    title, rows_are = SECTIONS[section]
    rows = table(results)
    reference = rows[0]["row"]
    limit = spread(results, reference)
    truth = results["GT"]["moving"]["pose_p10_p50_p90"]["head_pitch_deg"][1]
    labels = [*FIGURES, HEAD]
    lines = [
        f"## {title}",
        "",
        f"Reproduce: `{command}` ({machine}). Clips: {', '.join(results['clips'])}. "
        + rows_are.format(reference=reference)
        + f" A change counts when it is larger than `{reference}`'s spread "
        "between seeds (marked **bold**). Skating is x the mocap's on the same frames; the "
        f"mocap's head pitch median is {truth:.0f} deg; after a jump / a stop: the head's "
        "height 1 s later as a share of the standing pose's.",
        "",
        "| row | seed | " + " | ".join(labels) + " | after a jump / a stop |",
        "|---|---|" + "---:|" * len(labels) + "---|",
    ]
    for r in rows:
        cells = []
        for k in labels:
            text = _cell(k, r["figures"][k])
            if r["change"] is not None:
                delta = _cell(k, r["change"][k], "+")
                text += f" (**{delta}**)" if k in (r["beyond"] or ()) else f" ({delta})"
            cells.append(text)
        after = f"{r['after_jump_head']:.0%} / {r['after_stop_head']:.0%}"
        lines.append(f"| {r['row']} | {r['seed']} | " + " | ".join(cells) + f" | {after} |")
    if limit is not None:
        cells = " | ".join(_cell(k, limit[k]) for k in labels)
        lines.append(f"| spread of {reference} | | {cells} | |")
    return "\n".join(lines) + "\n"

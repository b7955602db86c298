"""Model cards: what a shipped model was trained on, how, on what, how well, and how it holds
up in a closed loop. Generated from the checkpoint, its run's log.csv, the export's parity
report and tools.closed_loop, so every figure in a card was measured."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from canis.export.finetune_card import fine_tuning_lines, fine_tuning_log, fine_tuning_reproduce
from canis.export.onnx_export import LICENCE
from canis.training.optimisation import DROPOUT, WEIGHT_DECAY

PARITY_NOTE = (
    "256 random input rows in the training range through the runtime; mean and max |difference| "
    "of the pose output y in units of its standard deviation"
)


def _log_rows(run_dir: Path) -> list[dict]:
    path = run_dir / "log.csv"
    if not path.exists():
        return []
    with open(path, newline="") as file:
        return list(csv.DictReader(file))


def _precision_line(export_report: dict) -> str:
    check = export_report.get("precision_check")
    if not check or check["precision"] == "fp32":
        return (
            "fp32 (float32 weights as trained). Reduced-precision variants are made from this "
            "file by `canis export MODEL.onnx --precision fp16|int8` (export/precision.py)."
        )
    return (
        f"{check['precision']}, converted from the fp32 export by ONNX Runtime's tools "
        f"(export/precision.py); against fp32 on random inputs, y differs by "
        f"{check['y_mean_error_std']:.4f} std on average (max {check['y_max_error_std']:.3f})."
    )


def closed_loop_section(closed_loop: dict) -> list[str]:
    runs = closed_loop["runs"]
    lines = [
        "## Closed loop",
        "",
        f"Driven headless by `export/closed_loop.py` for {runs[0]['seconds']:.0f} s per run from "
        "the standing keyframe: forward, and turning at "
        f"{max(r['turn_rate_degps'] for r in runs):.0f} deg/s, at the paper's gait speeds. Speed "
        "is the mean root speed after the first 3 s. As shipped, the runtime's speed tracking "
        "(a slow integral correction of the asked speed, `Controller(speed_tracking=True)`) is "
        "on; the last two columns are the network alone. Overall, as shipped: "
        f"{'passed' if closed_loop['passed'] else 'FAILED'} (finite, hips above the ground, "
        "speed within 20%).",
        "",
        "| commanded m/s | turning | finite | min hips height m | mean speed m/s | speed error "
        "| untracked speed m/s | untracked error |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        raw = r.get("untracked", {})
        lines.append(
            f"| {r['commanded_mps']} | {'yes' if r['turn_rate_degps'] else 'no'} | "
            f"{'yes' if r['finite'] else 'NO'} | {r['min_hips_height_m']:.3f} | "
            f"{r['mean_speed_mps']:.2f} | {r['speed_error']:.0%} | "
            f"{raw.get('mean_speed_mps', float('nan')):.2f} | "
            f"{raw.get('speed_error', float('nan')):.0%} |"
        )
    return lines


def write_variant_card(
    model_path: Path, check: dict, closed_loop: dict, note: str = "", reproduce: str = ""
) -> Path:
    """The card of a reduced-precision variant: what it was converted from and how, how far
    its outputs are from fp32's, and its own closed loop. Training is the fp32 card's.
    `reproduce`: the command that made it, when a recipe did (`canis train --config`)."""
    import onnx

    meta = {p.key: p.value for p in onnx.load(str(model_path)).metadata_props}
    source = Path(check["source"])
    kind = meta["canis.kind"]
    name = {"mann": f"MANN-{meta.get('canis.experts')}", "pfnn": "PFNN", "vnn": "Vanilla NN"}[kind]
    figures = ", ".join(
        f"{k} {v:.4f}" for k, v in check.items() if k.endswith(("_std", "_abs_error"))
    )
    lines = [
        f"# {name} {check['precision']}: `{model_path.name}`",
        "",
        f"- **Precision**: {check['precision']}, converted from `{source.name}` "
        f"({meta.get('canis.precision_source', '')}) by {meta.get('canis.precision_tool')}.",
        f"- **Size**: {check['bytes'] / 1e6:.1f} MB against {source.stat().st_size / 1e6:.1f} MB "
        "at fp32.",
        f"- **Against fp32** ({PARITY_NOTE}): {figures}.",
        f"- **Training, data, licence**: as `{source.with_suffix('.md').name}`. {LICENCE}.",
        "- **Quality gate**: docs/RESULTS.md, section *Precision* (`canis evaluate precision`), "
        "measures this variant "
        "beside fp32 in closed loop.",
        f"- **Reproduce**: `{reproduce}`."
        if reproduce
        else f"- **Reproduce**: `./run canis export {check['source']} --precision "
        f"{check['precision']} --out {model_path} --card`.",
        *([f"- **Note**: {note}"] if note else []),
        "",
        *closed_loop_section(closed_loop),
    ]
    card = model_path.with_suffix(".md")
    card.write_text("\n".join(lines) + "\n")
    model_path.with_suffix(".closed_loop.json").write_text(json.dumps(closed_loop, indent=1))
    return card


def write_card(
    model_path: Path,
    config: dict,
    checkpoint_path: Path,
    export_report: dict,
    closed_loop: dict,
    note: str = "",
    reproduce: str = "",
) -> Path:
    """The model card beside `model_path`. `reproduce`: the one command that made the model,
    when a recipe did (`canis train --config`); otherwise the card spells out each step."""
    train = config["train"]["config"]
    rows = _log_rows(checkpoint_path.parent)
    checkpoint_name = checkpoint_path.name
    fine_tuned = "closed_loop" in config  # `canis finetune`: its log.csv is the fine-tuning's
    throughput = [float(r["samples_per_s"]) for r in rows if "samples_per_s" in r]
    name = {"mann": f"MANN-{config.get('experts')}", "pfnn": "PFNN", "vnn": "Vanilla NN"}[
        config["kind"]
    ]
    lines = [
        f"# {name}: `{model_path.name}`",
        "",
        f"- **Data**: the MANN dog motion capture, 43 clips mirrored (see docs/dataset/dataset.md);"
        f" dataset built {config['dataset']['built']}, validation clips "
        f"{', '.join(config['dataset']['validation_clips'])}.",
        f"- **Licence**: {LICENCE}. Non-commercial use only, with attribution.",
        f"- **Schedule**: `{train['schedule']}`: {config['epoch']} of {train['epochs']} epochs "
        f"completed, batch {train['batch_size']}, AdamW lr {train['lr']} with cosine warm "
        f"restarts (T0 {train['restart_epochs']}, Tmult {train['restart_mult']}), weight decay "
        f"{train['weight_decay']}, dropout {train.get('dropout', DROPOUT)}"
        + ("" if train.get("drop_commands", True) else " (the commands' inputs never dropped)")
        + ", "
        + (
            "sampling balanced over gaits and actions"
            if train.get("balanced")
            else "trot/canter sampled 11x"
            if train.get("oversample", True)
            else "uniform sampling"
        )
        + ("" if train.get("sniffing", True) else ", sniffing rows never drawn")
        + ("" if train.get("sniffing_walks", True) else ", sniffing walks never drawn")
        + _jump_words(train)
        + _generalisation_options(train)
        + ": "
        + (
            "the paper's full schedule."
            if train["schedule"] == "paper"
            else "a shortened CPU schedule, not the paper's 150 epochs at batch 32 (no CUDA "
            "GPU was available to train this model)."
        ),
        f"- **Hardware**: {config['machine']}; "
        + (
            f"{min(throughput):.0f}-{max(throughput):.0f} training samples/s."
            if throughput
            else "throughput not logged."
        ),
        *(fine_tuning_lines(config, rows) if fine_tuned else []),
        "- **Final loss** (MSE on standardised outputs"
        + (", after fine-tuning; train adds the weighted terms" if fine_tuned else "")
        + f"): train {float(config['last']['train_loss']):.4f}, validation "
        f"{float(config['last']['validation_loss']):.4f} (best validation "
        f"{config['best_validation_loss']:.4f}" + (" before fine-tuning)." if fine_tuned else ")."),
        f"- **Precision**: {_precision_line(export_report)}",
        f"- **Export**: {export_report['bytes'] / 1e6:.1f} MB ONNX; ONNX Runtime vs PyTorch max "
        "abs error (fp32) "
        + ", ".join(f"{k} {v:.1e}" for k, v in export_report["parity_max_abs_error"].items())
        + ".",
        f"- **Reproduce**: `{reproduce}`."
        if reproduce
        else fine_tuning_reproduce(config, model_path, checkpoint_name)
        if fine_tuned
        else f"- **Reproduce**: `./run canis train --model {config['kind']}"
        + (f" --experts {config['experts']}" if config["kind"] == "mann" else "")
        + f" --schedule {train['schedule']} --epochs {train['epochs']} --precision "
        f"{train.get('precision', 'fp32')}{_training_options(train)} --out runs/NAME` then "
        f"`./run canis export runs/NAME/{checkpoint_name} --out {model_path.name} "
        "--dataset data/dog_dataset.npz --card`.",
        *([f"- **Note**: {note}"] if note else []),
        "",
        *closed_loop_section(closed_loop),
    ]
    if fine_tuned:
        lines += ["", "## Fine-tuning log", "", *fine_tuning_log(rows)]
    else:
        lines += [
            "",
            "## Training log",
            "",
            "| epoch | train loss | validation loss | lr |",
            "|---|---|---|---|",
        ]
        lines += [
            f"| {r['epoch']} | {float(r['train_loss']):.4f} | {float(r['validation_loss']):.4f}"
            f" | {float(r['lr']):.2e} |"
            for r in rows
        ]
    card = model_path.with_suffix(".md")
    card.write_text("\n".join(lines) + "\n")
    model_path.with_suffix(".closed_loop.json").write_text(json.dumps(closed_loop, indent=1))
    return card


def _study_options(train: dict) -> list[tuple[str, str]]:
    """The generalisation study's `canis train` options a run set, each as (the card's words,
    the option)."""
    options = []
    if train.get("input_noise"):
        noise = train["input_noise"]
        options.append((f"input noise std {noise}", f"--input-noise {noise}"))
    if train.get("holdout", "clips") != "clips":
        options.append((f"holdout {train['holdout']}", f"--holdout {train['holdout']}"))
    if not train.get("mirrored", True):
        options.append(("no mirrored clips", "--no-mirrored"))
    return options


def _training_options(train: dict) -> str:
    """`canis train` options a run set away from its schedule's defaults, for the card's
    reproduce line."""
    options = []
    if train.get("hidden") is not None:
        options.append(f"--hidden {train['hidden']}")
    if train.get("dropout", DROPOUT) != DROPOUT:
        options.append(f"--dropout {train['dropout']}")
    if not train.get("drop_commands", True):
        options.append("--no-drop-commands")
    if train["weight_decay"] != WEIGHT_DECAY:
        options.append(f"--weight-decay {train['weight_decay']}")
    options += [option for _, option in _study_options(train)]
    if not train.get("oversample", True):
        options.append("--no-oversample")
    if train.get("balanced"):
        options.append("--balanced")
    if not train.get("sniffing", True):
        options.append("--no-sniffing")
    if not train.get("sniffing_walks", True):
        options.append("--no-sniffing-walks")
    if train.get("jump_oversample", 1.0) != 1.0:
        options.append(f"--jump-oversample {train['jump_oversample']:g}")
    return "".join(f" {option}" for option in options)


def _jump_words(train: dict) -> str:
    times = train.get("jump_oversample", 1.0)
    return "" if times == 1.0 else f", jump rows drawn {times:g}x as often"


def _generalisation_options(train: dict) -> str:
    """The card's words for the generalisation study's options, where a run set them."""
    return "".join(f", {words}" for words, _ in _study_options(train))

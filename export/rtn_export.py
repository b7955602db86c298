"""`canis export-rtn`: a transition-network checkpoint -> two ONNX graphs for the runtime:
`<name>_step.onnx` (one generation step, the LSTM state as explicit inputs and outputs) and
`<name>_init.onnx` (the learned hidden-state initialiser). The check runs whole transitions
through ONNX Runtime (runtime/transition.py, the code the game uses) and through PyTorch and
fails when any generated frame differs by MAX_ROLLOUT_ERROR or more: errors compound over a
recurrent rollout, so a one-step check would not be enough. A model trained with target noise
gets the step input `target_noise` (runtime/transition.py), checked with noise on as well.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import torch
from canis.export.onnx_export import LICENCE, write_graph
from canis.runtime.features import FPS
from canis.runtime.inference import PRECISION_KEY
from canis.runtime.skeleton import DOG_JOINT_NAMES
from canis.runtime.transition import (
    INIT_INPUTS,
    INIT_OUTPUTS,
    NOISE_INPUT,
    STEP_INPUTS,
    STEP_OUTPUTS,
    TransitionModel,
)
from canis.runtime.transition_frames import (
    CONTEXT_FRAMES,
    FRAME_SIZE,
    contract_description,
    transition_layout_hash,
)
from canis.training.checkpoint import load_checkpoint, restore_model
from canis.training.rtn import (
    LSTM_UNITS,
    Rtn,
    empty_rtn,
    layer_widths,
    parameter_bytes,
    rollout,
)
from canis.training.train_rtn import initialisation_note
from torch import nn

from canis import __version__

MAX_ROLLOUT_ERROR = 1e-3
PARITY_LENGTHS = (5, 30, 60)


class StepGraph(nn.Module):
    def __init__(self, model: Rtn):
        super().__init__()
        self.model = model

    def forward(self, frame, placement, target, frames_to_arrival, h, c):
        return self.model.step(frame, placement, target, frames_to_arrival, h, c)


class NoisyStepGraph(StepGraph):
    """The step of a model trained with target noise: the noise is its last input."""

    def forward(self, frame, placement, target, frames_to_arrival, h, c, target_noise):
        return self.model.step(frame, placement, target, frames_to_arrival, h, c, target_noise)


class InitGraph(nn.Module):
    def __init__(self, model: Rtn):
        super().__init__()
        self.model = model

    def forward(self, first_frame):
        return self.model.initial_state(first_frame)


HELD_OUT_KEYS = ("validation_clips", "seed", "built")


def metadata(kind: str, config: dict, model: Rtn) -> dict[str, str]:
    train = config["train"]["config"]
    return {
        "canis.kind": kind,
        PRECISION_KEY: "fp32",  # export/precision.py makes the fp16 and int8 variants
        "canis.transition_layout_hash": transition_layout_hash(),
        "canis.transition_contract": json.dumps(contract_description()),
        "canis.fps": str(FPS),
        "canis.joint_names": json.dumps(list(DOG_JOINT_NAMES)),
        "canis.parameter_bytes": str(parameter_bytes(model)),
        "canis.residual": model.residual,
        "canis.target_noise_sigma": str(model.noise_sigma),
        "canis.licence": LICENCE,
        "canis.training_schedule": json.dumps(train | {"steps_completed": config["step"]}),
        "canis.training_result": json.dumps(
            {"last": config["last"], "best_validation_loss": config["best_validation_loss"]}
        ),
        # The clips it never trained on: `canis evaluate transitions` refuses data that holds
        # out others, which would score it on clips it learnt.
        "canis.dataset": json.dumps(
            {k: config["dataset"][k] for k in HELD_OUT_KEYS if k in config["dataset"]}
        ),
        "canis.exported": datetime.now(UTC).isoformat(timespec="seconds"),
        "canis.version": __version__,
    }


def parity_windows(model: Rtn, dataset_path: Path | None, rows=8, seed=0):
    """(context, context placements, target) sets: real held-out windows when a transition
    dataset is given, and random frames around the training statistics."""
    rng = np.random.default_rng(seed)
    mean, std = model.frame_mean.numpy(), model.frame_std.numpy()
    sets = {}
    for length in PARITY_LENGTHS:
        context = mean + std * rng.normal(size=(rows, CONTEXT_FRAMES, FRAME_SIZE))
        yaw = rng.uniform(-np.pi, np.pi, size=(rows, CONTEXT_FRAMES))
        placements = np.concatenate(
            [
                rng.normal(size=(rows, CONTEXT_FRAMES, 2)),
                np.sin(yaw)[..., None],
                np.cos(yaw)[..., None],
            ],
            axis=-1,
        )
        target = mean + std * rng.normal(size=(rows, FRAME_SIZE))
        sets[f"random_{length}"] = (length, context, placements, target)
    if dataset_path is not None:
        from canis.training.train_rtn import windows
        from canis.training.transition_data import load

        data = load(dataset_path)
        for length in PARITY_LENGTHS:
            starts = rng.choice(data.window_starts(data.clips(validation=True), length), rows)
            context, placements, target, _ = windows(data, starts, length)
            sets[f"real_{length}"] = (length, context.numpy(), placements.numpy(), target.numpy())
    return sets


def export_rtn(checkpoint_path: Path, out_step: Path, dataset_path: Path | None = None) -> dict:
    """Writes <out_step> and its _init sibling; returns the parity report."""
    checkpoint = load_checkpoint(checkpoint_path, layout=transition_layout_hash())
    if checkpoint.config.get("kind") != "rtn":
        raise ValueError(
            f"{checkpoint_path}: a {checkpoint.config.get('kind')} checkpoint, not rtn"
        )
    train_config = checkpoint.config["train"]["config"]
    model = empty_rtn(
        train_config.get("residual", "previous"),
        train_config.get("units", LSTM_UNITS),
        train_config.get("target_noise", 0.0),
    )
    restore_model(checkpoint, model, checkpoint_path)
    model.eval()
    if "_step" not in out_step.name:
        raise ValueError(f"{out_step}: name the step graph <name>_step.onnx")
    out_init = out_step.with_name(out_step.name.replace("_step", "_init"))
    out_step.parent.mkdir(parents=True, exist_ok=True)
    partial = {p: p.with_name(p.name + ".partial.onnx") for p in (out_step, out_init)}
    n = 2
    step_example = (
        torch.zeros(n, FRAME_SIZE),
        torch.tensor([[0.0, 0.0, 0.0, 1.0]] * n),
        torch.zeros(n, FRAME_SIZE),
        torch.ones(n, 1),
        torch.zeros(n, model.units),
        torch.zeros(n, model.units),
    )
    config = checkpoint.config
    noisy = model.noise_sigma > 0
    write_graph(
        NoisyStepGraph(model) if noisy else StepGraph(model),
        step_example + ((torch.zeros(n, model.noise_width),) if noisy else ()),
        partial[out_step],
        STEP_INPUTS + [NOISE_INPUT] if noisy else STEP_INPUTS,
        STEP_OUTPUTS,
        metadata("rtn_step", config, model),
    )
    write_graph(
        InitGraph(model),
        (torch.zeros(n, FRAME_SIZE),),
        partial[out_init],
        INIT_INPUTS,
        INIT_OUTPUTS,
        metadata("rtn_init", config, model),
    )
    # The partial names keep the _step/_init pairing, so the runtime finds the init graph.
    report = rollout_parity(model, partial[out_step], dataset_path)
    for path, tmp in partial.items():
        tmp.replace(path)
    return {
        "rollout_max_abs_error": report,
        "parameter_bytes": parameter_bytes(model),
        "bytes": {p.name: p.stat().st_size for p in (out_step, out_init)},
    }


def rollout_parity(model: Rtn, step_path: Path, dataset_path: Path | None) -> dict[str, float]:
    """Max abs difference between PyTorch and ONNX Runtime over whole transitions (and, for
    a model trained with target noise, over the same ones sampled with variation 1)."""
    runtime_model = TransitionModel(step_path)
    report = {}
    sets = [(name, window, 0.0) for name, window in parity_windows(model, dataset_path).items()]
    if model.noise_sigma > 0:
        sets += [(name + "_noise", window, 1.0) for name, window, _ in sets]
    for name, (length, context, placements, target), variation in sets:
        noise = runtime_model.target_noise(len(target), variation, np.random.default_rng(0))
        with torch.no_grad():
            expected = rollout(
                model,
                torch.as_tensor(context, dtype=torch.float32),
                torch.as_tensor(placements, dtype=torch.float32),
                torch.as_tensor(target, dtype=torch.float32),
                length,
                target_noise=torch.as_tensor(noise) if model.noise_sigma > 0 else None,
            )
        got = runtime_model.generate(
            context, placements, target, length, variation, np.random.default_rng(0)
        )
        error = max(float(np.abs(g - e.numpy()).max()) for g, e in zip(got, expected, strict=True))
        report[name] = error
        if not error < MAX_ROLLOUT_ERROR:
            for path in (step_path, runtime_model.init_path):
                path.unlink(missing_ok=True)
            raise ValueError(
                f"RTN export parity failed on {name}: over a {length}-frame rollout ONNX "
                f"Runtime differs from PyTorch by {error:.2e} (limit {MAX_ROLLOUT_ERROR:.0e})"
            )
    return report


def _stage_note(config: dict) -> str:
    """What the run was initialised from: as the run described it when it started (the source
    may since have been overwritten, e.g. a shipped RTN fine-tuned in place), or, for a run
    from before that was recorded, as the source reads now."""
    if "init_note" in config:
        return config["init_note"]
    return initialisation_note(config["train"]["config"].get("init_from", ""))


def _architecture(units: int) -> str:
    """The card's words for the layers of an RTN with `units` LSTM units."""
    widths = layer_widths(units)
    frame, future, decoder = (
        "-".join(map(str, widths[name]))
        for name in ("frame encoder", "target and offset encoders", "decoder")
    )
    return (
        f"frame encoder {frame}, target and offset encoders {future}, one {units}-unit LSTM, "
        f"decoder {decoder}-{FRAME_SIZE}"
    )


def write_rtn_card(out_step: Path, checkpoint_path: Path, report: dict, command: str) -> Path:
    """assets/models/<name>.md beside the graphs: data, schedule, machine, the training log
    and the export check, all read from the checkpoint, its log.csv and the export report."""
    import csv

    config = load_checkpoint(checkpoint_path, layout=transition_layout_hash()).config
    train = config["train"]["config"]
    log = checkpoint_path.parent / "log.csv"
    rows = list(csv.DictReader(open(log, newline=""))) if log.exists() else []
    lengths = [
        k.removeprefix("joint_error_cm_")
        for k in (rows[0] if rows else {})
        if k.startswith("joint_error_cm_")
    ]
    fk_lengths = [n for n in lengths if rows and f"fk_error_cm_{n}" in rows[0]]
    errors = ", ".join(f"{k} {v:.1e}" for k, v in report["rollout_max_abs_error"].items())
    hours = float(config.get("train_seconds", 0.0)) / 3600
    units = train.get("units", LSTM_UNITS)
    lines = [
        f"# RTN: `{out_step.name}` + `{out_step.name.replace('_step', '_init')}`",
        "",
        "The recurrent transition network (Harvey & Pal 2018) with the time-to-arrival "
        f"embedding of Robust Motion In-betweening (2020): {_architecture(units)} with a "
        "residual output, Leaky ReLU, learned hidden-state initialiser (`training/rtn.py`)"
        + ("" if units == LSTM_UNITS else f"; the paper's widths scaled by {units}/{LSTM_UNITS}")
        + ".",
        "",
        f"- **Data**: the MANN dog motion capture, every clip as captured and mirrored; held-out "
        f"clips {', '.join(config['dataset']['validation_clips'])} (the MANN dataset's rule).",
        f"- **Licence**: {LICENCE}. Non-commercial use only, with attribution.",
        f"- **Schedule**: {config['step']} of {train['steps']} steps, batch "
        f"{train['batch_size']}, AMSGrad lr {train['lr']} decayed by a cosine to "
        f"{train['final_lr_fraction']:.0%} of it, teacher forcing p = "
        f"{train['teacher_probability']}, FK loss weight {train.get('fk_weight', 0)}, residual "
        f"`{train.get('residual', 'previous')}`, transition length drawn per batch from 5 to 60 "
        "frames, 10 context frames"
        + (
            f", RMI's scheduled target noise sigma {train['target_noise']} (one draw per window "
            "on the target and offset codes, full from 30 frames before the target, none in the "
            "last 5; `variation` 1 at runtime)"
            if train.get("target_noise")
            else ""
        )
        + "; the paper trains 200 epochs at batch 32 (no CUDA GPU was available here)."
        + _stage_note(config),
        f"- **Hardware**: {config['machine']}; {hours:.2f} h of training.",
        f"- **Size**: {report['parameter_bytes'] / 1e6:.2f} MB of float32 parameters; files "
        + ", ".join(f"{k} {v / 1e6:.1f} MB" for k, v in report["bytes"].items())
        + ".",
        f"- **Export check**: whole rollouts through ONNX Runtime vs PyTorch, max abs error "
        f"{errors} (limit {MAX_ROLLOUT_ERROR:.0e}).",
        "- **Reproduce**: `./run canis dataset transitions`, then `./run canis train-rtn --out "
        f"{checkpoint_path.parent} --steps {train['steps']} --batch-size {train['batch_size']} "
        + ("" if units == LSTM_UNITS else f"--units {units} ")
        + f"--lr {train['lr']} --teacher-forcing {train['teacher_probability']} --seed "
        f"{train['seed']} --fk-weight {train.get('fk_weight', 0)} --residual "
        f"{train.get('residual', 'previous')} --precision {train.get('precision', 'fp32')}"
        + (f" --target-noise {train['target_noise']}" if train.get("target_noise") else "")
        + (f" --init-from {train['init_from']}" if train.get("init_from") else "")
        + f"` (add `--resume` after an interruption), then `{command}`.",
        "- **Evaluation**: docs/RESULTS.md (L2P, L2Q, NPSS against interpolation and zero "
        "velocity on the held-out clips"
        + ("; diversity and L2P of sampled transitions" if train.get("target_noise") else "")
        + ").",
        "",
        "## Training log",
        "",
        "Validation: free-running transitions (no teacher forcing, no target blend) of "
        f"{', '.join(lengths)} frames on held-out windows; joint error is the mean joint "
        "position error in cm in the target's frame, of the position channels and (FK) of the "
        "pose forward kinematics makes of the joint axes, which is what is shown.",
        "",
        "| step | train loss | validation loss | "
        + " | ".join(f"joint error {n} f (cm)" for n in lengths)
        + "".join(f" | FK joint error {n} f (cm)" for n in fk_lengths)
        + " |",
        "|---" * (3 + len(lengths) + len(fk_lengths)) + "|",
    ]
    every = max(1, len(rows) // 12)
    for row in rows[every - 1 :: every] if len(rows) > 12 else rows:
        lines.append(
            f"| {row['step']} | {float(row['train_loss']):.4f} | "
            f"{float(row['validation_loss']):.4f} | "
            + " | ".join(f"{float(row['joint_error_cm_' + n]):.2f}" for n in lengths)
            + "".join(f" | {float(row['fk_error_cm_' + n]):.2f}" for n in fk_lengths)
            + " |"
        )
    card = out_step.with_name(out_step.name.replace("_step.onnx", ".md"))
    card.write_text("\n".join(lines) + "\n")
    return card

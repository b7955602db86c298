"""`canis train-rtn`: trains the transition network on windows cut from the dog's frames.

A window is CONTEXT_FRAMES past frames, a transition of P frames and the target frame; P is
drawn per batch between MIN_ and MAX_TRANSITION_FRAMES, so one model serves every length (the
time-to-arrival embedding tells it how far the target is). Each step generates the P frames
and the target with fixed teacher forcing (the RTN paper's p = 0.2) and AMSGrad.

Loss (all on what the step returns): MSE of standardised frames, of the root placement
(x, z per PLACEMENT_SCALE_M and sin/cos of the yaw), POSITION_WEIGHT x MSE of the joints in
the target's frame per POSITION_SCALE_M (RMI's global-position term: an error at the root
moves every joint), and fk_weight x MSE of the positions forward kinematics makes of the joint
axes (RMI's FK term: the runtime shows the pose FK makes of the rotations, so the rotations
must place the joints, not only the position channels).

With `target_noise` (sigma > 0) each window's rollout gets one z ~ N(0, sigma) on its target
and offset codes, scaled by RMI's schedule (training/rtn.py); validation runs without it, as the
paper evaluates. `init_from` may be a checkpoint or an exported `_step.onnx` (with its `_init`
beside it): the shipped RTN fine-tuned with the noise on.

Resume is exact: each step's windows and teacher-forcing draws come from generators seeded by
(seed, step), and the learning rate is a function of the step.
"""

from __future__ import annotations

import csv
import json
import math
import platform
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import torch
from canis.runtime.transition_frames import (
    CONTEXT_FRAMES,
    MAX_TRANSITION_FRAMES,
    MIN_TRANSITION_FRAMES,
    POSITIONS,
    placement,
    transition_layout_hash,
)
from canis.training.checkpoint import (
    check_new_run,
    finite_loss,
    load_checkpoint,
    restore_model,
    restore_optimizer,
    save_checkpoint,
)
from canis.training.optimisation import autocast, fused_optimiser, precision_for_run
from canis.training.rtn import (
    LSTM_UNITS,
    Rtn,
    empty_rtn,
    fk_positions,
    offsets_to_target,
    rollout,
    to_target_frame,
)
from canis.training.torch_runtime import skeleton_tensors
from canis.training.train import identity_difference
from canis.training.transition_data import TransitionData, check_held_out
from canis.training.transition_data import load as load_transitions

PLACEMENT_SCALE_M = 0.5
POSITION_SCALE_M = 0.2
POSITION_WEIGHT = 0.5
VALIDATION_LENGTHS = (5, 15, 30, 45)
VALIDATION_WINDOWS = 64  # per length
LAST, BEST = "last.safetensors", "best.safetensors"


@dataclass
class RtnTrainConfig:
    steps: int = 6000
    batch_size: int = 64
    lr: float = 5e-4
    final_lr_fraction: float = 0.1  # cosine decay to this fraction of lr at the last step
    teacher_probability: float = 0.2
    residual: str = "interpolation"  # or "previous", the paper's (training/rtn.py)
    units: int = LSTM_UNITS  # the LSTM's size; the other widths scale with it
    fk_weight: float = 0.5
    init_from: str = ""  # a checkpoint or _step.onnx whose weights start the run (fine-tuning)
    target_noise: float = 0.0  # sigma of RMI's scheduled target noise; 0: none
    precision: str = "fp32"  # "bf16": autocast matmuls; "auto": see precision_for_run
    seed: int = 0
    eval_every: int = 250
    validation_windows: int = VALIDATION_WINDOWS  # per length; measuring only, like eval_every
    dataset: str = "data/dog_transitions.npz"

    def identity(self) -> dict:
        measuring = ("dataset", "eval_every", "validation_windows")
        identity = {k: v for k, v in asdict(self).items() if k not in measuring}
        if identity["units"] == LSTM_UNITS:  # as runs written before the size was a setting
            del identity["units"]
        if identity["target_noise"] == 0.0:  # as runs written before the noise was a setting
            del identity["target_noise"]
        if identity["precision"] == "fp32":  # as runs written before the precision was one
            del identity["precision"]
        return identity


def learning_rate(config: RtnTrainConfig, step: int) -> float:
    progress = min(step / max(config.steps, 1), 1.0)
    floor = config.final_lr_fraction
    return config.lr * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress)))


def windows(data: TransitionData, starts: np.ndarray, transition_frames: int):
    """Tensors of the windows beginning at rows `starts`: context frames and placements
    (B, C, D) / (B, C, 4), the target frame (B, D) and the truth of the P frames and the
    target (frames (B, P + 1, D), placements (B, P + 1, 4)), placed relative to the target."""
    length = CONTEXT_FRAMES + transition_frames + 1
    rows = starts[:, None] + np.arange(length)[None, :]
    target_rows = rows[:, -1]
    b = len(starts)
    placements = placement(
        data["root_xz_m"][rows].reshape(-1, 2).astype(np.float64),
        data["root_yaw_rad"][rows].reshape(-1).astype(np.float64),
        np.repeat(data["root_xz_m"][target_rows], length, axis=0),
        np.repeat(data["root_yaw_rad"][target_rows], length, axis=0),
    ).reshape(b, length, 4)
    frames = torch.as_tensor(data["frames"][rows])
    placements = torch.as_tensor(placements, dtype=torch.float32)
    return (
        frames[:, :CONTEXT_FRAMES],
        placements[:, :CONTEXT_FRAMES],
        frames[:, -1],
        (frames[:, CONTEXT_FRAMES:], placements[:, CONTEXT_FRAMES:]),
    )


def offset_statistics(data: TransitionData, seed: int, count: int = 2048):
    """Mean and standard deviation of the offsets to the target over true transitions."""
    rng = np.random.default_rng(seed)
    parts = []
    clips = data.clips(validation=False)
    for length in (MIN_TRANSITION_FRAMES, 15, 30, MAX_TRANSITION_FRAMES):
        starts = rng.choice(data.window_starts(clips, length), size=count // 4)
        _, _, target, (frames, placements) = windows(data, starts, length)
        b, p = frames.shape[:2]
        targets = target[:, None].expand(b, p, -1).reshape(b * p, -1)
        parts.append(
            offsets_to_target(frames.reshape(b * p, -1), placements.reshape(b * p, -1), targets)
        )
    offsets = torch.cat(parts).double()
    std = offsets.std(0)
    std[std < 1e-4] = 1.0
    return offsets.mean(0).float(), std.float()


def losses(model: Rtn, predicted, truth, fk_weight=0.0, skeleton=None) -> dict:
    """The loss terms; `skeleton` (parents, offsets tensor) is needed when fk_weight > 0."""
    frames, placements = predicted
    true_frames, true_placements = truth
    frame_error = (frames - true_frames) / model.frame_std
    placement_error = placements - true_placements
    positions = to_target_frame(frames.flatten(0, 1), placements.flatten(0, 1))[0]
    true_positions = to_target_frame(true_frames.flatten(0, 1), true_placements.flatten(0, 1))[0]
    terms = {
        "frame": frame_error.pow(2).mean(),
        "placement": (placement_error[..., :2] / PLACEMENT_SCALE_M).pow(2).mean()
        + placement_error[..., 2:].pow(2).mean(),
        "position": POSITION_WEIGHT
        * ((positions - true_positions) / POSITION_SCALE_M).pow(2).mean(),
    }
    if fk_weight > 0:
        shown = fk_positions(frames.flatten(0, 1), *skeleton)
        true_local = true_frames.flatten(0, 1)[:, POSITIONS].reshape(shown.shape)
        terms["fk"] = fk_weight * ((shown - true_local) / POSITION_SCALE_M).pow(2).mean()
    terms["total"] = sum(terms.values())
    return terms


def validation_windows(
    data: TransitionData, seed: int, count: int = VALIDATION_WINDOWS
) -> dict[int, np.ndarray]:
    rng = np.random.default_rng(seed + 7919)
    clips = data.clips(validation=True)
    picked = {}
    for length in VALIDATION_LENGTHS:
        starts = data.window_starts(clips, length)
        if len(starts):
            picked[length] = rng.choice(starts, size=min(count, len(starts)))
    return picked


@torch.no_grad()
def validate(model: Rtn, data, picked: dict[int, np.ndarray], fk_weight=0.0, skeleton=None):
    """Free-running losses and mean joint error (cm, target frame, no target blend) of the
    position channels and of the pose FK makes of the joint axes (what is shown)."""
    model.eval()
    report = {}
    for length, starts in picked.items():
        context, context_placements, target, truth = windows(data, starts, length)
        predicted = rollout(model, context, context_placements, target, length)
        terms = losses(model, predicted, truth, fk_weight, skeleton)
        true_positions = to_target_frame(*(t.flatten(0, 1) for t in truth))[0]
        positions = to_target_frame(*(t.flatten(0, 1) for t in predicted))[0]
        error = positions - true_positions
        shown = predicted[0].flatten(0, 1).clone()
        shown[:, POSITIONS] = fk_positions(shown, *skeleton).flatten(1)
        fk_error = to_target_frame(shown, predicted[1].flatten(0, 1))[0] - true_positions
        report[length] = {
            "loss": float(terms["total"]),
            "joint_error_cm": float(error.norm(dim=-1).mean() * 100),
            "fk_error_cm": float(fk_error.norm(dim=-1).mean() * 100),
        }
    model.train()
    return report


def create_rtn(
    data: TransitionData,
    seed: int,
    residual: str,
    units: int = LSTM_UNITS,
    noise_sigma: float = 0.0,
) -> Rtn:
    offset_mean, offset_std = offset_statistics(data, seed)
    torch.manual_seed(seed)
    return Rtn(
        data["frame_mean"], data["frame_std"], offset_mean, offset_std, residual, units, noise_sigma
    )


def check_start_held_out(data: TransitionData, source: str) -> None:
    """A run started from another RTN's weights validates on clips that one never saw."""
    if source.endswith(".onnx"):
        import onnx

        meta = {p.key: p.value for p in onnx.load(source, load_external_data=False).metadata_props}
    else:
        saved = load_checkpoint(source, layout=transition_layout_hash()).config["dataset"]
        meta = {"canis.dataset": json.dumps(saved)}
    check_held_out(data, meta, source)


def start_weights(model: Rtn, source: str) -> None:
    """Loads the weights that start a fine-tuning run: a checkpoint, or an exported RTN."""
    if source.endswith(".onnx"):
        from canis.training.checkpoint_from_onnx import rtn_weights_from_onnx

        model.load_state_dict(rtn_weights_from_onnx(source, model))
        return
    restore_model(load_checkpoint(source, layout=transition_layout_hash()), model, source)


def initialisation_note(source: str) -> str:
    """The model card's words for what a run was initialised from (a checkpoint or an exported
    RTN), read from it now: train_rtn records them when the run starts."""
    if not source:
        return ""
    if source.endswith(".onnx"):  # an exported RTN (start_weights)
        try:
            import onnx

            meta = {
                p.key: p.value for p in onnx.load(source, load_external_data=False).metadata_props
            }
            done = json.loads(meta.get("canis.training_schedule", "{}")).get("steps_completed")
        except Exception:  # onnx raises DecodeError, OSError, ... for an unreadable file
            return f" Initialised from the exported RTN `{source}` (no longer readable here)."
        return (
            f" Initialised from the weights of the exported RTN `{source}` (exported "
            f"{meta.get('canis.exported', '?')}, {done} steps of its own schedule, given by its "
            "card; an RTN shipped before is in the history: `git log -- "
            "assets/models/rtn_step.onnx`, then `git show COMMIT:assets/models/rtn_step.onnx` and "
            "its `rtn_init.onnx`)."
        )
    try:
        first = load_checkpoint(source, layout=transition_layout_hash()).config
    except (OSError, ValueError):
        return f" Initialised from `{source}` (no longer readable here)."
    t = first["train"]["config"]
    return (
        f" Initialised from `{source}`: {first['step']} steps of a {t['steps']}-step run at "
        f"batch {t['batch_size']}, lr {t['lr']}, FK weight {t.get('fk_weight', 0)}, residual "
        f"`{t.get('residual', 'previous')}`, {float(first.get('train_seconds', 0)) / 3600:.2f} h "
        f"(`./run canis train-rtn --out {Path(source).parent} --steps {t['steps']} --lr "
        f"{t['lr']} --fk-weight {t.get('fk_weight', 0)} --stop-after {first['step']}`)."
    )


def train_rtn(
    config: RtnTrainConfig,
    run_dir: Path,
    resume=False,
    progress=True,
    stop_after: int | None = None,
    force: bool = False,
):
    """Trains into run_dir (last/best checkpoints, log.csv). `stop_after` ends the run after
    that step as a kill would (after its checkpoint), for resuming later. A run_dir that holds
    a run is continued (resume) or replaced (force), never overwritten unasked."""
    from tqdm import tqdm

    check_new_run(Path(run_dir), resume, force)
    cpu = torch.device("cpu")
    data = load_transitions(config.dataset)
    if config.init_from and not resume:
        check_start_held_out(data, config.init_from)
    run_dir = Path(run_dir)
    layout = transition_layout_hash()
    checkpoint = load_checkpoint(run_dir / LAST, layout=layout) if resume else None
    resumed = checkpoint.config["train"]["identity"] if checkpoint else None
    config = replace(config, precision=precision_for_run(config.precision, cpu, resumed))
    if progress:
        print(f"precision {config.precision}, {torch.get_num_threads()} threads", flush=True)
    if resume:
        saved = checkpoint.config
        if saved["train"]["identity"] != config.identity():
            raise ValueError(
                f"{run_dir / LAST}: was trained with other settings: "
                f"{identity_difference(saved['train']['identity'], config.identity())}; "
                "resume with the same settings"
            )
        model = empty_rtn(config.residual, config.units, config.target_noise)
        restore_model(checkpoint, model, run_dir / LAST)
        optimizer = torch.optim.Adam(
            model.parameters(), lr=config.lr, amsgrad=True, fused=fused_optimiser(cpu)
        )
        restore_optimizer(checkpoint, model, optimizer)
        first_step, best = saved["step"], saved["best_validation_loss"]
        # As the run described its start then (a resumed run from before this was recorded:
        # as its source reads now).
        init_note = saved.get("init_note", initialisation_note(config.init_from))
    else:
        model = create_rtn(data, config.seed, config.residual, config.units, config.target_noise)
        if config.init_from:
            start_weights(model, config.init_from)
        init_note = initialisation_note(config.init_from)
        optimizer = torch.optim.Adam(
            model.parameters(), lr=config.lr, amsgrad=True, fused=fused_optimiser(cpu)
        )
        first_step, best = 0, math.inf
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "log.csv").unlink(missing_ok=True)
    picked = validation_windows(data, config.seed, config.validation_windows)
    skeleton = skeleton_tensors()
    clips = data.clips(validation=False)
    starts_by_length = {
        p: data.window_starts(clips, p)
        for p in range(MIN_TRANSITION_FRAMES, MAX_TRANSITION_FRAMES + 1)
    }
    model.train()
    started, seconds_before = time.perf_counter(), 0.0
    if resume:
        seconds_before = float(checkpoint.config.get("train_seconds", 0.0))
    bar = tqdm(range(first_step, config.steps), desc="rtn", unit="step", disable=not progress)
    running = []
    for step in bar:
        rng = np.random.default_rng([config.seed, step])
        length = int(rng.integers(MIN_TRANSITION_FRAMES, MAX_TRANSITION_FRAMES + 1))
        starts = rng.choice(starts_by_length[length], size=config.batch_size)
        context, context_placements, target, truth = windows(data, starts, length)
        generator = torch.Generator().manual_seed(config.seed * 1_000_003 + step)
        noise = None
        if config.target_noise > 0:  # one z per window (RMI: per sequence)
            noise = torch.randn(len(starts), model.noise_width, generator=generator)
        with autocast(config.precision, cpu):
            predicted = rollout(
                model,
                context,
                context_placements,
                target,
                length,
                truth,
                config.teacher_probability,
                generator,
                noise,
            )
        predicted = tuple(p.float() for p in predicted)
        terms = losses(model, predicted, truth, config.fk_weight, skeleton)
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(config, step)
        optimizer.zero_grad(set_to_none=True)
        terms["total"].backward()
        optimizer.step()
        running.append(finite_loss(float(terms["total"].detach()), f"step {step + 1}"))
        done = step + 1
        if done % config.eval_every == 0 or done == config.steps:
            report = validate(model, data, picked, config.fk_weight, skeleton)
            validation_loss = finite_loss(
                float(np.mean([r["loss"] for r in report.values()])), f"step {done}'s validation"
            )
            row = {
                "step": done,
                "train_loss": float(np.mean(running)),
                "validation_loss": validation_loss,
                "lr": learning_rate(config, step),
                "seconds": seconds_before + time.perf_counter() - started,
            } | {f"joint_error_cm_{p}": r["joint_error_cm"] for p, r in report.items()}
            row |= {f"fk_error_cm_{p}": r["fk_error_cm"] for p, r in report.items()}
            running = []
            log_path = run_dir / "log.csv"
            new = not log_path.exists()
            with open(log_path, "a", newline="") as file:
                writer = csv.DictWriter(file, fieldnames=list(row))
                if new:
                    writer.writeheader()
                writer.writerow(row)
            best = min(best, validation_loss)
            saved = {
                "kind": "rtn",
                "step": done,
                "train": {"config": asdict(config), "identity": config.identity()},
                "last": row,
                "best_validation_loss": best,
                "train_seconds": row["seconds"],
                "dataset": data.metadata,
                "init_note": init_note,
                "machine": f"{platform.machine()} CPU, torch {torch.__version__}, "
                f"{torch.get_num_threads()} threads",
            }
            if validation_loss <= best:
                save_checkpoint(run_dir / BEST, model, optimizer, {}, saved, layout=layout)
            save_checkpoint(run_dir / LAST, model, optimizer, {}, saved, layout=layout)
            bar.set_postfix(val=f"{validation_loss:.3f}")
        if stop_after is not None and done >= stop_after:
            break
    return model

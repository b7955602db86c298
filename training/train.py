"""`canis train`: MSE on standardised outputs, AdamW with cosine warm restarts, per-epoch CSV
log and safetensors checkpoints, exact resume, CUDA when present, DDP under torchrun.

Reproducibility: every epoch re-seeds the global RNG (dropout) and draws its samples from a
generator seeded by (seed, epoch), and the learning rate is a function of the position in the
schedule. Resuming from the checkpoint written after epoch e therefore continues exactly as if
the run had never stopped (tests/test_training.py checks it).
"""

from __future__ import annotations

import csv
import gc
import math
import os
import platform
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch
from canis.training.checkpoint import (
    check_new_run,
    finite_loss,
    load_checkpoint,
    restore_model,
    restore_optimizer,
    save_checkpoint,
)
from canis.training.dataset import HOLDOUTS
from canis.training.models import create_model
from canis.training.optimisation import (
    DROPOUT,
    SCHEDULES,
    WEIGHT_DECAY,
    autocast,
    fused_optimiser,
    precision_for_run,
)
from canis.training.optimisation import cycle_ends as schedule_cycle_ends
from canis.training.training_data import TrainingData
from torch import nn

LAST, BEST = "last.safetensors", "best.safetensors"
# Settings added after runs were written without them: a setting at its value here is left
# out of a run's identity, so those runs resume, and an absent one reads as this value.
IDENTITY_DEFAULTS = {
    "hidden": None,
    "precision": "fp32",
    "dropout": DROPOUT,
    "input_noise": 0.0,
    "holdout": "clips",
    "mirrored": True,
    "pose_residual": 0.0,
    "balanced": False,
    "sniffing": True,
    "sniffing_walks": True,
    "drop_commands": True,
    "jump_oversample": 1.0,
}


@dataclass
class TrainConfig:
    kind: str = "mann"
    experts: int = 8
    schedule: str = "paper"
    epochs: int = 150
    batch_size: int = 32
    lr: float = 1e-4
    weight_decay: float = WEIGHT_DECAY
    restart_epochs: int = 10
    restart_mult: int = 2
    hidden: int | None = None  # units per hidden layer; None: the paper's (training/models.py)
    seed: int = 0
    oversample: bool = True
    balanced: bool = False  # True: rows drawn by dataset.balanced_weights, not oversample's
    sniffing: bool = True  # False: the sniffing rows (training/labels.py) are never drawn
    sniffing_walks: bool = True  # False: nor the slow walks' (labels.sniffing_walk)
    # The jump's rows (0.6% of the training rows) drawn this many times as often as their
    # sampler's weight says: at 1 a jump asked mid-stride may barely leave the ground.
    jump_oversample: float = 1.0
    steps_per_epoch: int | None = None  # None: one pass over the training rows per epoch
    precision: str = "fp32"  # "bf16": autocast matmuls; "auto": see precision_for_run
    dataset: str = ""
    dropout: float = DROPOUT  # probability of dropping each layer's input in training
    # False: the trajectory's action and speed inputs are never dropped (models.command_columns)
    drop_commands: bool = True
    input_noise: float = 0.0  # std of Gaussian noise on the standardised training inputs
    holdout: str = "clips"  # training/dataset.py
    mirrored: bool = True  # False: train on the captured rows only, not their mirrors
    # > 0: the next pose as this share of the current one plus the network's change (models.
    # PoseResidual); 0: predicted whole, the paper's

    def __post_init__(self):
        for name in ("epochs", "batch_size", "experts"):
            if not 1 <= getattr(self, name) <= 10**7:
                option = name.replace("_", "-")
                raise ValueError(f"--{option} {getattr(self, name)}: must be at least 1")
        if not 0 < self.lr < math.inf:
            raise ValueError(f"--lr {self.lr}: must be a finite number over 0")
        if not 0 <= self.weight_decay < math.inf:  # inf made every weight NaN
            raise ValueError(f"--weight-decay {self.weight_decay}: must be 0 or more, finite")
        if not 0 <= self.input_noise < math.inf:
            raise ValueError(f"--input-noise {self.input_noise}: must be 0 or more, finite")
        if not 0 <= self.dropout < 1:
            raise ValueError(f"--dropout {self.dropout}: must be at least 0 and below 1")
        if not 1 <= self.jump_oversample < math.inf:
            raise ValueError(
                f"--jump-oversample {self.jump_oversample}: must be at least 1, finite"
            )
        if self.balanced and not self.oversample:
            raise ValueError("--balanced and --no-oversample: choose one way to draw the rows")
        if self.holdout not in HOLDOUTS:
            raise ValueError(f"--holdout {self.holdout!r}: choose one of {', '.join(HOLDOUTS)}")

    @classmethod
    def from_schedule(cls, schedule: str, **overrides) -> TrainConfig:
        if schedule not in SCHEDULES:
            raise ValueError(f"unknown schedule {schedule!r}; choose {', '.join(SCHEDULES)}")
        values = SCHEDULES[schedule] | {k: v for k, v in overrides.items() if v is not None}
        return cls(schedule=schedule, **values)

    def identity(self) -> dict:
        """What a resumed run must share with the run it continues."""
        identity = {k: v for k, v in asdict(self).items() if k not in ("epochs", "dataset")}
        return {
            k: v
            for k, v in identity.items()
            if k not in IDENTITY_DEFAULTS or v != IDENTITY_DEFAULTS[k]
        }


def cycle_ends(config: TrainConfig) -> list[int]:
    """Epochs after which a warm-restart cycle ends (the learning rate is at its lowest)."""
    return schedule_cycle_ends(config.epochs, config.restart_epochs, config.restart_mult)


def warm_restart_lr(config: TrainConfig, epoch_position: float) -> float:
    """Cosine annealing with warm restarts (SGDR) at a fractional epoch position."""
    period, start = config.restart_epochs, 0.0
    while epoch_position >= start + period:
        start += period
        period *= config.restart_mult
    return 0.5 * config.lr * (1 + math.cos(math.pi * (epoch_position - start) / period))


def _distributed() -> tuple[int, int]:
    """(rank, world size) under torchrun; (0, 1) otherwise."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1 and not torch.distributed.is_initialized():
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        torch.distributed.init_process_group(backend)
    return (torch.distributed.get_rank() if world > 1 else 0), world


def _device(rank: int) -> torch.device:
    if torch.cuda.is_available():
        local = int(os.environ.get("LOCAL_RANK", rank))
        torch.cuda.set_device(local)
        return torch.device("cuda", local)
    return torch.device("cpu")


def split_settings(checkpoint) -> dict:
    """The rows a checkpoint was trained on (`--holdout`, `--no-mirrored`), as TrainingData's
    keyword arguments: its input range (and PFNN's phase statistics) come from those rows, so
    a TrainingData made otherwise fails _check_same_dataset."""
    # A checkpoint converted from an export has no training settings: the dataset's split.
    identity = (checkpoint.config.get("train") or {}).get("identity") or {}
    return {
        "holdout": identity.get("holdout", IDENTITY_DEFAULTS["holdout"]),
        "mirrored": identity.get("mirrored", IDENTITY_DEFAULTS["mirrored"]),
    }


def identity_difference(saved: dict, wanted: dict) -> str:
    """The settings in which a checkpoint's identity and a run's differ, named, for the
    resume refusal (issue 17's bad input); a setting absent from either reads as its
    default (IDENTITY_DEFAULTS: e.g. precision fp32, hidden: the paper's)."""
    defaults = IDENTITY_DEFAULTS
    keys = sorted(set(saved) | set(wanted))
    return ", ".join(
        f"{key} {saved.get(key, defaults.get(key))!r} (now {wanted.get(key, defaults.get(key))!r})"
        for key in keys
        if saved.get(key, defaults.get(key)) != wanted.get(key, defaults.get(key))
    )


def _predict(model: nn.Module, kind: str, x: torch.Tensor, phase: torch.Tensor) -> torch.Tensor:
    if kind == "pfnn":
        return model(x, phase)
    out = model(x)
    return out[0] if isinstance(out, tuple) else out


def _epoch_indices(data: TrainingData, config: TrainConfig, epoch: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(config.seed * 1_000_003 + epoch)
    rows = len(data.weights)
    count = rows if config.steps_per_epoch is None else config.steps_per_epoch * config.batch_size
    jumps = config.jump_oversample != 1.0
    sniff_walks = not config.sniffing_walks
    if config.balanced or config.oversample or not config.sniffing or sniff_walks or jumps:
        weights = data.balanced_weights if config.balanced else data.weights
        if not config.oversample:
            weights = torch.ones_like(weights)
        if not config.sniffing:
            weights = weights * ~data.sniffing
        if sniff_walks:
            weights = weights * ~data.sniffing_walk
        if jumps:
            weights = torch.where(data.jumping, weights * config.jump_oversample, weights)
        return torch.multinomial(weights, count, replacement=True, generator=generator)
    return torch.randperm(rows, generator=generator)[:count]


def validation_loss(model, kind, data: TrainingData) -> float:
    """MSE on the held-out clips (every run's common yardstick)."""
    return mean_squared_error(model, kind, data.x_val, data.y_val, data.phase_val)


def within_clip_validation_loss(model, kind, data: TrainingData) -> float:
    """MSE on the held-out tails of the training clips (`--holdout within-clips`)."""
    return mean_squared_error(model, kind, data.x_within, data.y_within, data.phase_within)


@torch.no_grad()
def mean_squared_error(model, kind, x, y, phase, batch=8192) -> float:
    if len(x) == 0:
        return float("nan")
    model.eval()
    total = 0.0
    for start in range(0, len(x), batch):
        end = start + batch
        prediction = _predict(model, kind, x[start:end], phase[start:end])
        total += nn.functional.mse_loss(prediction, y[start:end], reduction="sum").item()
    return total / y.numel()


def train(
    config: TrainConfig,
    run_dir: Path,
    resume: bool = False,
    progress: bool = True,
    force: bool = False,
):
    """Trains into run_dir (last/best checkpoints, log.csv); returns the log rows. A run_dir
    that holds a run is continued (resume) or replaced (force), never overwritten unasked."""
    from tqdm import tqdm

    run_dir = Path(run_dir)
    check_new_run(run_dir, resume, force)
    rank, world = _distributed()
    device = _device(rank)
    checkpoint = load_checkpoint(run_dir / LAST) if resume else None
    resumed = checkpoint.config["train"]["identity"] if checkpoint else None
    config = replace(config, precision=precision_for_run(config.precision, device, resumed))
    if rank == 0 and progress:
        print(f"precision {config.precision}, {torch.get_num_threads()} threads", flush=True)
    data = TrainingData(config.dataset, config.kind, device, config.holdout, config.mirrored)
    if not config.sniffing_walks and data.sniffing_walk is None:
        raise ValueError(
            f"{config.dataset}: marks no sniffing walks (built before they were marked), which "
            "sniffing_walks = false leaves out: build it again (canis dataset build)"
        )
    if config.batch_size > len(data.x_train):
        raise ValueError(
            f"--batch-size {config.batch_size}: more than the {len(data.x_train)} training rows"
        )
    torch.manual_seed(config.seed)  # the initial weights are part of what the seed fixes
    model = create_model(
        config.kind, config.experts, config.hidden, config.dropout, config.drop_commands
    )
    model = model.to(device)
    optimizer = torch.optim.AdamW(
        model.parameters(),
        lr=config.lr,
        weight_decay=config.weight_decay,
        fused=fused_optimiser(device),
    )
    log_path = run_dir / "log.csv"
    first_epoch, best = 0, math.inf
    if resume:
        saved = checkpoint.config
        if saved["train"]["identity"] != config.identity():
            raise ValueError(
                f"{run_dir / LAST}: was trained with other settings: "
                f"{identity_difference(saved['train']['identity'], config.identity())}; "
                "resume with the same settings"
            )
        _check_same_dataset(checkpoint, data, config, run_dir / LAST)
        restore_model(checkpoint, model, run_dir / LAST)
        restore_optimizer(checkpoint, model, optimizer)
        first_epoch, best = saved["epoch"], saved.get("best_validation_loss", math.inf)
    elif rank == 0:
        run_dir.mkdir(parents=True, exist_ok=True)
        log_path.unlink(missing_ok=True)
    trainable = model
    if world > 1:
        trainable = nn.parallel.DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None
        )
    writer = _tensorboard(run_dir) if rank == 0 else None
    rows = _read_log(log_path, first_epoch) if resume else []
    if resume and rank == 0:  # drop rows of an epoch that ran past the last checkpoint
        log_path.unlink(missing_ok=True)
        for row in rows:
            _append_log(log_path, row)
    for epoch in range(first_epoch, config.epochs):
        torch.manual_seed(config.seed * 7919 + epoch)  # dropout: a function of the epoch
        indices = _epoch_indices(data, config, epoch)[rank::world]
        steps = len(indices) // config.batch_size
        model.train()
        started, loss_sum = time.perf_counter(), 0.0
        bar = tqdm(
            range(steps),
            desc=f"epoch {epoch + 1}/{config.epochs}",
            unit="batch",
            disable=not progress or rank != 0,
            leave=False,
        )
        for step in bar:
            lr = warm_restart_lr(config, epoch + step / steps)
            for group in optimizer.param_groups:
                group["lr"] = lr
            batch = indices[step * config.batch_size : (step + 1) * config.batch_size].to(device)
            x = data.x_train[batch]
            if config.input_noise:  # from the global RNG: seeded per epoch, as dropout
                x = x + config.input_noise * torch.randn_like(x)
            with autocast(config.precision, device):
                prediction = _predict(trainable, config.kind, x, data.phase_train[batch])
            loss = nn.functional.mse_loss(prediction.float(), data.y_train[batch])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            loss_sum += finite_loss(loss.item(), f"epoch {epoch + 1} step {step + 1}")
            if step % 50 == 0:
                bar.set_postfix(loss=f"{loss.item():.4f}", lr=f"{lr:.2e}")
        seconds = time.perf_counter() - started
        if rank != 0:
            torch.distributed.barrier()
            continue
        row = {
            "epoch": epoch + 1,
            "train_loss": loss_sum / max(steps, 1),
            "validation_loss": finite_loss(
                validation_loss(model, config.kind, data), f"epoch {epoch + 1}'s validation"
            ),
        }
        if config.holdout == "within-clips":
            row["within_clip_validation_loss"] = within_clip_validation_loss(
                model, config.kind, data
            )
        row |= {
            "lr": lr,
            "seconds": round(seconds, 2),
            "samples_per_s": round(steps * config.batch_size * world / seconds, 1),
        }
        rows.append(row)
        _append_log(log_path, row)
        if writer:
            for key in ("train_loss", "validation_loss", "within_clip_validation_loss", "lr"):
                if key in row:
                    writer.add_scalar(key, row[key], epoch + 1)
            writer.add_scalar("samples_per_s", row["samples_per_s"], epoch + 1)
        improved = row["validation_loss"] < best
        best = min(best, row["validation_loss"])
        state = {
            "epoch": epoch + 1,
            "best_validation_loss": best,
            "kind": config.kind,
            "experts": config.experts if config.kind == "mann" else None,
            "hidden": config.hidden,
            "train": {"identity": config.identity(), "config": asdict(config)},
            "dataset": {
                k: data.metadata[k] for k in ("built", "validation_clips", "licence", "layout_hash")
            },
            "last": row,
            "machine": machine_description(device),
        }
        save_checkpoint(run_dir / LAST, model, optimizer, data.normalisation, state)
        if improved:
            save_checkpoint(run_dir / BEST, model, optimizer, data.normalisation, state)
        if epoch + 1 in cycle_ends(config):  # low-lr snapshots, good to ship mid-schedule
            save_checkpoint(
                run_dir / f"cycle_end_{epoch + 1}.safetensors",
                model,
                optimizer,
                data.normalisation,
                state,
            )
        print(
            f"epoch {epoch + 1}/{config.epochs}: train {row['train_loss']:.4f} validation "
            f"{row['validation_loss']:.4f} ({row['samples_per_s']:.0f} samples/s)",
            flush=True,
        )
        if world > 1:
            torch.distributed.barrier()
    if writer:
        writer.close()
    if world > 1:
        # The DDP wrapper's reducer holds the process group's gloo work; freed here, while the
        # interpreter is whole, rather than at its exit, where a rank aborted ("terminate
        # called without an active exception") after its run had finished.
        del trainable
        gc.collect()
        torch.distributed.destroy_process_group()
    return rows


def _check_same_dataset(checkpoint, data: TrainingData, config: TrainConfig, path: Path) -> None:
    """A resumed run must train on the data it started on: the dataset's path may change (a
    moved file), so the test is its normalisation statistics, which the checkpoint holds and
    the exported model uses. Resuming on another dataset would mix the two silently."""
    saved = checkpoint.section("norm/")
    differ = sorted(
        k
        for k, v in data.normalisation.items()
        if k not in saved or saved[k].shape != v.shape or not torch.equal(saved[k], v)
    )
    if differ:
        before = checkpoint.config["train"]["config"].get("dataset")
        raise ValueError(
            f"{path}: was trained on dataset {before} (built "
            f"{checkpoint.config.get('dataset', {}).get('built')}), and --dataset "
            f"{config.dataset} has other normalisation statistics ({', '.join(differ)}); resume "
            "with the dataset the run started on, or start a new run"
        )


def machine_description(device: torch.device) -> str:
    if device.type == "cuda":
        return f"{torch.cuda.get_device_name(device)} (CUDA), torch {torch.__version__}"
    return (
        f"{platform.processor() or platform.machine()} CPU, {os.cpu_count()} cores, "
        f"{torch.get_num_threads()} torch threads, torch {torch.__version__}"
    )


def _tensorboard(run_dir: Path):
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:  # TensorBoard is optional: the CSV log always exists
        return None
    return SummaryWriter(str(run_dir / "tensorboard"))


def _append_log(path: Path, row: dict) -> None:
    """One row under the log's header; a log begun by an older version keeps its columns (a
    column added since is left out of it rather than shifting the ones after it)."""
    fieldnames = list(row)
    if path.exists():
        with open(path, newline="") as file:
            fieldnames = next(csv.reader(file), None) or fieldnames
    new = not path.exists() or path.stat().st_size == 0
    with open(path, "a", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=fieldnames, extrasaction="ignore")
        if new:
            writer.writeheader()
        writer.writerow(row)


def _read_log(path: Path, epochs: int) -> list[dict]:
    """The rows of the first `epochs` epochs (those the last checkpoint holds). Later rows are
    not read: an epoch that ran past the checkpoint, its line possibly torn by a kill."""
    if not path.exists():
        return []
    rows = []
    with open(path, newline="") as file:
        for line, row in enumerate(csv.DictReader(file), start=2):
            if len(rows) == epochs:
                break
            try:
                rows.append({k: float(v) for k, v in row.items()})
            except (TypeError, ValueError):
                raise ValueError(
                    f"{path}: line {line} is not a log row ({','.join(map(str, row.values()))})"
                ) from None
            rows[-1]["epoch"] = int(rows[-1]["epoch"])
    return rows

"""Closed-loop (auto-conditioned, acRNN-style) fine-tuning of a trained controller on its own
outputs (issue 17 item 1): `canis finetune` (training/cli.py) runs fine_tune.

Each step's loss is the stretches' (training/finetune_stretches.py: the mocap's inputs, then
the network's own, the MSE with the contact term) plus the terms on the
runtime's own dogs, placed or driven each epoch by the network exported from the weights it
starts from (training/placed_stillness.py, training/moving_skating.py). The
settings are training/finetune_config.py's.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch
from canis.runtime.features import ACTIONS, OUTPUT
from canis.training.finetune_config import (
    RUN_FIELDS,
    ClosedLoopConfig,
    FineTuneSettings,
    check_resumable,
    start_regularisation,
)
from canis.training.finetune_stretches import (
    TERMS,
    Standardiser,
    StretchData,
    closed_loop_validation,
    draw_stretches,
    drawable_starts,
    stretch_loss,
    stretches_through,
)
from canis.training.moving_skating import MovingDogs, skating_by_speed
from canis.training.placed_stillness import PlacedDogs
from torch import nn


def check_finite_step(model, loss, terms: dict, epoch: int, step: int, checkpoint) -> None:
    """Stop before a step that would make the weights non-finite: the run's last checkpoint
    (the previous epoch's) is kept, and the error names the terms as they stood."""
    gradients = [p.grad for p in model.parameters() if p.grad is not None]
    if torch.isfinite(loss) and all(torch.isfinite(g).all() for g in gradients):
        return
    values = ", ".join(f"{name} {value:.4g}" for name, value in terms.items() if value)
    raise FloatingPointError(
        f"fine-tuning epoch {epoch + 1}, step {step + 1}: the loss ({loss.item():.4g}) or its "
        f"gradient is not finite (terms: {values or 'none'}); stopped before the step: "
        f"{checkpoint} is as the last finished epoch left it"
    )


def fine_tune(
    settings: FineTuneSettings,
    loop: ClosedLoopConfig,
    run_dir,
    resume=False,
    recipe: dict | None = None,
):
    """Fine-tunes a trained controller in closed loop into run_dir (last.safetensors after
    every epoch, log.csv, config.json: the settings as a config file); resumable. Returns the
    log rows. `recipe`: where the settings came from ({"file": a config file, "values": its
    settings}), recorded in the checkpoint for the
    model card. PFNN's phase is fed back with its
    pose: in the own-output frames and the runtime's dogs it is the runtime's, advanced by the
    predicted increment (Standardiser.next_phase_rad)."""
    from canis.training.checkpoint import (
        load_checkpoint,
        restore_optimizer,
        save_checkpoint,
    )
    from canis.training.models import restored_model
    from canis.training.optimisation import autocast, fused_optimiser, precision_for_run
    from canis.training.train import (
        LAST,
        _append_log,
        _check_same_dataset,
        _predict,
        split_settings,
        validation_loss,
    )
    from canis.training.training_data import TrainingData

    run_dir = Path(run_dir)
    source = run_dir / LAST if resume else Path(settings.start)
    checkpoint = load_checkpoint(source)
    saved = checkpoint.config
    cpu = torch.device("cpu")
    resumed = saved.get("closed_loop") if resume else None
    settings = replace(
        settings,
        precision=precision_for_run(settings.precision, cpu, resumed),
        **start_regularisation(saved, settings),
    )
    print(
        f"precision {settings.precision}, {torch.get_num_threads()} threads, dropout "
        f"{settings.dropout}, weight decay {settings.weight_decay}",
        flush=True,
    )
    identity = loop.identity() | {
        k: v for k, v in asdict(settings).items() if k not in ("epochs", "dataset")
    }
    if resume:
        check_resumable(source, saved, identity)
    kind = saved["kind"]
    split = split_settings(checkpoint)
    if split != {"holdout": "clips", "mirrored": True}:  # StretchData reads that split's rows
        raise ValueError(
            f"{source}: was trained with --holdout {split['holdout']}"
            + ("" if split["mirrored"] else " --no-mirrored")
            + "; fine-tuning trains on every row of the dataset's training clips: start from "
            "a run trained on them"
        )
    data = TrainingData(settings.dataset, kind, torch.device("cpu"))
    _check_same_dataset(checkpoint, data, SimpleNamespace(dataset=settings.dataset), source)
    model = restored_model(checkpoint, source, settings.dropout)
    optimizer = torch.optim.AdamW(
        model.parameters(),
        lr=settings.lr,
        weight_decay=settings.weight_decay,
        fused=fused_optimiser(cpu),
    )
    if resume:
        restore_optimizer(checkpoint, model, optimizer)
    first_epoch = saved["closed_loop_epoch"] if resume else 0
    if not resume:
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "log.csv").unlink(missing_ok=True)
    used = {k: v for k, v in asdict(settings).items() if k in RUN_FIELDS} | asdict(loop)
    (run_dir / "config.json").write_text(json.dumps(used, indent=1) + "\n")
    standard = Standardiser(data.normalisation, OUTPUT.size)
    trained = saved.get("train", {}).get("config", {})
    train_split = StretchData(
        settings.dataset,
        data,
        validation=False,
        sniffing=trained.get("sniffing", True),
        sniffing_walks=trained.get("sniffing_walks", True),
    )
    val_split = StretchData(settings.dataset, data, validation=True)
    if loop.contact_weight > 0 and train_split.planted is None:
        raise ValueError(
            f"{settings.dataset}: has no paw contacts (contact_next); rebuild it with "
            "`canis dataset build` to use the contact term"
        )
    rows = []

    def predict(x, phase):  # validation: fp32, as the exported model runs
        return _predict(model, kind, x, phase)

    def predict_training(x, phase):
        with autocast(settings.precision, cpu):
            return _predict(model, kind, x, phase).float()

    placed = moving = None
    if loop.placed_stillness_weight > 0:
        placed = PlacedDogs(model, saved, data, train_split, standard, run_dir, loop.placed_dogs)
    if loop.moves_dogs():
        mocap = standard.x_raw(train_split.x), standard.y_raw(train_split.y), train_split.action
        moving = MovingDogs(
            model, saved, data, standard, run_dir, loop.placed_dogs, skating_by_speed(*mocap),
            loop.moving_unroll_frames, loop.moving_max_turn_degps, loop.moving_turn_switch_s,
            {
                "heights_both_ways": loop.moving_paws_both_ways,
                "paws_down": loop.moving_paws_down,
                "skating_relative": loop.moving_skating_relative,
                "skating_scale": loop.moving_skating_scale,
                "paws_swing": loop.moving_paws_swing,
                "swing_below_mps": loop.moving_paws_swing_below_mps,
            },
        )  # fmt: skip
    for epoch in range(first_epoch, settings.epochs):
        own = loop.own_frames_at(epoch)
        length = loop.ground_truth_frames + own
        generator = np.random.default_rng(settings.seed * 1_000_003 + epoch)
        torch.manual_seed(settings.seed * 7919 + epoch)
        rollout_seconds = 0.0
        placed_terms = [dogs for dogs in (placed, moving) if dogs is not None]
        for dogs in placed_terms:  # this epoch's placed dogs, by the weights it starts from
            rollout_seconds += dogs.refresh(generator)
        jumps = None
        starts = drawable_starts(train_split, length)
        if loop.jump_share:
            jumps = stretches_through(
                starts,
                train_split.after,
                loop.ground_truth_frames + own,
                train_split.action == ACTIONS.index("jump"),
            )
            if len(jumps) == 0:
                raise ValueError(
                    f"jump_share: {settings.dataset} has no training stretch through a jump"
                )
        model.train()
        started, loss_sum, term_sums = time.perf_counter(), 0.0, dict.fromkeys(TERMS, 0.0)
        gradient_norms = []  # each step's, before clipping
        for step in range(settings.steps_per_epoch):
            if step > 0 and loop.placed_refresh_steps and step % loop.placed_refresh_steps == 0:
                for dogs in placed_terms:  # driven again by the weights as they are now
                    rollout_seconds += dogs.refresh(generator)
            batch = draw_stretches(generator, starts, settings.batch_size, loop.jump_share, jumps)
            loss, terms = stretch_loss(
                predict_training, train_split, batch, standard, loop.ground_truth_frames, own, loop
            )
            if placed is not None:  # as many steps as a batch of stretches has own frames
                still = placed.loss(predict_training, settings.batch_size * max(own, 1), generator)
                loss = loss + loop.placed_stillness_weight * still
                terms["placed_stillness"] = still.item()
            if moving is not None:
                paws = moving.loss(predict_training, loop.moving_dogs_per_step, generator)
                loss = loss + loop.moving_skating_weight * paws
                terms["moving_skating"] = paws.item()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            check_finite_step(model, loss, terms, epoch, step, run_dir / LAST)
            norm = nn.utils.get_total_norm(
                [p.grad for p in model.parameters() if p.grad is not None]
            )
            gradient_norms.append(norm.item())
            optimizer.step()
            loss_sum += loss.item()
            term_sums = {name: term_sums[name] + terms[name] for name in TERMS}
        seconds = time.perf_counter() - started
        closed = closed_loop_validation(
            model, predict, val_split, standard, loop, settings.validation_stretches
        )
        row = {
            "epoch": epoch + 1,
            "own_frames": own,
            "train_loss": loss_sum / settings.steps_per_epoch,
            **{f"{name}_term": term_sums[name] / settings.steps_per_epoch for name in TERMS},
            "validation_loss": validation_loss(model, kind, data),
            "validation_closed_loop_loss": closed,
            "gradient_norm_median": float(np.median(gradient_norms)),
            "gradient_norm_max": max(gradient_norms),
            "seconds": round(seconds, 2),
            "rollout_seconds": round(rollout_seconds, 2),
            "frames_per_s": round(
                settings.steps_per_epoch * settings.batch_size * length / seconds, 1
            ),
        }
        rows.append(row)
        _append_log(run_dir / "log.csv", row)
        # The config file a fine-tuned start was run from stays with the start.
        gone = ("closed_loop_config",)
        kept = {key: value for key, value in saved.items() if key not in gone}
        state = kept | {
            "closed_loop": identity,
            "closed_loop_epoch": epoch + 1,
            "closed_loop_start": str(settings.start),
            "last": row,
        }
        if recipe is not None:
            state["closed_loop_config"] = recipe
        save_checkpoint(run_dir / LAST, model, optimizer, data.normalisation, state)
        print(
            f"epoch {epoch + 1}/{settings.epochs} (own frames {own}): "
            f"train {row['train_loss']:.4f} validation {row['validation_loss']:.4f} closed-loop "
            f"{row['validation_closed_loop_loss']:.4f}",
            flush=True,
        )
    return rows

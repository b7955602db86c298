"""`canis finetune`: closed-loop (acRNN-style) fine-tuning of a trained controller on its own
outputs (training/finetune.py). The parser sits beside its handler."""

from __future__ import annotations

import argparse
from pathlib import Path

from canis.training.cli_train import apply_speed_options


def add_commands(commands: argparse._SubParsersAction) -> None:
    finetune = commands.add_parser(
        "finetune",
        help="fine-tune a trained controller in closed loop on its own outputs (acRNN-style)",
    )
    finetune.add_argument(
        "--start",
        type=Path,
        required=True,
        help="canis train checkpoint, or an fp32 motion model (.onnx, e.g. the shipped "
        "assets/models/mann8.onnx) trained on --dataset",
    )
    finetune.add_argument("--dataset", type=Path, default=Path("data/dog_dataset.npz"))
    finetune.add_argument("--out", type=Path, required=True, help="run folder (checkpoint, log)")
    finetune.add_argument(
        "--config",
        type=Path,
        required=True,
        help="a JSON file of the settings (training/finetune_config.py's keys; a recipe's "
        "[finetune] table, training/configs/*.toml, holds the same)",
    )
    finetune.add_argument(
        "--resume", action="store_true", help="continue the run in --out from its checkpoint"
    )
    finetune.add_argument(
        "--threads",
        type=int,
        help="torch CPU threads (default: torch's, one per core); 1 is faster on a machine "
        "whose cores other work keeps busy",
    )
    finetune.set_defaults(handler=run_finetune)


def run_finetune(args) -> int:
    from canis.training.finetune import fine_tune
    from canis.training.finetune_config import (
        RUN_FIELDS,
        ClosedLoopConfig,
        FineTuneSettings,
        read_config,
    )

    # Checked before anything is written (an ONNX start is converted into --out below).
    values = read_config(args.config)
    if not args.dataset.exists():
        raise FileNotFoundError(
            f"{args.dataset} does not exist; build it with `canis dataset build`"
        )
    loop = ClosedLoopConfig(**{k: v for k, v in values.items() if k not in RUN_FIELDS})
    start = args.start
    if start.suffix == ".onnx":  # converted once, into the run folder (a resume reuses it)
        converted = args.out / "start.safetensors"
        if not args.resume:
            from canis.training.checkpoint_from_onnx import checkpoint_from_onnx

            checkpoint_from_onnx(start, args.dataset, converted)
            print(f"{start}: weights taken into {converted}")
        start = converted
    args.precision = values.get("precision", "auto")
    run = {k: v for k, v in values.items() if k in RUN_FIELDS}
    settings = FineTuneSettings(
        start=str(start),
        dataset=str(args.dataset),
        **run | {"precision": apply_speed_options(args)},
    )
    recipe = {"file": str(args.config), "values": values}
    fine_tune(settings, loop, args.out, resume=args.resume, recipe=recipe)
    print(f"done: {args.out} (last.safetensors, log.csv)")
    return 0

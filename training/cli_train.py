"""`canis train`, `canis train-rtn` and `canis upsample`: training the networks and using the RTN
on a clip. Each parser sits beside its handler."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_commands(commands: argparse._SubParsersAction, recipe=None) -> None:
    """`recipe`: the handler of `canis train --config` (export/recipe.py, wired in by
    canis/cli.py: the recipe ends in the export, a layer above this one)."""
    from canis.training import dataset  # torch-free, as optimisation
    from canis.training.optimisation import DROPOUT, WEIGHT_DECAY, describe  # torch-free

    train = commands.add_parser("train", help="train MANN, PFNN or the vanilla network")
    train.add_argument("--model", choices=("mann", "pfnn", "vnn"), default="mann")
    train.add_argument("--experts", type=int, default=8, help="MANN experts K (8 or 4)")
    train.add_argument(
        "--hidden",
        type=int,
        help="units per hidden layer (default: the paper's, training/models.py); smaller is "
        "faster to train and to run; part of the run's identity",
    )
    train.add_argument(
        "--config",
        type=Path,
        metavar="RECIPE.toml",
        help="run a network's whole recipe (training/configs/*.toml: from the raw BVH to the "
        "exported ONNX files and their cards) into --out; resumable with --resume. The "
        "recipe holds every setting: only --out, --resume, --force and --threads go with it",
    )
    train.add_argument("--dataset", type=Path, default=Path("data/dog_dataset.npz"))
    train.add_argument("--out", type=Path, required=True, help="run folder (checkpoints, log)")
    train.add_argument(
        "--schedule",
        choices=("paper", "cpu"),
        default="paper",
        help=f"{describe('paper')}; {describe('cpu')} (see training/optimisation.py)",
    )
    train.add_argument("--epochs", type=int, help="override the schedule's epoch count")
    train.add_argument("--batch-size", type=int, help="override the schedule's batch size")
    train.add_argument("--lr", type=float, help="override the schedule's peak learning rate")
    train.add_argument(
        "--steps-per-epoch",
        type=int,
        help="batches per epoch (default: one pass over the training rows); for short runs",
    )
    train.add_argument("--seed", type=int, default=0)
    train.add_argument(
        "--no-oversample",
        action="store_true",
        help="sample rows uniformly instead of 11x trot/canter weights",
    )
    train.add_argument(
        "--balanced",
        action="store_true",
        help="draw rows evening out the (gait, action) classes, each row weighted 1/sqrt of "
        "its class's size, instead of 11x trot/canter (training/dataset.py)",
    )
    train.add_argument(
        "--no-sniffing",
        action="store_true",
        help="never draw the rows of an idle dog sniffing the ground (training/labels.py)",
    )
    train.add_argument(
        "--no-sniffing-walks",
        action="store_true",
        help="never draw the rows of a dog walking under 1 m/s with its nose down "
        "(training/labels.py sniffing_walk)",
    )
    train.add_argument(
        "--no-drop-commands",
        action="store_true",
        help="never drop the trajectory's action and speed inputs in training, as MANN's "
        "gating reads them (training/models.py command_columns)",
    )
    train.add_argument(
        "--jump-oversample",
        type=float,
        default=1.0,
        help="draw the jump's rows this many times as often (default 1)",
    )
    train.add_argument(
        "--dropout",
        type=float,
        help=f"probability of dropping each layer's input in training (default {DROPOUT}: "
        "the paper's keep 0.7)",
    )
    train.add_argument(
        "--weight-decay", type=float, help=f"AdamW weight decay (default {WEIGHT_DECAY})"
    )
    train.add_argument(
        "--input-noise",
        type=float,
        help="std of Gaussian noise added to the standardised inputs of each training batch "
        "(default 0: none; validation never has it)",
    )
    train.add_argument(
        "--holdout",
        choices=dataset.HOLDOUTS,
        help="clips (default): validate on the dataset's held-out clips; within-clips: also "
        f"hold out the last {dataset.TAIL_FRACTION:.0%} of every training clip, "
        f"{dataset.GAP_FRAMES} frames dropped each side of the cut, logged as "
        "within_clip_validation_loss (training/dataset.py)".replace("%", "%%"),
    )
    train.add_argument(
        "--no-mirrored",
        action="store_true",
        help="train on the captured clips only, not their left/right mirrors (validation "
        "keeps both)",
    )
    train.add_argument(
        "--resume", action="store_true", help="continue the run in --out from its last checkpoint"
    )
    train.add_argument(
        "--force", action="store_true", help="replace a run already in --out (it is deleted)"
    )
    add_speed_options(train)
    train.set_defaults(handler=run_train, recipe=recipe, parser=train)

    train_rtn = commands.add_parser(
        "train-rtn", help="train the recurrent transition network (RTN)"
    )
    train_rtn.add_argument("--dataset", type=Path, default=Path("data/dog_transitions.npz"))
    train_rtn.add_argument("--out", type=Path, required=True, help="run folder")
    train_rtn.add_argument("--steps", type=int, default=6000, help="optimiser steps")
    train_rtn.add_argument("--batch-size", type=int, default=64)
    train_rtn.add_argument(
        "--units",
        type=int,
        help="the LSTM's units (default: the paper's, training/rtn.py); every other width "
        "keeps its ratio to it; smaller is cheaper per frame; part of the run's identity",
    )
    train_rtn.add_argument("--lr", type=float, default=5e-4, help="AMSGrad learning rate")
    train_rtn.add_argument(
        "--teacher-forcing", type=float, default=0.2, help="probability of a true input frame"
    )
    train_rtn.add_argument("--seed", type=int, default=0)
    train_rtn.add_argument(
        "--residual",
        choices=("interpolation", "rotations", "previous"),
        default="interpolation",
        help="what the decoder corrects: one interpolation step toward the target (default), "
        "the same with each joint's axes turned along their rotation (rotations), or the "
        "previous frame (the RTN paper's)",
    )
    train_rtn.add_argument("--resume", action="store_true", help="continue the run in --out")
    train_rtn.add_argument(
        "--force", action="store_true", help="replace a run already in --out (it is deleted)"
    )
    train_rtn.add_argument(
        "--fk-weight", type=float, default=0.5, help="weight of the forward-kinematics term"
    )
    train_rtn.add_argument(
        "--init-from",
        type=Path,
        help="start from this checkpoint's or exported _step.onnx's weights (fine-tuning)",
    )
    train_rtn.add_argument(
        "--target-noise",
        type=float,
        default=0.0,
        help="sigma of RMI's scheduled target noise (the paper's 0.5; 0: none); the model then "
        "samples varied transitions (Controller.transition_to(variation=...))",
    )
    train_rtn.add_argument(
        "--stop-after", type=int, help="end after this step's checkpoint (resume later)"
    )
    add_speed_options(train_rtn)
    train_rtn.set_defaults(handler=run_train_rtn)

    upsample = commands.add_parser(
        "upsample", help="keep one frame per second of a clip and regenerate the rest (RTN)"
    )
    upsample.add_argument("clip", type=Path, help="a .bvh clip of the dog")
    upsample.add_argument("--keep-every", type=int, default=60, help="frames between kept frames")
    upsample.add_argument("--out", type=Path, required=True, help="the .bvh to write")
    upsample.add_argument("--model", type=Path, help="an _step.onnx (default: shipped)")
    upsample.set_defaults(handler=run_upsample)


def add_speed_options(parser: argparse.ArgumentParser) -> None:
    """--precision and --threads, shared by the training commands (training/optimisation.py)."""
    parser.add_argument(
        "--precision",
        choices=("auto", "bf16", "fp32"),
        default="auto",
        help="bf16: autocast matmuls to bfloat16 (faster where the CPU has AVX512-BF16/AMX or "
        "on a GPU; results differ beyond float noise, and a resume must use the same); auto "
        "(default): a resumed run's own, else bf16 where the hardware has it natively, "
        "else fp32",
    )
    parser.add_argument(
        "--threads",
        type=int,
        help="torch CPU threads (default: torch's, one per core); 1 is faster on a machine "
        "whose cores other work keeps busy",
    )


def apply_speed_options(args) -> str:
    """Sets the thread count; returns --precision ("auto" is resolved by the training: a
    resumed run's own, else by the hardware; training/optimisation.py)."""
    import torch

    if args.threads is not None:
        if args.threads < 1:
            raise ValueError(f"--threads {args.threads}: must be at least 1")
        torch.set_num_threads(args.threads)
    return args.precision


def _check_numbers(args, wanted: dict) -> None:
    """Each option in `wanted` (name: (low, high, what)) that was given, within its range
    and finite, else one line naming it; before any work."""
    import math

    for name, (low, high, what) in wanted.items():
        value = getattr(args, name.replace("-", "_"))
        if value is None:
            continue
        if not (math.isfinite(value) and low <= value <= high):
            raise ValueError(f"--{name} {value:g}: must be {what}")


WHOLE = (1, 10**7, "a whole number from 1 to 10^7")


# What may go beside --config: the rest is the recipe's.
RECIPE_FLAGS = ("config", "out", "resume", "force", "threads", "handler", "recipe", "parser")


def run_train(args) -> int:
    from canis.training.checkpoint import check_new_run, done_line
    from canis.training.train import TrainConfig, train

    if args.config is not None:
        given = [
            f"--{name.replace('_', '-')}"
            for name, value in vars(args).items()
            if name not in RECIPE_FLAGS
            and name != "command"
            and value != args.parser.get_default(name)
        ]
        if given:
            raise ValueError(
                f"--config {args.config}: {', '.join(given)} belong in the recipe file, not "
                "beside it (only --out, --resume, --force and --threads go with --config)"
            )
        if args.recipe is None:
            raise ValueError("--config: this installation has no export layer to end a recipe")
        apply_speed_options(args)
        return args.recipe(args.config, args.out, args.resume, args.force)
    check_new_run(args.out, args.resume, args.force)
    precision = apply_speed_options(args)
    if args.steps_per_epoch is not None and args.steps_per_epoch < 1:
        raise ValueError(f"--steps-per-epoch {args.steps_per_epoch}: must be at least 1")
    if args.hidden is not None and args.hidden < 1:
        raise ValueError(f"--hidden {args.hidden}: must be at least 1")
    config = TrainConfig.from_schedule(
        args.schedule,
        kind=args.model,
        experts=args.experts,
        hidden=args.hidden,
        epochs=args.epochs,
        batch_size=args.batch_size,
        lr=args.lr,
        seed=args.seed,
        oversample=not args.no_oversample,
        balanced=args.balanced or None,
        sniffing=not args.no_sniffing,
        sniffing_walks=not args.no_sniffing_walks,
        jump_oversample=args.jump_oversample,
        steps_per_epoch=args.steps_per_epoch,
        precision=precision,
        dataset=str(args.dataset),
        dropout=args.dropout,
        drop_commands=not args.no_drop_commands,
        weight_decay=args.weight_decay,
        input_noise=args.input_noise,
        holdout=args.holdout,
        mirrored=False if args.no_mirrored else None,
    )
    if not args.dataset.exists():
        raise FileNotFoundError(
            f"{args.dataset} does not exist; build it with `canis dataset build`"
        )
    if args.force and not args.resume:
        _clear_run(args.out)
    train(config, args.out, resume=args.resume)
    print(done_line(args.out))
    return 0


def _clear_run(run_dir: Path) -> None:
    """--force: the earlier run's files go before the new run writes its own."""
    for path in run_dir.glob("*.safetensors"):
        path.unlink()
    (run_dir / "log.csv").unlink(missing_ok=True)


def run_train_rtn(args) -> int:
    from canis.training.checkpoint import check_new_run, done_line
    from canis.training.train_rtn import RtnTrainConfig, train_rtn

    _check_numbers(
        args,
        {
            "steps": WHOLE,
            "batch-size": WHOLE,
            "stop-after": WHOLE,
            "units": (1, 65536, "from 1 to 65536 units"),
            "lr": (1e-12, 10.0, "a finite learning rate over 0"),
            "teacher-forcing": (0.0, 1.0, "a probability, from 0 to 1"),
            "fk-weight": (0.0, 1e6, "from 0 to 10^6"),
            "target-noise": (0.0, 100.0, "from 0 to 100"),
        },
    )
    check_new_run(args.out, args.resume, args.force)
    precision = apply_speed_options(args)
    sized = {} if args.units is None else {"units": args.units}
    config = RtnTrainConfig(
        **sized,
        steps=args.steps,
        batch_size=args.batch_size,
        lr=args.lr,
        teacher_probability=args.teacher_forcing,
        residual=args.residual,
        fk_weight=args.fk_weight,
        init_from=str(args.init_from or ""),
        target_noise=args.target_noise,
        precision=precision,
        seed=args.seed,
        dataset=str(args.dataset),
    )
    if args.force and not args.resume:
        _clear_run(args.out)
    train_rtn(config, args.out, resume=args.resume, stop_after=args.stop_after)
    print(done_line(args.out))
    return 0


def run_upsample(args) -> int:
    from canis.runtime.profiler import check_output_path
    from canis.training.transition_data import upsample_clip

    check_output_path(args.out, "upsampled clip", make_folders=True)

    report = upsample_clip(args.model, args.clip, args.out, args.keep_every)
    print(
        f"wrote {args.out}: {report['regenerated']} of {report['frames']} frames regenerated; "
        f"mean joint error {report['joint_error_cm']:.1f} cm against the clip"
    )
    return 0

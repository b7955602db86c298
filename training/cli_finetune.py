"""`canis finetune`: closed-loop (acRNN-style) fine-tuning of a trained controller on its own
outputs (training/finetune.py). The parser sits beside its handler."""

from __future__ import annotations

import argparse
from pathlib import Path

from canis.training.cli_train import add_speed_options, apply_speed_options


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
        help="a JSON file of the settings below (the keys are the flags' names with "
        "underscores: training/configs/mann8.json and pfnn.json are the shipped recipes); a "
        "flag given beside it overrides its key",
    )
    finetune.add_argument("--epochs", type=int)
    finetune.add_argument("--steps-per-epoch", type=int)
    finetune.add_argument("--batch-size", type=int)
    finetune.add_argument("--lr", type=float)
    finetune.add_argument("--seed", type=int)
    finetune.add_argument(
        "--ground-truth-frames", type=int, help="mocap inputs opening each stretch"
    )
    finetune.add_argument(
        "--own-frames",
        type=int,
        help="inputs rebuilt from the network's own outputs after them (0: one-step training)",
    )
    finetune.add_argument("--curriculum-epochs", type=int, help="epochs over which own frames grow")
    finetune.add_argument(
        "--contact-weight",
        type=float,
        help="weight of the planted-paw world-motion term (0: off; training/finetune_losses.py)",
    )
    finetune.add_argument(
        "--leg-motion-weight",
        type=float,
        help="weight of the leg-motion term: each leg joint's mean turn per predicted step "
        "over each frame's batch, the network run without dropout on its own "
        "frames, against the mocap's in the same frames, squared deg/frame (0: off; "
        "training/finetune_losses.py)",
    )
    finetune.add_argument(
        "--placed-stillness-weight",
        type=float,
        help="weight of the placed-stillness term: each epoch --placed-dogs dogs placed "
        "standing by the runtime (the standing keyframe, as the demo's R, or a mocap standing "
        "frame) and asked nothing for 3 s; each joint's turn and the root's step beyond a "
        "small allowance, squared, the network run without dropout (0: off; "
        "training/placed_stillness.py)",
    )
    finetune.add_argument(
        "--placed-dogs",
        type=int,
        help="the dogs placed or driven each epoch for each term on the runtime's dogs (for "
        "--placed-stillness-weight, a quarter in the standing keyframe)",
    )
    finetune.add_argument(
        "--placed-refresh-steps",
        type=int,
        help="the placed terms' dogs driven anew by the current weights every N steps as "
        "well as at each epoch's start (0: at each epoch's start only)",
    )
    finetune.add_argument(
        "--placed-speed-weight",
        type=float,
        help="weight of the placed-speed term: each epoch --placed-dogs dogs driven by the "
        "runtime from the standing keyframe, its speed tracking off, each asked a speed "
        "(0.4-3.6 m/s, half turning) until settled; each dog's mean predicted root speed "
        "against the asked, relative, beyond 5%%, squared, the network run without dropout "
        "(0: off; training/placed_speed.py)",
    )
    finetune.add_argument(
        "--moving-legs-weight",
        type=float,
        help="weight of the moving-legs term: on the placed-speed term's dogs (driven each "
        "epoch, with or without that term), each leg joint's mean turn against the mocap's "
        "locomotion frames' at the dog's asked speed, the shortfall beyond 5%%, squared "
        "(deg/frame)^2, the network run without dropout (0: off; training/finetune_moving.py)",
    )
    finetune.add_argument(
        "--moving-legs-both-ways",
        action="store_true",
        help="the moving-legs term counts a leg joint turning more than the mocap's, beyond "
        "the allowance, as well as less",
    )
    finetune.add_argument(
        "--moving-legs-below-mps",
        type=float,
        metavar="MPS",
        help="the moving-legs term counts only the moving dogs asked under this speed (m/s; 0, "
        "the default: every dog): the walk's legs raised without pressing on the canter's",
    )
    finetune.add_argument(
        "--moving-skating-weight",
        type=float,
        help="weight of the moving-skating term: on the placed-speed term's dogs, each dog's "
        "mean foot skating of the shown paws beyond the mocap's locomotion frames' at the "
        "dog's asked speed (cm/frame), plus its paws' mean heights beyond the mocap's there "
        "(cm), the network run without dropout (0: off; training/finetune_moving.py)",
    )
    finetune.add_argument(
        "--moving-paws-both-ways",
        action="store_true",
        help="the moving-skating term counts paws carried lower than the mocap's at the dog's "
        "asked speed, beyond the allowance, as well as higher",
    )
    finetune.add_argument(
        "--moving-paws-down",
        type=float,
        nargs="?",
        const=1.0,
        metavar="WEIGHT",
        help="the moving-skating term holds each paw down (under the measure's 2.5 cm) as "
        "often as the mocap's at the dog's asked speed: with --moving-paws-both-ways, a paw "
        "cannot meet the mocap's mean height by hovering; WEIGHT (default 1) times 10 per "
        "share of steps short",
    )
    finetune.add_argument(
        "--moving-skating-relative",
        action="store_true",
        help="the moving-skating term counts the skating beyond the mocap's in the mocap's at "
        "the dog's speed (skating twice the mocap's costs 1) instead of in cm/frame, so that it "
        "is not drowned by the paws' heights (cm)",
    )
    finetune.add_argument(
        "--moving-skating-scale",
        type=float,
        metavar="S",
        help="the moving-skating term's bar is the mocap's skating at the dog's speed times S "
        "(default: 1, the mocap's own; under 1 asks for less sliding than the mocap's)",
    )
    finetune.add_argument(
        "--moving-max-turn-degps",
        type=float,
        help="the placed-speed term's dogs (and so the moving-legs and moving-skating "
        "terms'): half of them turn, uniformly up to this many deg/s either way (the "
        "controllers evaluation's turn asks 76.8)",
    )
    finetune.add_argument(
        "--moving-paws-swing",
        action="store_true",
        help="the moving-skating term holds each paw's root mean square height above the "
        "measure's 2.5 cm up to the mocap's at the dog's asked speed: a flattened stride that "
        "meets the mean heights pays for the swings it does not make",
    )
    finetune.add_argument(
        "--moving-paws-swing-below-mps",
        type=float,
        metavar="MPS",
        help="--moving-paws-swing only for the moving dogs asked under this speed (m/s; 0, the "
        "default: at every speed): the walk's shuffle without pressing on the canter's stride",
    )
    finetune.add_argument(
        "--stopping-pops-weight",
        type=float,
        metavar="W",
        help="weight of the stopping-pops term (0: off): as many dogs as the moving dogs, "
        "asked a speed and then to stop as a player letting go, no shown joint moving faster "
        "in a frame than the mocap's at the speed the dog is going (training/stopping_pops.py)",
    )
    finetune.add_argument(
        "--moving-course-weight",
        type=float,
        metavar="W",
        help="weight of the moving-course term (0: off): on the moving dogs, each dog's mean "
        "yaw rate against the asked turn plus what closes its offset from the asked facing "
        "over a second (training/finetune_moving.py): a dog asked straight ahead goes there",
    )
    finetune.add_argument(
        "--moving-gait-weight",
        type=float,
        metavar="W",
        help="weight of the moving-gait term (0: off): on the moving dogs, each unrolled over "
        "a gait window (61 frames, its pose fed back), the correlation of its lateral and "
        "diagonal paws' footfalls held to the mocap's at its speed (training/finetune_moving.py)",
    )
    finetune.add_argument(
        "--moving-gait-reference",
        metavar="all|most-used",
        help="the moving-gait term's reference at a speed: the mean of all the mocap's "
        "windows there (all: a mix of gaits where it uses two) or of the windows of the gait "
        "it uses most there (most-used)",
    )
    finetune.add_argument(
        "--getting-up-pops-weight",
        type=float,
        metavar="W",
        help="weight of the getting-up-pops term (0: off): as many dogs as the moving dogs, "
        "taken to a sit, lie or beg and back up through the shipped transition network, the "
        "stopping-pops term's bar on their first second after the hand-back "
        "(training/getting_up_pops.py)",
    )
    finetune.add_argument(
        "--getting-up-settling",
        type=float,
        metavar="SHARE",
        help="this share of the getting-up-pops term's dogs is kept for its first second after "
        "the way down (the posture held, never stood up) instead of after getting up: a "
        "lying dog's paw tucked in one frame pays as a getting-up pop does (0, the default: "
        "none)",
    )
    finetune.add_argument(
        "--posture-stillness-weight",
        type=float,
        metavar="W",
        help="weight of the posture-stillness term (0: off): as many dogs as the moving dogs, "
        "taken to a sit, lie or beg through the shipped transition network and held, the "
        "placed-stillness term's bar on their first 3 s after the hand-back "
        "(training/posture_stillness.py)",
    )
    finetune.add_argument(
        "--jump-weight",
        type=float,
        metavar="K",
        help="the mocap stretches' frames labelled jump weigh K times the others in their MSE "
        "(1, the default: all alike)",
    )
    finetune.add_argument(
        "--jump-share",
        type=float,
        metavar="SHARE",
        help="this share of each batch's stretches drawn from those passing a frame labelled "
        "jump (0, the default: every stretch alike): jumps are about 1%% of the rows and the "
        "placed and moving dogs are never asked one, so their terms can wear the jump away",
    )
    finetune.add_argument(
        "--moving-dogs-per-step",
        type=int,
        help="the moving dogs' terms (placed speed, moving legs, moving skating) are each "
        "step's mean over this many of the epoch's dogs, drawn at random: more steady the "
        "gradient (half the dogs turn, their speeds 0.4-3.6 m/s), slower the step",
    )
    finetune.add_argument(
        "--moving-turn-switch-s",
        type=float,
        help="the turning moving dogs swap sides every this many seconds, each from a random "
        "point of its first, as the controllers evaluation's turn does every 5 s (0: each "
        "turns one way throughout)",
    )
    finetune.add_argument(
        "--moving-unroll-frames",
        type=int,
        help="the moving dogs' terms (--placed-speed-weight, --moving-legs-weight, "
        "--moving-skating-weight) over "
        "stretches of K steps, each step's input the recorded one with the pose the previous "
        "prediction leaves, fed back with its gradient (1: one step from each recorded input)",
    )
    finetune.add_argument(
        "--dropout",
        type=float,
        help="probability of dropping each layer's input (default: the start's own; 0.3 for an "
        "ONNX start, the shipped networks')",
    )
    finetune.add_argument(
        "--weight-decay",
        type=float,
        help="AdamW weight decay (default: the start's own; 0.0025 for an ONNX start)",
    )
    finetune.add_argument(
        "--resume", action="store_true", help="continue the run in --out from its checkpoint"
    )
    add_speed_options(finetune)
    # The settings' defaults are the dataclasses' (finetune_config.ClosedLoopConfig and
    # FineTuneSettings; --precision's is auto): a flag left out is None here, so that a config
    # file's key is overridden only by a flag given.
    paths = ("help", "start", "dataset", "out", "config", "resume", "threads")
    finetune.set_defaults(**{a.dest: None for a in finetune._actions if a.dest not in paths})
    finetune.set_defaults(handler=run_finetune)

    average = commands.add_parser(
        "average",
        help="the mean of two or more checkpoints' weights (a model soup; e.g. two fine-tunes' "
        "last.safetensors)",
        description="Writes a checkpoint whose weights are the mean of the given ones' "
        "(training/checkpoint_average.py): the same network and standardisation only; the "
        "optimiser state is dropped, the sources are named in the config and the model card.",
    )
    average.add_argument("checkpoints", type=Path, nargs="+", help="two or more .safetensors")
    average.add_argument("--out", type=Path, required=True, help="the averaged .safetensors")
    average.set_defaults(handler=run_average)


def run_average(args) -> int:
    from canis.training.checkpoint_average import average_checkpoints

    config = average_checkpoints(args.checkpoints, args.out)
    sources = ", ".join(Path(s["file"]).name for s in config["averaged_from"])
    print(f"wrote {args.out}: the mean of {sources}")
    return 0


def run_finetune(args) -> int:
    from canis.training.finetune import fine_tune
    from canis.training.finetune_config import (
        RUN_FIELDS,
        ClosedLoopConfig,
        FineTuneSettings,
        config_fields,
        read_config,
    )

    # Checked before anything is written (an ONNX start is converted into --out below).
    from_file = read_config(args.config) if args.config else {}
    if not args.dataset.exists():
        raise FileNotFoundError(
            f"{args.dataset} does not exist; build it with `canis dataset build`"
        )
    given = {k: getattr(args, k) for k in config_fields() if getattr(args, k) is not None}
    values = from_file | given
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
    recipe = None
    if args.config:
        recipe = {"file": str(args.config), "values": from_file, "overrides": given}
    fine_tune(settings, loop, args.out, resume=args.resume, recipe=recipe)
    print(f"done: {args.out} (last.safetensors, log.csv)")
    return 0

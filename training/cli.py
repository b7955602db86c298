"""The training package's commands: `canis bvh`, `canis dataset`, `canis keyframes`,
`canis skeleton` (reading the mocap and building what training and the runtime use from it)
and `canis finetune` (closed-loop fine-tuning, training/finetune.py) here; `canis train`,
`canis train-rtn` and `canis upsample` in cli_train.py. Each parser sits beside its handler.
export's commands (export/cli.py) and the evaluation's are wired in canis/cli.py: training
imports nothing of the layers above it."""

from __future__ import annotations

import argparse
from pathlib import Path

from canis.runtime.profiler import check_output_path
from canis.training import cli_train
from canis.training.cli_train import apply_speed_options
from canis.training.clips import DOWNLOAD_HINT, default_mocap_dir


def add_commands(commands: argparse._SubParsersAction, recipe=None) -> None:
    """`recipe`: the handler of `canis train --config` (export/recipe.py)."""
    add_data_commands(commands)
    cli_train.add_commands(commands, recipe)
    add_finetune_commands(commands)


def add_data_commands(commands: argparse._SubParsersAction) -> None:
    """`canis bvh`, `canis dataset`, `canis keyframes` and `canis skeleton`."""
    bvh = commands.add_parser("bvh", help="inspect BVH motion capture files")
    bvh_commands = bvh.add_subparsers(dest="bvh_command", metavar="ACTION", required=True)
    info = bvh_commands.add_parser(
        "info", help="parse BVH files or folders and summarise them (frames, seconds, skeleton)"
    )
    info.add_argument(
        "paths", nargs="*", type=Path, help="files or folders (default: the dog mocap folder)"
    )
    info.set_defaults(handler=run_bvh_info)

    dataset = commands.add_parser("dataset", help="build MANN training data from dog BVH")
    dataset_commands = dataset.add_subparsers(
        dest="dataset_command", metavar="ACTION", required=True
    )
    build = dataset_commands.add_parser(
        "build", help="label, mirror and featurise every clip into one compressed .npz"
    )
    build.add_argument("--bvh", type=Path, help="folder of .bvh clips (default: the dog mocap)")
    build.add_argument(
        "--out",
        type=Path,
        default=Path("data/dog_dataset.npz"),
        help="dataset file to write (default: %(default)s)",
    )
    build.add_argument(
        "--report",
        type=Path,
        metavar="DIR",
        help="write dataset.md, plots and per-clip label timelines here",
    )
    build.add_argument(
        "--timeline-clip", metavar="NAME", help="clip whose contact/phase timeline the report shows"
    )
    build.add_argument("--seed", type=int, default=0, help="seed of the validation hold-out")
    build.set_defaults(handler=run_dataset_build)
    transitions = dataset_commands.add_parser(
        "transitions", help="the transition network's frames of every clip, one .npz"
    )
    transitions.add_argument("--bvh", type=Path, help="folder of .bvh clips (default: the mocap)")
    transitions.add_argument(
        "--out",
        type=Path,
        default=Path("data/dog_transitions.npz"),
        help="file to write (default: %(default)s)",
    )
    transitions.add_argument("--seed", type=int, default=0, help="seed of the validation hold-out")
    transitions.add_argument(
        "--held-out-of",
        type=Path,
        metavar="RTN_STEP.onnx",
        help="hold out the clips this exported RTN never trained on (to measure it)",
    )
    transitions.set_defaults(handler=run_dataset_transitions)

    keyframes = commands.add_parser(
        "keyframes", help="pick the stand/sit/lie/beg keyframe poses out of the mocap"
    )
    keyframes.add_argument("--bvh", type=Path, help="folder of .bvh clips (default: the mocap)")
    keyframes.add_argument("--out", type=Path, required=True, help="JSON file to write")
    keyframes.set_defaults(handler=run_keyframes_export)

    skeleton = commands.add_parser("skeleton", help="write a BVH file's skeleton as JSON")
    skeleton.add_argument("--bvh", type=Path, required=True, help="a BVH file of the dog")
    skeleton.add_argument("--out", type=Path, required=True, help="JSON file to write")
    skeleton.add_argument(
        "--any-skeleton",
        action="store_true",
        help="write it even if it is not the dog's (nothing else in canis can use it)",
    )
    skeleton.set_defaults(handler=run_skeleton_export)


def _resolve_bvh_paths(paths: list[Path]) -> list[Path]:
    if not paths:
        folder = default_mocap_dir()
        if folder is None:
            raise FileNotFoundError(f"no BVH paths given and no mocap folder. {DOWNLOAD_HINT}")
        paths = [folder]
    files = []
    for path in paths:
        if path.is_dir():
            files += sorted(path.glob("*.bvh"))
        elif path.exists():
            files.append(path)
        else:
            raise FileNotFoundError(f"{path} does not exist")
    if not files:
        raise FileNotFoundError(f"no .bvh files in {', '.join(map(str, paths))}")
    return files


def run_bvh_info(args) -> int:
    import time

    from canis.training.bvh import read_bvh

    files = _resolve_bvh_paths(args.paths)
    total_frames = 0
    total_s = 0.0
    start = time.perf_counter()
    for path in files:
        motion = read_bvh(path)
        total_frames += motion.frame_count
        total_s += motion.duration_s
        print(
            f"{path.name:28s} {motion.frame_count:6d} frames {motion.duration_s:7.1f} s "
            f"{motion.fps:5.1f} fps {len(motion.joint_names)} joints"
        )
    elapsed = time.perf_counter() - start
    print(
        f"{len(files)} files, {total_frames} frames, {total_s / 60:.1f} min of motion, "
        f"read in {elapsed:.1f} s"
    )
    return 0


def run_skeleton_export(args) -> int:
    from canis.runtime.skeleton import not_dog_reason
    from canis.training.bvh import read_bvh

    check_output_path(args.out, "skeleton", make_folders=True)
    skeleton = read_bvh(args.bvh).skeleton()
    reason = not_dog_reason(skeleton)
    if reason and not args.any_skeleton:
        raise ValueError(f"{args.bvh}: {reason}; --any-skeleton writes it anyway")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    skeleton.to_json(args.out)
    print(f"wrote {args.out} ({skeleton.joint_count} joints)")
    return 0


def run_dataset_build(args) -> int:
    import logging

    from canis.training import dataset, report

    check_output_path(args.out, "dataset", make_folders=True)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
    folder = args.bvh or default_mocap_dir()
    if folder is None:
        raise FileNotFoundError(f"no --bvh folder given and no mocap folder found. {DOWNLOAD_HINT}")
    result = dataset.build(folder, seed=args.seed, keep_clips=args.report is not None)
    dataset.save(result, args.out)
    rows = len(result.arrays["X"])
    print(
        f"wrote {args.out}: {rows} pairs from {len(result.arrays['clip_names'])} clips "
        f"(mirrored included), {int(result.arrays['validation'].sum())} held out, "
        f"built in {result.metadata['build_seconds']} s"
    )
    for skipped in result.metadata["skipped"]:
        print(f"skipped {skipped['clip']}: {skipped['reason']}")
    for clip in result.metadata["resampled"]:
        print(f"resampled {clip['clip']} from {clip['from_fps']:g} fps to 60 fps")
    if args.report:
        print(f"report: {report.write_report(result, args.report, args.timeline_clip)}")
    return 0


def run_keyframes_export(args) -> int:
    from canis.runtime.poses import save_keyframes
    from canis.training.clips import pick_keyframes

    check_output_path(args.out, "keyframes", make_folders=True)
    files = _resolve_bvh_paths([args.bvh] if args.bvh else [])
    keyframes = pick_keyframes(files)
    save_keyframes(keyframes, args.out)
    for k in keyframes:
        print(f"{k.name:6s} hips {k.hips_height_m:.3f} m  from {k.source}")
    print(f"wrote {args.out}")
    return 0


def run_dataset_transitions(args) -> int:
    from canis.training import transition_data

    check_output_path(args.out, "transition data", make_folders=True)
    folder = args.bvh or default_mocap_dir()
    if folder is None:
        raise FileNotFoundError(f"no --bvh folder given and no mocap folder found. {DOWNLOAD_HINT}")
    held_out = None
    if args.held_out_of is not None:
        from canis.runtime.transition import TransitionModel

        model = TransitionModel(args.held_out_of)
        held_out = transition_data.held_out_clips(model.metadata, args.held_out_of)
    arrays = transition_data.build(folder, seed=args.seed, held_out=held_out)
    transition_data.save(arrays, args.out)
    held_out = int(arrays["clip_validation"].sum())
    print(
        f"wrote {args.out}: {len(arrays['frames'])} frames of {len(arrays['clip_names'])} clips "
        f"(mirrored included), {held_out} held out"
    )
    return 0


def add_finetune_commands(commands: argparse._SubParsersAction) -> None:
    """`canis finetune`."""
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

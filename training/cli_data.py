"""`canis bvh`, `canis dataset`, `canis keyframes` and `canis skeleton`: reading the mocap and
building what training and the runtime use from it. Each parser sits beside its handler."""

from __future__ import annotations

import argparse
from pathlib import Path

from canis.runtime.profiler import check_output_path
from canis.training.data_paths import DOWNLOAD_HINT, default_mocap_dir


def add_commands(commands: argparse._SubParsersAction) -> None:
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
    from canis.training.keyframes import pick_keyframes

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
    arrays = transition_data.build(folder, seed=args.seed)
    transition_data.save(arrays, args.out)
    held_out = int(arrays["clip_validation"].sum())
    print(
        f"wrote {args.out}: {len(arrays['frames'])} frames of {len(arrays['clip_names'])} clips "
        f"(mirrored included), {held_out} held out"
    )
    return 0

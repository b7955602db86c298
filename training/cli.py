"""Subcommands of the training package."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from canis.runtime.assets import shipped_model_path
from canis.runtime.precision import PRECISIONS
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

    from canis.training.schedules import describe  # torch-free: the numbers training uses

    train = commands.add_parser("train", help="train MANN, PFNN or the vanilla network")
    train.add_argument("--model", choices=("mann", "pfnn", "vnn"), default="mann")
    train.add_argument("--experts", type=int, default=8, help="MANN experts K (8 or 4)")
    train.add_argument("--dataset", type=Path, default=Path("data/dog_dataset.npz"))
    train.add_argument("--out", type=Path, required=True, help="run folder (checkpoints, log)")
    train.add_argument(
        "--schedule",
        choices=("paper", "cpu"),
        default="paper",
        help=f"{describe('paper')}; {describe('cpu')} (see training/schedules.py)",
    )
    train.add_argument("--epochs", type=int, help="override the schedule's epoch count")
    train.add_argument("--batch-size", type=int, help="override the schedule's batch size")
    train.add_argument("--lr", type=float, help="override the schedule's peak learning rate")
    train.add_argument("--seed", type=int, default=0)
    train.add_argument(
        "--no-oversample",
        action="store_true",
        help="sample rows uniformly instead of 11x trot/canter weights",
    )
    train.add_argument(
        "--resume", action="store_true", help="continue the run in --out from its last checkpoint"
    )
    train.set_defaults(handler=run_train)

    finetune = commands.add_parser(
        "finetune",
        help="fine-tune a trained controller in closed loop on its own outputs (acRNN-style)",
    )
    finetune.add_argument("--start", type=Path, required=True, help="canis train checkpoint")
    finetune.add_argument("--dataset", type=Path, default=Path("data/dog_dataset.npz"))
    finetune.add_argument("--out", type=Path, required=True, help="run folder (checkpoint, log)")
    finetune.add_argument("--epochs", type=int, default=8)
    finetune.add_argument("--steps-per-epoch", type=int, default=200)
    finetune.add_argument("--batch-size", type=int, default=32)
    finetune.add_argument("--lr", type=float, default=1e-5)
    finetune.add_argument("--seed", type=int, default=0)
    finetune.add_argument(
        "--ground-truth-frames", type=int, default=4, help="mocap inputs opening each stretch"
    )
    finetune.add_argument(
        "--own-frames",
        type=int,
        default=8,
        help="inputs rebuilt from the network's own outputs after them (0: one-step training)",
    )
    finetune.add_argument(
        "--curriculum-epochs", type=int, default=4, help="epochs over which own frames grow"
    )
    finetune.add_argument(
        "--contact-weight",
        type=float,
        default=0.0,
        help="weight of the planted-paw world-motion term (0: off; training/contact_loss.py)",
    )
    finetune.add_argument(
        "--resume", action="store_true", help="continue the run in --out from its checkpoint"
    )
    finetune.set_defaults(handler=run_finetune)

    export = commands.add_parser(
        "export", help="export a training checkpoint to ONNX, at fp32, fp16 or int8"
    )
    export.add_argument(
        "checkpoint",
        type=Path,
        help="a .safetensors checkpoint of canis train, or an fp32 .onnx export to convert",
    )
    export.add_argument("--out", type=Path, required=True, help="ONNX file to write")
    export.add_argument(
        "--precision",
        choices=PRECISIONS,
        default="fp32",
        help="weights as exported (fp32), or converted by ONNX Runtime's tools: float16 "
        "(fp16) or dynamically quantised int8 (default: %(default)s; see export/precision.py)",
    )
    export.add_argument(
        "--dataset",
        type=Path,
        help="dataset whose rows join the parity check (default: random rows)",
    )
    export.add_argument(
        "--card",
        action="store_true",
        help="run the closed-loop check and write a model card beside the model",
    )
    export.add_argument(
        "--card-seconds",
        type=float,
        default=60.0,
        help="seconds per closed-loop run for the card (default: %(default)s)",
    )
    export.add_argument(
        "--card-note", default="", help="context for the card, e.g. what else ran during training"
    )
    export.set_defaults(handler=run_export)

    train_rtn = commands.add_parser(
        "train-rtn", help="train the recurrent transition network (RTN)"
    )
    train_rtn.add_argument("--dataset", type=Path, default=Path("data/dog_transitions.npz"))
    train_rtn.add_argument("--out", type=Path, required=True, help="run folder")
    train_rtn.add_argument("--steps", type=int, default=6000, help="optimiser steps")
    train_rtn.add_argument("--batch-size", type=int, default=64)
    train_rtn.add_argument("--lr", type=float, default=5e-4, help="AMSGrad learning rate")
    train_rtn.add_argument(
        "--teacher-forcing", type=float, default=0.2, help="probability of a true input frame"
    )
    train_rtn.add_argument("--seed", type=int, default=0)
    train_rtn.add_argument(
        "--residual",
        choices=("interpolation", "previous"),
        default="interpolation",
        help="what the decoder corrects: one interpolation step toward the target (default) "
        "or the previous frame (the RTN paper's)",
    )
    train_rtn.add_argument("--resume", action="store_true", help="continue the run in --out")
    train_rtn.add_argument(
        "--fk-weight", type=float, default=0.5, help="weight of the forward-kinematics term"
    )
    train_rtn.add_argument(
        "--init-from", type=Path, help="start from this checkpoint's weights (fine-tuning)"
    )
    train_rtn.add_argument(
        "--stop-after", type=int, help="end after this step's checkpoint (resume later)"
    )
    train_rtn.set_defaults(handler=run_train_rtn)

    export_rtn = commands.add_parser(
        "export-rtn", help="export an RTN checkpoint to <name>_step.onnx and <name>_init.onnx"
    )
    export_rtn.add_argument(
        "checkpoint", type=Path, help="an RTN checkpoint, or an fp32 _step.onnx to convert"
    )
    export_rtn.add_argument("--out", type=Path, required=True, help="the _step.onnx to write")
    export_rtn.add_argument(
        "--precision",
        choices=PRECISIONS,
        default="fp32",
        help="fp32, fp16 or int8, as for `canis export` (default: %(default)s)",
    )
    export_rtn.add_argument(
        "--dataset", type=Path, help="transition data whose held-out windows join the check"
    )
    export_rtn.add_argument(
        "--card", action="store_true", help="write the model card (<name>.md) beside it"
    )
    export_rtn.set_defaults(handler=run_export_rtn)

    evaluate = commands.add_parser("evaluate", help="measure models against the mocap")
    evaluate_commands = evaluate.add_subparsers(
        dest="evaluate_command", metavar="WHAT", required=True
    )
    transitions_eval = evaluate_commands.add_parser(
        "transitions", help="RTN vs interpolation and zero velocity: L2P, L2Q, NPSS"
    )
    transitions_eval.add_argument("--model", type=Path, help="an _step.onnx (default: shipped)")
    transitions_eval.add_argument("--dataset", type=Path, default=Path("data/dog_transitions.npz"))
    transitions_eval.add_argument("--json", type=Path, help="write the figures here")
    transitions_eval.add_argument(
        "--doc",
        type=Path,
        default=Path("docs/EVALUATION.md"),
        help="evaluation document whose transitions section is rewritten (default: %(default)s)",
    )
    transitions_eval.add_argument(
        "--stride", type=int, default=20, help="frames between window starts (default: 20)"
    )
    transitions_eval.add_argument(
        "--motion-model",
        type=Path,
        default=shipped_model_path(),
        help="motion network whose hand-back from transitions is measured (default: shipped "
        "MANN-8)",
    )
    transitions_eval.add_argument(
        "--also",
        action="append",
        default=[],
        metavar="NAME=STEP_ONNX",
        help="another RTN to put in the tables (e.g. one trained with --residual previous)",
    )
    transitions_eval.set_defaults(handler=run_evaluate_transitions)

    controllers_eval = evaluate_commands.add_parser(
        "controllers",
        help="the MANN paper's tables: skating, stiffness, paths, expert ablation, gaits",
    )
    controllers_eval.add_argument(
        "--models",
        help="comma-separated names of MANN8, MANN4, PFNN, VNN (default: those present: the "
        "shipped MANN8 and PFNN, and the others once trained); NAME=PATH.onnx for any other file",
    )
    controllers_eval.add_argument(
        "--bvh", type=Path, help="folder of .bvh clips (default: the mocap)"
    )
    controllers_eval.add_argument("--json", type=Path, help="write the figures here")
    controllers_eval.add_argument(
        "--doc",
        type=Path,
        default=Path("docs/EVALUATION.md"),
        help="evaluation document whose controllers section is rewritten (default: %(default)s)",
    )
    controllers_eval.add_argument(
        "--figures", type=Path, default=Path("docs/images"), help="folder for the PNG figures"
    )
    controllers_eval.add_argument(
        "--no-ablation", action="store_true", help="skip the expert ablation (the slow part)"
    )
    controllers_eval.set_defaults(handler=run_evaluate_controllers)

    precision_eval = evaluate_commands.add_parser(
        "precision",
        help="the quality gate: fp16, int8 and top-2 gating beside fp32, in closed loop",
    )
    precision_eval.add_argument(
        "--model",
        type=Path,
        default=shipped_model_path("MANN-8 fp32"),
        help="the fp32 motion model (default: the shipped MANN-8 fp32)",
    )
    precision_eval.add_argument(
        "--variants",
        help="comma-separated (default: fp32,fp16,int8,top2; topK: fp32 blending only the "
        "top K experts)",
    )
    precision_eval.add_argument(
        "--card-seconds",
        type=float,
        default=20.0,
        help="seconds per run of the card's closed-loop check (default: %(default)s)",
    )
    precision_eval.add_argument("--bvh", type=Path, help="folder of .bvh clips (default: mocap)")
    precision_eval.add_argument("--json", type=Path, help="write the figures here")
    precision_eval.add_argument(
        "--keep", type=Path, metavar="DIR", help="keep the variants' ONNX files here"
    )
    precision_eval.add_argument(
        "--cache",
        type=Path,
        metavar="DIR",
        help="keep each variant's figures here and reuse them (measure variants in separate "
        "runs with --variants, then all together)",
    )
    precision_eval.add_argument(
        "--doc",
        type=Path,
        default=Path("docs/EVALUATION.md"),
        help="evaluation document whose precision section is rewritten (default: %(default)s)",
    )
    precision_eval.set_defaults(handler=run_evaluate_precision)

    upsample = commands.add_parser(
        "upsample", help="keep one frame per second of a clip and regenerate the rest (RTN)"
    )
    upsample.add_argument("clip", type=Path, help="a .bvh clip of the dog")
    upsample.add_argument("--keep-every", type=int, default=60, help="frames between kept frames")
    upsample.add_argument("--out", type=Path, required=True, help="the .bvh to write")
    upsample.add_argument("--model", type=Path, help="an _step.onnx (default: shipped)")
    upsample.set_defaults(handler=run_upsample)

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

    files = _resolve_bvh_paths([args.bvh] if args.bvh else [])
    keyframes = pick_keyframes(files)
    save_keyframes(keyframes, args.out)
    for k in keyframes:
        print(f"{k.name:6s} hips {k.hips_height_m:.3f} m  from {k.source}")
    print(f"wrote {args.out}")
    return 0


def run_train(args) -> int:
    from canis.training.train import TrainConfig, train

    config = TrainConfig.from_schedule(
        args.schedule,
        kind=args.model,
        experts=args.experts,
        epochs=args.epochs,
        batch_size=args.batch_size,
        lr=args.lr,
        seed=args.seed,
        oversample=not args.no_oversample,
        dataset=str(args.dataset),
    )
    if not args.dataset.exists():
        raise FileNotFoundError(
            f"{args.dataset} does not exist; build it with `canis dataset build`"
        )
    rows = train(config, args.out, resume=args.resume)
    if rows:
        print(f"done: {args.out} (last.safetensors, best.safetensors, log.csv)")
    return 0


def run_finetune(args) -> int:
    from canis.training.closed_loop_training import ClosedLoopConfig, FineTuneSettings, fine_tune

    if not args.dataset.exists():
        raise FileNotFoundError(
            f"{args.dataset} does not exist; build it with `canis dataset build`"
        )
    settings = FineTuneSettings(
        start=str(args.start),
        dataset=str(args.dataset),
        epochs=args.epochs,
        steps_per_epoch=args.steps_per_epoch,
        batch_size=args.batch_size,
        lr=args.lr,
        seed=args.seed,
    )
    loop = ClosedLoopConfig(
        args.ground_truth_frames, args.own_frames, args.curriculum_epochs, args.contact_weight
    )
    fine_tune(settings, loop, args.out, resume=args.resume)
    print(f"done: {args.out} (last.safetensors, log.csv)")
    return 0


def _is_onnx(path: Path) -> bool:
    return path.suffix == ".onnx"


def run_export(args) -> int:
    from canis.export.onnx_export import export_onnx
    from canis.export.precision import convert_motion_model

    if _is_onnx(args.checkpoint):
        return run_convert(args)
    if args.precision == "fp32":
        report = export_onnx(args.checkpoint, args.out, args.dataset)
    else:
        # The fp32 graph is exported and checked against PyTorch first, then converted.
        with tempfile.TemporaryDirectory() as folder:
            fp32 = Path(folder) / args.out.name
            report = export_onnx(args.checkpoint, fp32, args.dataset)
            report["precision_check"] = convert_motion_model(fp32, args.out, args.precision)
            report["bytes"] = args.out.stat().st_size
    errors = ", ".join(f"{k} {v:.1e}" for k, v in report["parity_max_abs_error"].items())
    print(
        f"wrote {args.out} ({report['bytes'] / 1e6:.1f} MB, {report['kind']}, "
        f"{args.precision}); fp32 parity vs PyTorch, max abs error: {errors}"
    )
    if "precision_check" in report:
        print(_precision_summary(report["precision_check"]))
    if args.card:
        from canis.export.model_card import write_card
        from canis.tools.closed_loop import closed_loop_report
        from canis.training.checkpoint import load_checkpoint

        closed_loop = closed_loop_report(args.out, seconds=args.card_seconds)
        config = load_checkpoint(args.checkpoint).config
        card = write_card(
            args.out, config, args.checkpoint, report, closed_loop, note=args.card_note
        )
        print(f"wrote {card}; closed loop {'passed' if closed_loop['passed'] else 'FAILED'}")
    return 0


def _precision_summary(check: dict) -> str:
    figures = ", ".join(
        f"{k} {v:.4f}" for k, v in check.items() if k.endswith(("_std", "_abs_error"))
    )
    return f"{check['precision']} vs its fp32 source on random inputs: {figures}"


def run_convert(args) -> int:
    """`canis export MODEL.onnx --precision P --out OUT`: a variant of an fp32 export."""
    from canis.export.precision import convert_motion_model

    if args.dataset is not None:
        raise ValueError("--dataset: not used when converting an .onnx file (no checkpoint)")
    check = convert_motion_model(args.checkpoint, args.out, args.precision)
    print(f"wrote {args.out} ({check['bytes'] / 1e6:.1f} MB, {args.precision})")
    print(_precision_summary(check))
    if args.card:
        from canis.export.model_card import write_variant_card
        from canis.tools.closed_loop import closed_loop_report

        closed_loop = closed_loop_report(args.out, seconds=args.card_seconds)
        card = write_variant_card(args.out, check, closed_loop, note=args.card_note)
        print(f"wrote {card}; closed loop {'passed' if closed_loop['passed'] else 'FAILED'}")
    return 0


def run_dataset_transitions(args) -> int:
    from canis.training import transition_data

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


def run_train_rtn(args) -> int:
    from canis.training.train_rtn import RtnTrainConfig, train_rtn

    config = RtnTrainConfig(
        steps=args.steps,
        batch_size=args.batch_size,
        lr=args.lr,
        teacher_probability=args.teacher_forcing,
        residual=args.residual,
        fk_weight=args.fk_weight,
        init_from=str(args.init_from or ""),
        seed=args.seed,
        dataset=str(args.dataset),
    )
    train_rtn(config, args.out, resume=args.resume, stop_after=args.stop_after)
    print(f"done: {args.out} (last.safetensors, best.safetensors, log.csv)")
    return 0


def run_export_rtn(args) -> int:
    from canis.export.precision import convert_transition_model
    from canis.export.rtn_export import export_rtn

    if _is_onnx(args.checkpoint):
        if args.dataset is not None or args.card:
            raise ValueError("--dataset, --card: not used when converting an .onnx file")
        check = convert_transition_model(args.checkpoint, args.out, args.precision)
        sizes = ", ".join(f"{k} {v / 1e6:.1f} MB" for k, v in check["bytes"].items())
        print(f"wrote {sizes} ({args.precision})")
        print(_precision_summary(check))
        return 0
    if args.precision != "fp32":
        if args.card:
            raise ValueError("--card: the RTN's card describes its fp32 export; drop --precision")
        # The fp32 graphs are exported and checked against PyTorch first, then converted.
        with tempfile.TemporaryDirectory() as folder:
            fp32 = Path(folder) / args.out.name
            export_rtn(args.checkpoint, fp32, args.dataset)
            check = convert_transition_model(fp32, args.out, args.precision)
        print(_precision_summary(check))
        return 0
    report = export_rtn(args.checkpoint, args.out, args.dataset)
    errors = ", ".join(f"{k} {v:.1e}" for k, v in report["rollout_max_abs_error"].items())
    sizes = ", ".join(f"{k} {v / 1e6:.1f} MB" for k, v in report["bytes"].items())
    print(
        f"wrote {sizes}; {report['parameter_bytes'] / 1e6:.2f} MB of parameters; rollout "
        f"parity vs PyTorch, max abs error: {errors}"
    )
    if args.card:
        from canis.export.rtn_export import write_rtn_card

        command = f"./run canis export-rtn {args.checkpoint} --out {args.out} --card"
        print(f"wrote {write_rtn_card(args.out, args.checkpoint, report, command)}")
    return 0


def run_evaluate_transitions(args) -> int:
    from canis.training.evaluate_transitions import evaluate, write

    results = evaluate(
        args.model,
        args.dataset,
        stride=args.stride,
        motion_model_path=args.motion_model,
        others=dict(_name_and_path(a) for a in args.also),
    )
    command = "./run canis evaluate transitions" + (f" --model {args.model}" if args.model else "")
    command += "".join(f" --also {a}" for a in args.also)
    write(results, args.json, args.doc, command)
    for metric in ("l2p", "l2q", "npss"):
        for method in [*results["setup"]["residuals"], "interp", "zerovel"]:
            values = " ".join(f"{n}:{v:.3f}" for n, v in results[method][metric].items())
            print(f"{metric:4s} {method:8s} {values}")
    print(f"wrote {', '.join(str(p) for p in (args.json, args.doc) if p)}")
    return 0


def run_evaluate_controllers(args) -> int:
    from canis.training.data_paths import DOWNLOAD_HINT, default_mocap_dir
    from canis.training.evaluate_controllers import default_models, evaluate, write

    if args.models is None:
        present, note = default_models()
        print(note, flush=True)
        args.models = ",".join(present)
    names, overrides = [], {}
    for item in args.models.split(","):
        name, sep, path = item.strip().partition("=")
        names.append(name)
        if sep:
            overrides[name] = Path(path)
    mocap = args.bvh or default_mocap_dir()
    if mocap is None:
        raise FileNotFoundError(f"no mocap folder: give --bvh. {DOWNLOAD_HINT}")
    results = evaluate(
        names, mocap, overrides, figures_dir=args.figures, ablation=not args.no_ablation
    )
    command = f"./run canis evaluate controllers --models {args.models}"
    command += " --no-ablation" if args.no_ablation else ""
    write(results, args.json, args.doc, command)
    for name in ["GT", *names]:
        skating = results[name]["skating_cm"]
        print(f"{name:6s} skating " + " ".join(f"{s}:{v:.3f}" for s, v in skating.items()))
    print(f"wrote {', '.join(str(p) for p in (args.json, args.doc, args.figures) if p)}")
    return 0


def run_evaluate_precision(args) -> int:
    from canis.tools.machine import machine
    from canis.training.data_paths import DOWNLOAD_HINT, default_mocap_dir
    from canis.training.precision_gate import VARIANTS, evaluate, write

    variants = [v.strip() for v in (args.variants or ",".join(VARIANTS)).split(",") if v.strip()]
    if "fp32" not in variants:
        variants.insert(0, "fp32")
    mocap = args.bvh or default_mocap_dir()
    if mocap is None:
        raise FileNotFoundError(f"no mocap folder: give --bvh. {DOWNLOAD_HINT}")
    results = evaluate(
        args.model,
        mocap,
        variants,
        card_seconds=args.card_seconds,
        keep_dir=args.keep,
        cache_dir=args.cache,
    )
    command = (
        f"./run canis evaluate precision --variants {','.join(variants)} "
        f"--card-seconds {args.card_seconds:g}"
    )
    m = machine()
    write(results, args.json, args.doc, command, f"{m['cpu']}, {m['logical_cores']} threads")
    for name, entry in results["variants"].items():
        failed = [r["figure"] for r in entry["gate"] if not r["passed"]]
        print(
            f"{name:5s} p50 {entry['inference']['p50_ms']:.3f} ms: "
            + ("passes" if not failed else f"fails {len(failed)}: {', '.join(failed)}")
        )
    print(f"default to ship: {results['default']}")
    print(f"wrote {', '.join(str(p) for p in (args.json, args.doc) if p)}")
    return 0


def run_upsample(args) -> int:
    from canis.training.upsample import upsample_clip

    report = upsample_clip(args.model, args.clip, args.out, args.keep_every)
    print(
        f"wrote {args.out}: {report['regenerated']} of {report['frames']} frames regenerated; "
        f"mean joint error {report['joint_error_cm']:.1f} cm against the clip"
    )
    return 0


def _name_and_path(text: str) -> tuple[str, Path]:
    name, sep, path = text.partition("=")
    if not sep or not name or not path:
        raise ValueError(f"--also {text!r}: expected NAME=PATH_TO_STEP_ONNX")
    return name, Path(path)

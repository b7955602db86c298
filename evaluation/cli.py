"""`canis evaluate`: every measurement a release needs, in turn, each writing its own section
of one results page; `canis evaluate controllers|transitions|variation|precision|speed` runs
one part. Tracked docs are written only when asked (`--write-docs`: docs/RESULTS.md); otherwise
the page goes to the output folder. Each parser sits beside its handler."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from canis.evaluation import replay_commands
from canis.evaluation.doc_sections import RESULTS_DOC, add_doc_options, results_doc
from canis.evaluation.release import OUT_DIR, PARTS, run_evaluate_all
from canis.runtime.assets import shipped_model_path


def add_commands(commands: argparse._SubParsersAction) -> None:
    evaluate = commands.add_parser(
        "evaluate",
        help="measure models against the mocap; with no part named, every part a release "
        "needs, into one results page",
        description="With no part named, runs every part in turn (" + ", ".join(PARTS) + ") and "
        f"writes one results page: {OUT_DIR}/RESULTS.md, or {RESULTS_DOC} with --write-docs.",
    )
    evaluate.add_argument(
        "--write-docs", action="store_true", help=f"write the page to {RESULTS_DOC}"
    )
    evaluate.add_argument(
        "--out",
        type=Path,
        default=OUT_DIR,
        help="folder for each part's JSON, and for the page unless --write-docs (default: "
        "%(default)s)",
    )
    evaluate.add_argument(
        "--parts",
        default=",".join(PARTS),
        help="comma-separated parts to run (default: %(default)s)",
    )
    evaluate.set_defaults(handler=run_evaluate_all)
    evaluate_commands = evaluate.add_subparsers(
        dest="evaluate_command", metavar="PART", required=False
    )
    replay_eval = evaluate_commands.add_parser(
        "replay",
        help="the held-out yardstick: each clip the networks never trained on, replayed by its "
        "own commands; skating, speed, stiffness, contacts and pose per gait, and the pose "
        "after a jump and a stop",
    )
    replay_eval.add_argument(
        "--models",
        default="MANN8-int8,PFNN",
        help="comma-separated names (MANN8-int8, the shipped default; MANN8, its fp32 source; "
        "PFNN; ...) or NAME=PATH.onnx (default: %(default)s)",
    )
    replay_eval.add_argument("--bvh", type=Path, help="folder of .bvh clips (default: the mocap)")
    replay_eval.add_argument(
        "--clips",
        choices=("held-out", "all"),
        default="held-out",
        help="held-out: the validation clips of every model, which none of them trained on "
        "(default); all: every clip, trained on or not",
    )
    replay_eval.add_argument("--json", type=Path, help="write the figures here")
    add_doc_options(replay_eval)
    replay_eval.set_defaults(handler=replay_commands.run_evaluate_replay)

    ablation_eval = evaluate_commands.add_parser(
        "ablation",
        help="which fine-tuning terms earn their keep: networks fine-tuned with one term off, "
        "replayed on the held-out clips beside a reference's, against its spread between seeds",
    )
    ablation_eval.add_argument(
        "--models",
        required=True,
        help="comma-separated ROW@SEED=PATH.onnx, the reference's rows first (e.g. "
        "'every term@1=a.onnx,every term@2=b.onnx,no moving skating@1=c.onnx')",
    )
    ablation_eval.add_argument("--bvh", type=Path, help="folder of .bvh clips (default: the mocap)")
    ablation_eval.add_argument(
        "--section",
        choices=("ablation", "generalisation"),
        default="ablation",
        help="the results page's section: ablation (fine-tuning terms, one off at a time; "
        "default) or generalisation (the recipe with one setting changed)",
    )
    ablation_eval.set_defaults(clips="held-out")
    ablation_eval.add_argument("--json", type=Path, help="write the figures here")
    add_doc_options(ablation_eval)
    ablation_eval.set_defaults(handler=replay_commands.run_evaluate_ablation)

    transitions_eval = evaluate_commands.add_parser(
        "transitions", help="RTN vs interpolation and zero velocity: L2P, L2Q, NPSS"
    )
    transitions_eval.add_argument("--model", type=Path, help="an _step.onnx (default: shipped)")
    transitions_eval.add_argument("--dataset", type=Path, default=Path("data/dog_transitions.npz"))
    transitions_eval.add_argument("--json", type=Path, help="write the figures here")
    add_doc_options(transitions_eval)
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
    transitions_eval.add_argument(
        "--handback-only",
        action="store_true",
        help="measure only the hand-back and the postures asked while moving (no mocap "
        "needed) and rewrite only their section of --doc",
    )
    transitions_eval.set_defaults(handler=run_evaluate_transitions)

    variation_eval = evaluate_commands.add_parser(
        "variation",
        help="sampled RTN transitions (target noise): diversity and L2P per variation level",
    )
    variation_eval.add_argument("--model", type=Path, help="an _step.onnx (default: shipped)")
    variation_eval.add_argument("--dataset", type=Path, default=Path("data/dog_transitions.npz"))
    variation_eval.add_argument(
        "--levels", default="0,0.5,1", help="comma-separated variations (default: %(default)s)"
    )
    variation_eval.add_argument(
        "--samples", type=int, default=4, help="samples of each request (default: 4)"
    )
    variation_eval.add_argument(
        "--stride", type=int, default=40, help="frames between window starts (default: 40)"
    )
    variation_eval.add_argument("--json", type=Path, help="write the figures here")
    add_doc_options(variation_eval)
    variation_eval.set_defaults(handler=run_evaluate_variation)

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
    add_doc_options(controllers_eval)
    controllers_eval.add_argument(
        "--figures",
        type=Path,
        help="folder for the PNG figures (default: images/ beside the page written, where its "
        "links point; none when no page is written"
        " so an evaluation written to a copy of the document leaves docs/images alone)",
    )
    controllers_eval.add_argument(
        "--no-ablation", action="store_true", help="skip the expert ablation (the slow part)"
    )
    controllers_eval.set_defaults(handler=run_evaluate_controllers)

    precision_eval = evaluate_commands.add_parser(
        "precision",
        help="the quality gate: fp16 and int8 beside fp32, in closed loop",
    )
    precision_eval.add_argument(
        "--model",
        type=Path,
        default=shipped_model_path("MANN-8 fp32"),
        help="the fp32 motion model (default: the shipped MANN-8 fp32)",
    )
    precision_eval.add_argument(
        "--variants",
        help="comma-separated (default: fp32,fp16,int8)",
    )
    precision_eval.add_argument(
        "--card-seconds",
        type=float,
        default=20.0,
        help="seconds per run of the card's closed-loop check (default: %(default)s)",
    )
    precision_eval.add_argument(
        "--nudges",
        type=int,
        help="fp32 copies with their weights nudged (--nudge-relative) from which each variant "
        "is measured too, so a figure is judged by its mean against the closed loop's own noise "
        "(0: the file alone; default: NUDGES in evaluation/precision_gate.py)",
    )
    precision_eval.add_argument(
        "--nudge-relative",
        type=float,
        help="how far the nudged copies' weights move, relative (default: NUDGE_RELATIVE in "
        "evaluation/precision_gate.py, 1e-2, which moves fp32's outputs about as far as int8's "
        "conversion does, so fp32's starts show how the closed loop answers a change that size)",
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
    add_doc_options(precision_eval)
    precision_eval.set_defaults(handler=run_evaluate_precision)

    speed_eval = evaluate_commands.add_parser(
        "speed",
        help="speed tracking: the speed over 2 s windows against the asked one, flat and hills",
    )
    speed_eval.add_argument(
        "--model", type=Path, default=shipped_model_path(), help="default: the shipped model"
    )
    speed_eval.add_argument(
        "--seconds", type=float, default=14.0, help="per start (default: %(default)s)"
    )
    add_doc_options(speed_eval)
    speed_eval.set_defaults(handler=run_evaluate_speed)


def run_evaluate_variation(args) -> int:
    args.doc = results_doc(args)
    from canis.evaluation.variation import evaluate_variation, write
    from canis.runtime.arguments import finite_number
    from canis.runtime.machine import describe_machine
    from canis.runtime.transition import MAX_VARIATION

    try:
        levels = [
            finite_number(float(v), "--levels", 0.0, MAX_VARIATION) for v in args.levels.split(",")
        ]
    except ValueError as error:
        raise ValueError(
            f"--levels: comma-separated numbers from 0 to {MAX_VARIATION:g}, got {args.levels!r}"
        ) from error
    if args.samples < 2 or args.stride < 1:
        raise ValueError("--samples must be >= 2 and --stride >= 1")
    results = evaluate_variation(args.model, args.dataset, levels, args.samples, args.stride)
    command = "./run canis evaluate variation" + (f" --model {args.model}" if args.model else "")
    command += f" --levels {args.levels} --samples {args.samples} --stride {args.stride}"
    m = describe_machine()
    doc = args.doc
    write(results, args.json, doc, command, f"{m['cpu']}, {m['logical_cores']} threads")
    for level, row in results["levels"].items():
        for key in ("l2p", "diversity_cm", "landing_cm"):
            values = " ".join(f"{n}:{v:.3f}" for n, v in row[key].items())
            print(f"variation {level:4s} {key:12s} {values}")
    print(f"wrote {', '.join(str(p) for p in (args.json, doc) if p)}")
    return 0


def run_evaluate_transitions(args) -> int:
    args.doc = results_doc(args)
    from canis.evaluation.transitions import evaluate, handback_and_postures, write
    from canis.runtime.transition import TransitionModel

    if args.handback_only:
        results = handback_and_postures(TransitionModel(args.model), args.motion_model)
        command = "./run canis evaluate transitions --handback-only"
        command += f" --model {args.model}" if args.model else ""
        write(results, args.json, args.doc, command)
        print(f"wrote {', '.join(str(p) for p in (args.json, args.doc) if p)}")
        return 0
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
    args.doc = results_doc(args)
    from canis.evaluation.controllers import evaluate
    from canis.evaluation.controllers_report import write
    from canis.evaluation.model_registry import default_models, parse_models
    from canis.training.clips import DOWNLOAD_HINT, default_mocap_dir

    if args.models is None:
        present, note = default_models()
        print(note, flush=True)
        args.models = ",".join(present)
    names, overrides = parse_models(args.models)
    mocap = args.bvh or default_mocap_dir()
    if mocap is None:
        raise FileNotFoundError(f"no mocap folder: give --bvh. {DOWNLOAD_HINT}")
    if args.figures is None and args.doc is not None:
        args.figures = args.doc.parent / "images"
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
    args.doc = results_doc(args)
    from canis.evaluation.precision_gate import (
        NUDGE_RELATIVE,
        NUDGES,
        VARIANTS,
        evaluate,
        write,
    )
    from canis.runtime.machine import benchmark_machine
    from canis.training.clips import DOWNLOAD_HINT, default_mocap_dir

    nudges = NUDGES if args.nudges is None else args.nudges
    if nudges < 0:
        raise ValueError(f"--nudges {nudges}: must be 0 or more")
    relative = NUDGE_RELATIVE if args.nudge_relative is None else args.nudge_relative
    if not (math.isfinite(relative) and 0 < relative < 1):
        raise ValueError(f"--nudge-relative {relative}: must be above 0 and under 1")
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
        nudges=nudges,
        nudge_relative=relative,
    )
    command = (
        f"./run canis evaluate precision --variants {','.join(variants)} "
        f"--card-seconds {args.card_seconds:g}"
    ) + (f" --nudges {nudges}" if nudges != NUDGES else "")
    command += f" --nudge-relative {relative:g}" if relative != NUDGE_RELATIVE else ""
    m = benchmark_machine()
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


def run_evaluate_speed(args) -> int:
    args.doc = results_doc(args)
    from canis.evaluation.doc_sections import replace_section
    from canis.evaluation.speed_tracking import SETTLE_S, WINDOW_S, report
    from canis.runtime.machine import benchmark_machine

    shortest = SETTLE_S + WINDOW_S
    if not (math.isfinite(args.seconds) and shortest <= args.seconds <= 3600):
        raise ValueError(
            f"--seconds {args.seconds:g}: must be from {shortest:g} (the settle and one window) "
            "to 3600"
        )

    command = "./run canis evaluate speed" + (
        f" --seconds {args.seconds:g}" if args.seconds != 14.0 else ""
    )
    m = benchmark_machine()
    body = report(args.model, args.seconds, command, f"{m['cpu']}, {m['logical_cores']} threads")
    print(body)
    if args.doc is not None:
        replace_section(args.doc, "speed", body + "\n")
        print(f"wrote {args.doc}")
    return 0


def _name_and_path(text: str) -> tuple[str, Path]:
    name, sep, path = text.partition("=")
    if not sep or not name or not path:
        raise ValueError(f"--also {text!r}: expected NAME=PATH_TO_STEP_ONNX")
    return name, Path(path)

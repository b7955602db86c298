"""`canis bench`: the runtime's timings (evaluation/benchmark.py) and the viewer's
(demo/benchmark.py) in one report, on the terminal, optionally as JSON, and as its own marked
section of the results page when asked (--write-docs: docs/RESULTS.md; the rest is kept)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from canis.evaluation.doc_sections import RESULTS_DOC, replace_section
from canis.runtime.assets import shipped_models_dir

SHIPPED_MODELS = shipped_models_dir()


def add_command(commands: argparse._SubParsersAction) -> None:
    bench = commands.add_parser(
        "bench",
        help="time inference, frames and the viewer (--write-docs: its section of docs/RESULTS.md)",
    )
    bench.add_argument(
        "--models",
        type=Path,
        nargs="*",
        help="ONNX models (default: the shipped ones in assets/models, and the evaluation's "
        "MANN-4 and vanilla network where they have been trained)",
    )
    bench.add_argument(
        "--precisions",
        default="fp32,fp16,int8",
        help="also time each fp32 model converted to these (export/precision.py), made in a "
        "temporary folder (default: %(default)s)",
    )
    bench.add_argument("--json", type=Path, help="also write the figures as JSON here")
    where = bench.add_mutually_exclusive_group()
    where.add_argument(
        "--write-docs",
        action="store_true",
        help="rewrite the `canis bench` section of docs/RESULTS.md (the rest is kept)",
    )
    where.add_argument(
        "--markdown", type=Path, help="rewrite the `canis bench` section of this file instead"
    )
    bench.add_argument("--seconds", type=float, default=2.0, help="timing per inference case")
    bench.add_argument("--no-viewer", action="store_true", help="skip the viewer's timing")
    bench.add_argument(
        "--viewer-only",
        action="store_true",
        help="time only the viewer and replace just its section of --markdown",
    )
    bench.add_argument(
        "--transition-model", type=Path, help="RTN _step.onnx (default: the shipped one)"
    )
    bench.add_argument(
        "--readouts-only",
        action="store_true",
        help="time only a step against a step with every readout (256 dogs), and print it",
    )
    bench.add_argument(
        "--rig",
        type=Path,
        help="time only frames of --dogs dogs retargeted onto this rig (.glb) beside the "
        "built-in dog's, side by side (evaluation/rig_benchmark.py)",
    )
    bench.add_argument("--dogs", type=int, default=64, help="dogs for --rig (default: 64)")
    bench.set_defaults(handler=run_bench)


def with_precisions(models: list[Path], precisions: list[str], folder: Path) -> list[Path]:
    """The models, each fp32 one followed by its variants at the other precisions."""
    from canis.export.precision import convert_motion_model, variant_path
    from canis.runtime.inference import MotionModel

    names = {Path(m).name for m in models}
    out = []
    for model in models:
        out.append(model)
        if MotionModel(model, device="cpu").precision != "fp32":
            continue
        for precision in precisions:
            target = variant_path(Path(model), precision)
            if precision == "fp32" or target.name in names:
                continue
            convert_motion_model(model, folder / target.name, precision)
            out.append(folder / target.name)
    return out


VIEWER_HEADING = "\n## The viewer "


def replace_viewer_section(text: str, section: str) -> str:
    """`text` with its viewer section (from its heading to the next section's, or the end)
    replaced by `section` (the viewer benchmark's markdown), or `section` appended."""
    start = text.find(VIEWER_HEADING)
    if start < 0:
        return text.rstrip("\n") + "\n" + section
    end = text.find("\n## ", start + len(VIEWER_HEADING))
    return text[:start] + section.rstrip("\n") + "\n" + (text[end:] if end >= 0 else "")


def run_viewer_only(args) -> int:
    from canis.demo import benchmark as viewer_benchmark
    from canis.runtime.assets import shipped_model_path

    if args.no_viewer:
        raise SystemExit("canis bench: --viewer-only and --no-viewer ask for opposite things")
    if args.markdown is None:
        raise SystemExit("canis bench --viewer-only: needs --markdown FILE or --write-docs")
    if not args.markdown.is_file():
        raise SystemExit(f"canis bench --viewer-only: {args.markdown} does not exist")
    model = (args.models or [shipped_model_path()])[0]
    viewer = viewer_benchmark.benchmark_viewer(model)
    args.markdown.write_text(
        replace_viewer_section(args.markdown.read_text(), viewer_benchmark.markdown(viewer))
    )
    if args.json:
        args.json.write_text(json.dumps({"viewer": viewer}, indent=1) + "\n")
    print(f"viewer: {viewer['fps_at_p50']:.0f} fps at the median; wrote {args.markdown}")
    return 0


def run_readouts_only(args) -> int:
    """The readouts' benchmark alone: printed, and written as JSON when asked."""
    from canis.evaluation import readout_benchmark
    from canis.runtime.assets import shipped_model_path

    if args.markdown is not None or args.no_viewer:
        raise SystemExit("canis bench --readouts-only: prints (and --json); no page, no viewer")
    report = readout_benchmark.run_readouts_only((args.models or [shipped_model_path()])[0])
    print(readout_benchmark.markdown(report["readouts"], report["machine"]))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    return 0


def run_bench(args) -> int:
    import tempfile

    modes = [
        f for f in ("viewer_only", "readouts_only", "rig") if getattr(args, f) not in (None, False)
    ]
    if len(modes) > 1:
        names = " and ".join("--" + m.replace("_", "-") for m in modes)
        raise ValueError(f"{names}: each times only its own part; give one")
    if args.write_docs:
        args.markdown = RESULTS_DOC
    if args.viewer_only:
        return run_viewer_only(args)
    if args.readouts_only:
        return run_readouts_only(args)
    if args.rig is not None:
        return run_rig_bench(args)

    from canis.evaluation import benchmark
    from canis.evaluation.model_registry import MODEL_FILES
    from canis.runtime.assets import present_shipped_models, shipped_model_path
    from canis.runtime.transition import shipped_transition_model_path

    # The shipped motion models by the one manifest (the transition network's two graphs are
    # timed on their own, evaluation/transition_benchmark.py), then any trained locally.
    shipped = sorted(present_shipped_models().values())
    trained = [p for p in MODEL_FILES.values() if p.is_file() and p.parent != SHIPPED_MODELS]
    models = args.models or shipped + trained
    if not models:
        raise FileNotFoundError(f"no models given and none in {SHIPPED_MODELS}")
    default = shipped_model_path()
    frame_model = next((p for p in models if Path(p).resolve() == default.resolve()), models[0])
    with tempfile.TemporaryDirectory() as folder:
        precisions = [p.strip() for p in args.precisions.split(",") if p.strip()]
        models = with_precisions(models, precisions, Path(folder))
        report = benchmark.run_benchmarks(models, args.seconds, frame_model=frame_model)
    text = benchmark.markdown(report)
    transition_model = args.transition_model or shipped_transition_model_path()
    if transition_model.is_file():
        from canis.evaluation import transition_benchmark

        report["transitions"] = transition_benchmark.benchmark_transitions(
            transition_model, frame_model
        )
        text += transition_benchmark.markdown(report["transitions"])
    if not args.no_viewer:
        from canis.demo import benchmark as viewer_benchmark

        report["viewer"] = viewer_benchmark.benchmark_viewer(frame_model)
        text += viewer_benchmark.markdown(report["viewer"])
    # Its own marked block only: the rest of the page (the other parts' sections and the
    # text written by hand around them) stays as it is.
    if args.markdown is not None:
        replace_section(args.markdown, "bench", text)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    print_summary(report)
    print(f"wrote {', '.join(str(p) for p in (args.markdown, args.json) if p) or 'nothing'}")
    return 0


def run_rig_bench(args) -> int:
    from canis.evaluation.rig_benchmark import benchmark_rig_frames, summary_line
    from canis.runtime.assets import shipped_model_path

    if args.json:
        from canis.runtime.profiler import check_output_path

        check_output_path(args.json, "JSON")
    model = args.models[0] if args.models else shipped_model_path()
    report = benchmark_rig_frames(model, args.rig, count=args.dogs)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    print(summary_line(report))
    return 0


def print_summary(report: dict) -> None:
    """The report's headline figures on the terminal."""
    for name, floor in report["floors"].items():
        print(
            f"{name:18s} {floor['weight_bytes'] / 1e6:5.1f} MB of weights a frame: runtime "
            f"p50 {floor['runtime']['p50_ms']:.3f} ms, bare ONNX Runtime "
            f"{floor['onnxruntime']['p50_ms']:.3f} ms ({floor['ratio']:.2f}x)"
        )
    for row in report["inference"]:
        print(
            f"{row['file']:18s} threads {row['threads']} batch {row['batch']:4d}: "
            f"p50 {row['p50_ms']:.3f} ms, p99 {row['p99_ms']:.3f} ms"
        )
    paced = report["frames_paced"][0]["stages"]["frame"]
    print(
        f"frame p50 {report['frame_ms_p50']:.3f} ms, p99 {report['frame_ms_p99']:.3f} ms; "
        f"outside inference {report['non_inference_ms_p50']:.3f} ms; paced as a game's: "
        f"frame p50 {paced['p50_ms']:.3f} ms, p99 {paced['p99_ms']:.3f} ms"
    )
    if "transitions" in report:
        t = report["transitions"]
        print(
            f"rtn step p50 {t['step'][0]['p50_ms']:.3f} ms; 30-frame transition generated in "
            f"{t['generate_one_dog'][1]['p50_ms']:.2f} ms"
        )
    if "readouts" in report:
        r = report["readouts"]
        print(
            f"{r['characters']} dogs: step p50 {r['step']['p50_ms']:.2f} ms, with every readout "
            f"{r['step_and_readouts']['p50_ms']:.2f} ms ({r['ratio_p50']:.3f}x; p99 "
            f"{r['ratio_p99']:.3f}x)"
        )
    if "viewer" in report:
        print(f"viewer: {report['viewer']['fps_at_p50']:.0f} fps at the median")

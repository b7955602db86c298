"""`canis export` and `canis export-rtn`: checkpoints (or fp32 exports) to ONNX at fp32, fp16 or
int8. Each parser sits beside its handler."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from canis.runtime.inference import PRECISIONS


def add_commands(commands: argparse._SubParsersAction) -> None:
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


def run_recipe(config: Path, out: Path, resume: bool, force: bool) -> int:
    """`canis train --config RECIPE.toml --out RUN` (export/recipe.py)."""
    from canis.export.recipe import run_recipe as run

    return run(config, out, resume, force)


def _is_onnx(path: Path) -> bool:
    return path.suffix == ".onnx"


def _check_out(out: Path, what: str) -> None:
    """--out checked before any work: not a folder, its folders creatable and writable, and
    named .onnx (the runtime, the _init sibling and the card all go by the suffix)."""
    from canis.runtime.profiler import check_output_path

    check_output_path(out, what, make_folders=True)
    if out.suffix != ".onnx":
        raise ValueError(f"--out {out}: name the {what} FILE.onnx")


def run_export(args) -> int:
    from canis.export.onnx_export import export_onnx
    from canis.export.precision import convert_motion_model

    _check_out(args.out, "model")
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
        from canis.export.closed_loop import closed_loop_report
        from canis.export.model_card import write_card
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
        from canis.export.closed_loop import closed_loop_report
        from canis.export.model_card import write_variant_card

        closed_loop = closed_loop_report(args.out, seconds=args.card_seconds)
        card = write_variant_card(args.out, check, closed_loop, note=args.card_note)
        print(f"wrote {card}; closed loop {'passed' if closed_loop['passed'] else 'FAILED'}")
    return 0


def run_export_rtn(args) -> int:
    from canis.export.precision import convert_transition_model
    from canis.export.rtn_export import export_rtn

    _check_out(args.out, "transition network's step graph")
    if "_step" not in args.out.name:
        raise ValueError(f"--out {args.out}: name the step graph <name>_step.onnx")
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

"""Subcommands of the runtime package."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from canis.runtime.assets import shipped_models_dir

SHIPPED_MODELS = shipped_models_dir()


def add_commands(commands: argparse._SubParsersAction) -> None:
    run = commands.add_parser("run", help="drive a model headless from a script or a path")
    run.add_argument(
        "--model",
        type=Path,
        help="ONNX motion model (default: a demo recording's own, else the shipped MANN-8)",
    )
    source = run.add_mutually_exclusive_group(required=True)
    source.add_argument("--script", type=Path, help="JSON timeline of control events")
    source.add_argument("--path", type=Path, help="JSON waypoints to follow at a speed")
    run.add_argument(
        "--terrain",
        help="flat, hills, slope, steps, or a .npy/.png heightmap (default: a demo recording's "
        "own, else flat)",
    )
    run.add_argument("--seconds", type=float, help="default: a demo recording's length, else 10 s")
    run.add_argument("--json", type=Path, help="write the summary here")
    run.add_argument("--trace", type=Path, help="Chrome trace of every stage (for Perfetto)")
    run.add_argument("--record", type=Path, help="save the displayed poses as .npz")
    run.add_argument(
        "--transition-model",
        type=Path,
        help="an RTN _step.onnx for the script's transitions (default: the shipped one)",
    )
    run.add_argument(
        "--foot-lock",
        action="store_true",
        help="pin planted paws where they land (runtime/foot_lock.py)",
    )
    run.set_defaults(handler=run_headless)

    soak = commands.add_parser(
        "soak", help="long headless run on random commands: does anything degrade?"
    )
    soak.add_argument("--model", type=Path, default=SHIPPED_MODELS / "mann8.onnx")
    soak.add_argument("--hours", type=float, default=1.0, help="simulated hours")
    soak.add_argument("--characters", type=int, default=4)
    soak.add_argument("--seed", type=int, default=0)
    soak.add_argument("--json", type=Path, help="write the summary here")
    soak.add_argument(
        "--transition-model",
        type=Path,
        help="RTN _step.onnx whose transitions join the soak (default: the shipped one)",
    )
    soak.add_argument("--no-transitions", action="store_true", help="soak the motion network alone")
    soak.set_defaults(handler=run_soak)


def run_soak(args) -> int:
    from canis.tools.soak import soak

    if not args.hours > 0:
        raise ValueError("--hours must be positive")
    seconds = args.hours * 3600

    def progress(frame, frames):
        print(f"\r{frame / frames:6.1%} simulated", end="", flush=True)

    summary = soak(
        args.model,
        seconds,
        characters=args.characters,
        seed=args.seed,
        progress=progress,
        transition_model_path=False if args.no_transitions else args.transition_model,
    )
    print()
    text = json.dumps(summary, indent=1)
    if args.json:
        args.json.write_text(text + "\n")
    print(text)
    return 0


def recorded_model_path(reference: str, script: Path) -> Path:
    """A recording's model: a shipped model's name, or a path (relative to the recording)."""
    from canis.runtime.assets import SHIPPED_MOTION_MODELS, shipped_model_path

    if reference in SHIPPED_MOTION_MODELS:
        return shipped_model_path(reference)
    path = Path(reference)
    return path if path.is_absolute() else script.parent / path


def run_headless(args) -> int:
    from canis.tools.run import read_script, run

    header = read_script(args.script)[1] if args.script else {}
    model = args.model or (
        recorded_model_path(header["model"], args.script)
        if "model" in header
        else SHIPPED_MODELS / "mann8.onnx"
    )
    terrain = args.terrain or header.get("terrain", "flat")
    seconds = args.seconds if args.seconds is not None else header.get("seconds", 10.0)
    if not seconds > 0:
        raise ValueError("--seconds must be positive")
    start = header.get("start", {})
    summary = run(
        model,
        seconds,
        script=args.script,
        path=args.path,
        terrain=terrain,
        trace=args.trace,
        record=args.record,
        transition_model_path=args.transition_model,
        foot_lock=args.foot_lock,
        start_xz_m=start.get("xz_m"),
        start_yaw_rad=start.get("yaw_rad"),
        speed_calibration=header.get("speed_calibration", False),
    )
    text = json.dumps(summary, indent=1)
    if args.json:
        args.json.write_text(text + "\n")
    stages = summary["frame_time"]["stages"]
    print(
        f"{summary['frames']} frames on {summary['terrain']}: frame p50 "
        f"{stages['frame']['p50_ms']:.2f} ms, p99 {stages['frame']['p99_ms']:.2f} ms; "
        f"mean speed {summary['mean_speed_mps']:.2f} m/s; penetration "
        f"{summary['paw_penetration_cm']['mean']:.2f} cm, floating in contact "
        f"{summary['paw_floating_in_contact_cm']['mean']:.2f} cm; skating "
        f"{summary['foot_skating_cm_per_frame']['all_legs']:.3f} cm/frame; non-finite "
        f"frames {summary['non_finite_frames']}"
    )
    if "path_deviation" in summary:
        d = summary["path_deviation"]
        print(f"path deviation {d['position_cm']:.1f} cm, {d['angle_deg']:.1f} deg")
    return 0

"""Subcommands of the harness (canis.tools): run, soak, rig, mesh, compare."""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from canis.runtime.assets import shipped_model_path


def add_commands(commands: argparse._SubParsersAction) -> None:
    run = commands.add_parser("run", help="drive a model headless from a script or a path")
    run.add_argument(
        "--model",
        type=Path,
        help="ONNX motion model (default: a demo recording's own, else the shipped default)",
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
    run.add_argument(
        "--trace",
        type=Path,
        help="Chrome trace: frames with their stages, counters and markers (for Perfetto)",
    )
    run.add_argument("--csv", type=Path, help="per-frame wall, CPU and stage times as CSV")
    run.add_argument("--characters", type=int, default=1, help="dogs stepped together (default: 1)")
    run.add_argument(
        "--threads", type=int, default=1, help="ONNX Runtime intra-op threads (default: 1)"
    )
    run.add_argument(
        "--device",
        choices=("auto", "cpu", "cuda"),
        default="auto",
        help="where the network runs (default: CUDA if present, else CPU)",
    )
    run.add_argument("--record", type=Path, help="save the displayed poses as .npz")
    run.add_argument(
        "--export",
        type=Path,
        help="write the displayed motion as .glb (glTF 2.0: body mesh, skin, animation) or .bvh",
    )
    run.add_argument(
        "--transition-model",
        type=Path,
        help="an RTN _step.onnx for the script's transitions (default: the shipped one)",
    )
    run.add_argument(
        "--foot-lock",
        action="store_true",
        help="pin planted paws where they land (runtime/kinematics.py)",
    )
    run.add_argument(
        "--transition-worker",
        action="store_true",
        help="run the transition network's steps on a thread of their own between frames "
        "(Controller(transition_worker=True); the motion is the same)",
    )
    run.add_argument(
        "--pace",
        action="store_true",
        help="start a frame every 1/60 s, as a game does, instead of back to back (the real "
        "time the run takes; frame times exclude the wait, which the worker can use)",
    )
    run.add_argument(
        "--rig",
        type=Path,
        help="a skinned glTF dog (.glb/.gltf) to retarget the motion onto: the figures are "
        "then the rig's (docs/EMBEDDING.md, 'Your own dog')",
    )
    run.add_argument("--mapping", type=Path, help="the rig's joint mapping file (with --rig)")
    run.set_defaults(handler=run_headless)

    soak = commands.add_parser(
        "soak", help="long headless run on random commands: does anything degrade?"
    )
    soak.add_argument("--model", type=Path, default=shipped_model_path())
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
    soak.add_argument(
        "--speed-tracking",
        choices=("default", "calibrated", "off"),  # tools/soak.py SPEED_TRACKING
        default="default",
        help="the Controller's default cruise control, the demo's (with the model's "
        "speed calibration), or none (default: default)",
    )
    soak.set_defaults(handler=run_soak)

    from canis.tools import rig_make

    rig_make.add_command(commands)

    mesh = commands.add_parser(
        "mesh", help="regenerate the dog's body mesh from the skeleton (needs canis[mesh])"
    )
    mesh.add_argument(
        "--out", type=Path, help="where to write it (default: the shipped assets/mesh/dog_body.npz)"
    )
    mesh.set_defaults(handler=run_mesh)

    compare = commands.add_parser(
        "compare", help="compare the frame times of two `canis run` or `canis bench` JSONs"
    )
    compare.add_argument("before", type=Path, help="the baseline's JSON")
    compare.add_argument("after", type=Path, help="the candidate's JSON")
    compare.add_argument("--json", type=Path, help="write the comparison here")
    compare.add_argument(
        "--resamples", type=int, default=2000, help="bootstrap resamples (default: 2000)"
    )
    compare.add_argument(
        "--threshold",
        type=float,
        default=0.05,
        help="smallest relative change reported as one (default: 0.05, i.e. 5%%)",
    )
    compare.set_defaults(handler=run_compare)


def run_compare(args) -> int:
    from canis.tools.compare import compare_files, format_comparison

    result = compare_files(
        args.before, args.after, resamples=args.resamples, threshold=args.threshold
    )
    print(format_comparison(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


def run_mesh(args) -> int:
    from canis.runtime.assets import asset_path
    from canis.runtime.body import BODY_MESH_ASSET
    from canis.runtime.skeleton import Skeleton, shipped_dog_skeleton_path

    try:
        from canis.tools.dog_mesh import write_dog_mesh
    except ImportError as error:
        raise ValueError(
            f"canis mesh needs the mesh extra (pip install 'canis[mesh]'): {error}"
        ) from None
    out = args.out or asset_path(BODY_MESH_ASSET, must_exist=False)
    mesh = write_dog_mesh(out, Skeleton.from_json(shipped_dog_skeleton_path()))
    print(f"wrote {out}: {mesh.vertex_count} vertices, {len(mesh.triangles)} triangles")
    return 0


MAX_SIMULATED_S = 7 * 24 * 3600.0  # a week of frames: longer runs are typos, not tests


def checked_duration_s(seconds: float, argument: str, given: float) -> float:
    """A simulated time that runs at least one frame and ends within a week: inf overflowed
    the frame count and 1e-9 s ran no frame at all, both into a traceback; 1e12 s ran on for
    ever."""
    from canis.runtime.features import FPS

    if not (math.isfinite(seconds) and 1.0 / FPS <= seconds <= MAX_SIMULATED_S):
        raise ValueError(
            f"{argument} {given:g}: must be at least one frame (1/{FPS} s) and at most a week "
            f"({MAX_SIMULATED_S:g} s)"
        )
    return seconds


def run_soak(args) -> int:
    import sys

    from canis.runtime.profiler import check_output_path
    from canis.tools.soak import soak, verdicts

    seconds = checked_duration_s(args.hours * 3600, "--hours", args.hours)
    if args.json:
        check_output_path(args.json, "JSON summary")
    on_terminal = sys.stdout.isatty()
    shown = [-1]

    def progress(frame, frames):
        if on_terminal:  # one line, rewritten in place
            print(f"\r{frame / frames:6.1%} simulated", end="", flush=True)
        elif frame * 10 // frames > shown[0]:  # piped or logged: a line per tenth
            shown[0] = frame * 10 // frames
            print(f"soak: {frame / frames:.0%} simulated", flush=True)

    summary = soak(
        args.model,
        seconds,
        characters=args.characters,
        seed=args.seed,
        progress=progress,
        transition_model_path=False if args.no_transitions else args.transition_model,
        speed_tracking=args.speed_tracking,
    )
    if on_terminal:
        print()
    judged = verdicts(summary)
    failed = [text for passed, text in judged if not passed]
    summary["verdict"] = {"passed": not failed, "failed": failed}
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1) + "\n")
    print(
        f"{summary['characters']} dogs for {summary['simulated_seconds'] / 3600:g} simulated "
        f"hours ({summary['transitions']} transitions, {summary['wall_seconds']} s of wall time)"
    )
    for passed, text in judged:
        print(f"{'PASS' if passed else 'FAIL'} {text}")
    speed, frame_ms = summary["speed_error_mps"], summary["frame_ms"]
    print(
        f"not judged: speed error while moving steadily ({args.speed_tracking} speed tracking)"
        f" mean {speed['mean']:.2f} m/s ({speed['signed_mean']:+.2f} m/s signed: + is faster "
        f"than asked), p95 {speed['p95']:.2f} m/s; frame time p50 {frame_ms['p50']:.2f} ms, p99 "
        f"{frame_ms['p99']:.2f} ms"
    )
    verdict = "PASS" if not failed else f"FAIL, {len(failed)} of {len(judged)} checks"
    print(f"canis soak: {verdict}" + (f"; full summary in {args.json}" if args.json else ""))
    return 0 if not failed else 1


def _slowest_frame(timing: dict) -> str:
    """Where the slowest frame's wall time went: the thread on the CPU, or off it (descheduled
    by the OS, or waiting), which tells a frame's own work from the machine's (issue 15)."""
    worst = timing.get("worst_frames") or []
    if not worst:
        return "no frame kept"
    frame = worst[0]
    off_cpu_ms = max(frame["wall_ms"] - frame["cpu_ms"], 0.0)
    return (
        f"slowest frame ({frame['frame']}) {frame['cpu_ms']:.2f} ms on CPU, "
        f"{off_cpu_ms:.2f} ms off it"
    )


def run_headless(args) -> int:
    from canis.runtime.assets import referenced_model_path
    from canis.runtime.profiler import check_output_path
    from canis.tools.run import run
    from canis.tools.script import read_script

    if args.json:  # the other outputs (trace, CSV, export) are checked by run()
        check_output_path(args.json, "JSON summary")
    header = read_script(args.script)[1] if args.script else {}
    model = args.model or (
        referenced_model_path(header["model"], args.script.parent)
        if "model" in header
        else shipped_model_path()
    )
    terrain = args.terrain or header.get("terrain", "flat")
    seconds = args.seconds if args.seconds is not None else header.get("seconds", 10.0)
    start = header.get("start", {})
    summary = run(
        model,
        checked_duration_s(seconds, "--seconds", seconds),
        script=args.script,
        path=args.path,
        terrain=terrain,
        trace=args.trace,
        record=args.record,
        transition_model_path=args.transition_model,
        foot_lock=args.foot_lock,
        transition_worker=args.transition_worker,
        pace=args.pace,
        export=args.export,
        characters=args.characters,
        threads=args.threads,
        device=args.device,
        csv=args.csv,
        start_xz_m=start.get("xz_m"),
        start_yaw_rad=start.get("yaw_rad"),
        speed_calibration=header.get("speed_calibration", False),
        rig=args.rig,
        mapping=args.mapping,
    )
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1) + "\n")
    timing = summary["frame_time"]
    stages = timing["stages"]
    print(
        f"{summary['frames']} frames of {summary['characters']} dog(s) on {summary['terrain']}: "
        f"frame (wall) p50 {stages['frame']['p50_ms']:.2f} ms, p99 "
        f"{stages['frame']['p99_ms']:.2f} ms, max {stages['frame']['max_ms']:.2f} ms; CPU p50 "
        f"{timing['frame_cpu']['p50_ms']:.2f} ms, max {timing['frame_cpu']['max_ms']:.2f} ms; "
        f"{_slowest_frame(timing)}; untimed in frame p50 "
        f"{timing['other']['p50_ms']:.2f} ms; "
        f"mean speed {summary['mean_speed_mps']:.2f} m/s; penetration "
        f"{summary['paw_penetration_cm']['mean']:.2f} cm, floating in contact "
        f"{summary['paw_floating_in_contact_cm']['mean']:.2f} cm; paws planted (front left, "
        f"front right, back left, back right) "
        f"{' / '.join(f'{share:.0%}' for share in summary['contact_share_by_paw'])} of frames; "
        "skating "
        f"{summary['foot_skating_cm_per_frame']['all_legs']:.3f} cm/frame; non-finite "
        f"frames {summary['non_finite_frames']}, non-finite network outputs "
        f"{summary['non_finite_model_outputs']}"
    )
    if "path_deviation" in summary:
        d = summary["path_deviation"]
        print(f"path deviation {d['position_cm']:.1f} cm, {d['angle_deg']:.1f} deg")
    if summary["non_finite_model_outputs"] or summary["non_finite_frames"]:
        # The runtime kept the last good pose, so the run finished; it did not go well.
        print(
            f"canis run: error: the network gave non-finite outputs on "
            f"{summary['non_finite_model_outputs']} dog-frames (the dogs held their last finite "
            "pose); check the model file",
            file=sys.stderr,
        )
        return 1
    return 0

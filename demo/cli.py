"""Subcommands of the demo package."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

SHIPPED_MODELS = Path(__file__).resolve().parent.parent / "assets" / "models"


def add_commands(commands: argparse._SubParsersAction) -> None:
    bench = commands.add_parser("bench", help="time inference and write docs/BENCHMARKS.md")
    bench.add_argument(
        "--models",
        type=Path,
        nargs="*",
        help="ONNX models (default: the shipped ones in assets/models)",
    )
    bench.add_argument("--json", type=Path, help="also write the figures as JSON here")
    bench.add_argument(
        "--markdown",
        type=Path,
        default=Path("docs/BENCHMARKS.md"),
        help="report to write (default: %(default)s)",
    )
    bench.add_argument("--seconds", type=float, default=2.0, help="timing per case")
    bench.set_defaults(handler=run_bench)

    demo = commands.add_parser(
        "demo",
        help="the interactive dog demo (today: a kinematics check; the viewer is not built yet)",
    )
    demo.set_defaults(handler=run_demo)


def _metres(values) -> str:
    return "[" + ", ".join(f"{v:.3f}" for v in values) + "]"


def run_demo(args) -> int:
    import numpy as np

    from runtime.kinematics import ccd_solve, forward_kinematics
    from runtime.rotations import quat_identity
    from runtime.skeleton import Skeleton, shipped_dog_skeleton_path
    from runtime.terrain import Heightmap

    print("canis demo: the interactive viewer (pyglet, gamepad or keyboard) is not built yet.")
    print("Today this command checks the installed kinematics core on the shipped dog skeleton.\n")
    skeleton = Skeleton.from_json(shipped_dog_skeleton_path())
    rest = quat_identity((1, skeleton.joint_count), dtype=np.float32)
    root = np.array([[0.0, 0.46, 0.0]], dtype=np.float32)
    positions, _ = forward_kinematics(skeleton, rest, root)
    paws = skeleton.group("paws")
    print(
        f"skeleton: {skeleton.joint_count} joints; rest-pose paw heights with the hips at "
        f"0.46 m: {_metres(positions[0, paws, 1])} m"
    )

    # A slope rising 10 cm per metre along x under the dog, sampled under each paw.
    slope = Heightmap(
        np.array([[-0.2, 0.2], [-0.2, 0.2]]), cell_size_m=4.0, origin_xz_m=(-2.0, -2.0)
    )
    ground, normals = slope.sample(positions[0, paws][:, [0, 2]])
    print(f"slope heights under the paws: {_metres(ground)} m, normal {_metres(normals[0])}")

    paw = skeleton.index("LeftHandSite")
    target = positions[:, paw] + np.array([-0.06, -0.08, 0.03], dtype=np.float32)
    residual = ccd_solve(skeleton, rest, root, skeleton.group("front_left_leg"), target)
    print(
        f"CCD moved the front-left paw 6 cm back, 8 cm down, 3 cm out: residual "
        f"{residual[0] * 1000:.3f} mm"
    )
    return 0


def run_bench(args) -> int:
    from runtime.benchmark import markdown, run_benchmarks

    models = args.models or sorted(SHIPPED_MODELS.glob("*.onnx"))
    if not models:
        raise FileNotFoundError(f"no models given and none in {SHIPPED_MODELS}")
    report = run_benchmarks(models, seconds_per_case=args.seconds)
    args.markdown.parent.mkdir(parents=True, exist_ok=True)
    args.markdown.write_text(markdown(report))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    for row in report["inference"]:
        print(
            f"{row['model']:5s} threads {row['threads']} batch {row['batch']:4d}: "
            f"p50 {row['p50_ms']:.3f} ms, p99 {row['p99_ms']:.3f} ms"
        )
    print(f"wrote {args.markdown}")
    return 0

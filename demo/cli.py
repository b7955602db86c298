"""Subcommands of the demo package."""

from __future__ import annotations

import argparse
import math
from pathlib import Path


def add_commands(commands: argparse._SubParsersAction) -> None:
    demo = commands.add_parser(
        "demo", help="the interactive dog demo (pyglet window; keyboard, or a gamepad)"
    )
    demo.add_argument(
        "--model",
        type=Path,
        help="ONNX model (default: the shipped MANN-8, MANN-8 fp32 and PFNN, which F1 cycles)",
    )
    demo.add_argument(
        "--terrain", default="hills", help="flat, hills, slope, steps, or a .npy/.png heightmap"
    )
    demo.add_argument(
        "--headless",
        action="store_true",
        help="render off-screen from --script into PNG frames in --out, or into an MP4 "
        "with --video",
    )
    demo.add_argument("--script", type=Path, help="control script (see canis run)")
    demo.add_argument("--seconds", type=float, default=10.0)
    demo.add_argument(
        "--out",
        type=Path,
        help="output folder, created when first written: screenshots (F12), input recordings "
        "(F5) and --headless frames (default: out/demo; with --video, PNG frames only when "
        "--out is given)",
    )
    demo.add_argument(
        "--video",
        type=Path,
        help="with --headless: write the run as an H.264 MP4 at 30 fps (e.g. out/tour.mp4), "
        "encoded as it renders; the file appears only when complete",
    )
    demo.add_argument(
        "--size",
        default="1280x720",
        help="window size in pixels, WIDTHxHEIGHT (default 1280x720)",
    )
    demo.add_argument(
        "--status-file",
        type=Path,
        help="write one JSON line per simulated frame (position, speed, yaw, action, jumps, "
        "what the HUD says) for scripts and tests to follow the demo",
    )
    demo.add_argument(
        "--rig",
        type=Path,
        action="append",
        default=[],
        help="a skinned glTF dog (.glb/.gltf) to show the motion on; repeat for several, C "
        "cycles them and the built-in dog (docs/EMBEDDING.md, 'Your own dog')",
    )
    demo.add_argument(
        "--camera-yaw",
        type=float,
        default=0.0,
        help="orbit camera yaw in degrees (0: from behind along +z)",
    )
    demo.add_argument(
        "--transition-worker",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="run the transition network's steps on a thread of their own while the window "
        "draws (default: on; --no-transition-worker runs them in the frame's step; the motion "
        "is the same, docs/RESULTS.md measures both)",
    )
    demo.add_argument(
        "--check",
        action="store_true",
        help="no window: drive the model (--model, default the shipped MANN-8) headless, "
        "check the transitions and the kinematics core, and print PASS or FAIL for each "
        "against its stated threshold (exit 1 on any failure)",
    )
    demo.set_defaults(handler=run_demo)


def _models(args) -> dict[str, Path]:
    from canis.runtime.assets import present_shipped_models, shipped_models_dir

    if args.model:
        return {args.model.stem: args.model}
    found = present_shipped_models()
    if not found:
        raise FileNotFoundError(f"no models in {shipped_models_dir()}; give one with --model")
    return found


def run_demo(args) -> int:
    import os
    import shutil
    import subprocess
    import sys

    if args.check:
        return run_check(_motion_model_path(args))
    if args.video is not None and not args.headless:
        raise ValueError("--video needs --headless (and --script)")
    if args.headless:
        if args.script is None:
            raise ValueError("--headless needs --script (a control timeline, see canis run)")
        from canis.demo.app import DemoApp
        from canis.demo.capture import CAPTURE_FPS, DEFAULT_OUT_DIR, capture
        from canis.tools.cli import checked_duration_s
        from canis.tools.script import ScriptDriver, load_script

        # Every refusal before any work: nothing is loaded, rendered or written till here.
        checked_duration_s(args.seconds, "--seconds", args.seconds)
        width, height = _window_size(args.size)
        _check_view_and_status(args)
        if args.video is not None:
            from canis.demo.video import check_video_path, ffmpeg_writer_available

            ffmpeg_writer_available()
            check_video_path(args.video)
        frames_dir = args.out if args.out is not None or args.video is None else None
        out_dir = args.out if args.out is not None else DEFAULT_OUT_DIR
        driver = ScriptDriver(load_script(args.script))
        app = DemoApp(
            _models(args),
            terrain=args.terrain,
            headless=True,
            width=width,
            height=height,
            out_dir=out_dir,
            status_file=args.status_file,
            transition_worker=args.transition_worker,
            rigs=args.rig,
        )
        app.camera["yaw"] = math.radians(args.camera_yaw)
        try:
            if args.video is None:
                written = capture(app, driver, args.seconds, frames_dir)
            else:
                from canis.demo.video import VideoWriter

                with VideoWriter(args.video, fps=CAPTURE_FPS) as video:
                    written = capture(app, driver, args.seconds, frames_dir, video=video)
        finally:
            app.close()
        if frames_dir is not None:
            print(f"wrote {len(written)} frames to {frames_dir}")
        if args.video is not None:
            print(f"wrote {args.video} ({video.frames} frames, {CAPTURE_FPS} fps)")
            return 0
        args.out = frames_dir
        if shutil.which("ffmpeg"):
            movie = args.out / "demo.mp4"
            subprocess.run(
                [
                    "ffmpeg",
                    "-y",
                    "-loglevel",
                    "error",
                    "-framerate",
                    str(CAPTURE_FPS),
                    "-i",
                    str(args.out / "frame_%05d.png"),
                    "-pix_fmt",
                    "yuv420p",
                    str(movie),
                ],
                check=True,
            )
            print(f"wrote {movie}")
        return 0
    if sys.platform.startswith("linux") and not (
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    ):
        headless, check = instead_commands()
        print(
            "canis demo: no display to open a window on. Render it headless into a video "
            f"instead, e.g.\n  {headless}\nor check the models and kinematics without a "
            f"window:\n  {check}",
            file=sys.stderr,
        )
        return 2
    app = _open_window(args)
    if app is None:
        return 2
    saved = app.run()
    if saved is not None:
        print(f"canis demo: the recording in progress was saved to {saved}")
    return 0


# The headless run the no-display message suggests (a shipped script, so it exists wherever
# canis is installed).
SUGGESTED_SCRIPT = "scripts/tour.json"  # 10 s: a walk, a canter, a turn and a sit
SUGGESTED_VIDEO = "out/demo/tour.mp4"


def launcher() -> str:
    """The command that runs canis as the user started it: `./run canis` when started through
    the checkout's ./run (which exports CANIS_LAUNCHER, the path it was called by), where a
    bare `canis` is not on PATH; else `canis`, an installed package's console script."""
    import os
    import shlex

    run = os.environ.get("CANIS_LAUNCHER")
    return f"{shlex.quote(run)} canis" if run else "canis"


def _shown_path(path: Path) -> str:
    """`path` as the user would type it: relative to the current folder when inside it."""
    import os
    import shlex

    try:
        shown = path.resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        shown = path
    return shlex.quote(os.fspath(shown))


def instead_commands() -> tuple[str, str]:
    """The commands to run without a window, each runnable as printed: a headless video of
    a shipped script, and the check."""
    from canis.runtime.assets import asset_path

    script = _shown_path(asset_path(SUGGESTED_SCRIPT))
    run = launcher()
    return (
        f"{run} demo --headless --script {script} --seconds 10 --video {SUGGESTED_VIDEO}",
        f"{run} demo --check",
    )


def _window_size(text: str) -> tuple[int, int]:
    try:
        width, height = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise ValueError(f"--size {text!r}: give WIDTHxHEIGHT, e.g. 1280x720") from None
    if not (320 <= width <= 8192 and 200 <= height <= 8192):
        raise ValueError(f"--size {text!r}: from 320x200 to 8192x8192")
    return width, height


def _open_window(args):
    """The demo's window, or None after one line on stderr saying why it cannot open (no X
    display, or no OpenGL 3.3 there) and what to run instead."""
    import os
    import sys

    headless, check = instead_commands()
    instead = f"instead run:  {headless}  or:  {check}"
    _check_view_and_status(args)
    try:
        from canis.demo.app import DemoApp
        from canis.demo.capture import DEFAULT_OUT_DIR

        width, height = _window_size(args.size)
        return DemoApp(
            _models(args),
            terrain=args.terrain,
            width=width,
            height=height,
            out_dir=args.out if args.out is not None else DEFAULT_OUT_DIR,
            status_file=args.status_file,
            transition_worker=args.transition_worker,
            rigs=args.rig,
        )
    except Exception as error:
        # By name: importing pyglet.window or pyglet.gl to name the classes opens the
        # display, the very thing that failed.
        kind = type(error).__name__
        if not type(error).__module__.startswith("pyglet"):
            raise
        if kind == "NoSuchDisplayException":
            problem = f"cannot open the display {os.environ.get('DISPLAY', '')!r}"
        elif kind in ("NoSuchConfigException", "ContextException", "ConfigException"):
            problem = (
                f"this display offers no OpenGL 3.3 core context, which the viewer needs "
                f"({error or kind})"
            )
        elif kind in ("GLException", "ShaderException"):
            problem = f"OpenGL failed on this display ({error})"
        else:
            raise
        print(f"canis demo: {problem}; {instead}", file=sys.stderr)
    return None


# What `canis demo --check` holds the model and the kinematics to (stated in its output).
CHECK_DRIVE_S = 20.0  # speed is measured after 3 s: the speed tracking settles over the first few
CHECK_SPEED_ERROR = 0.2  # relative; the model card's closed loop is judged the same way
CHECK_MIN_HIPS_M = 0.25
CHECK_KEYFRAME_CM = 1.0  # every joint of the displayed pose, on arriving at a keyframe
CHECK_CCD_RESIDUAL_MM = 1.0


class _Verdicts:
    """Each check prints PASS or FAIL with what it measured against its threshold."""

    def __init__(self):
        self.failed, self.count = [], 0

    def judge(self, passed: bool, text: str) -> None:
        self.count += 1
        if not passed:
            self.failed.append(text)
        print(f"{'PASS' if passed else 'FAIL'} {text}", flush=True)


def _motion_model_path(args) -> Path:
    from canis.runtime.assets import shipped_model_path

    return args.model if args.model else shipped_model_path()


def _drive(model, verdicts: _Verdicts, name: str) -> None:
    import time

    from canis.export.closed_loop import drive

    for speed in (0.5, 1.1, 1.9, 3.3):
        started = time.perf_counter()
        result = drive(model, speed_mps=speed, turn_rate_radps=0.0, seconds=CHECK_DRIVE_S)
        ms = (time.perf_counter() - started) / (CHECK_DRIVE_S * 60) * 1e3
        passed = (
            result["finite"]
            and result["speed_error"] <= CHECK_SPEED_ERROR
            and result["min_hips_height_m"] >= CHECK_MIN_HIPS_M
        )
        verdicts.judge(
            passed,
            f"{name} asked for {speed} m/s for {CHECK_DRIVE_S:.0f} s: moved at "
            f"{result['mean_speed_mps']:.2f} m/s (needs within {CHECK_SPEED_ERROR:.0%}), hips >= "
            f"{result['min_hips_height_m']:.2f} m (needs >= {CHECK_MIN_HIPS_M} m); "
            f"{ms:.2f} ms per frame on {model.device} (not judged)",
        )
    print()


def _transitions(model, verdicts: _Verdicts, name: str) -> None:
    """A trotting dog sent to each keyframe by the shipped RTN: how close it lands."""
    import time

    import numpy as np
    from canis.runtime.controller import Controller
    from canis.runtime.features import ACTIONS
    from canis.runtime.poses import keyframe_shown_m
    from canis.runtime.root import from_root_xz
    from canis.runtime.trajectory import ControlState
    from canis.runtime.transition import TransitionModel, shipped_transition_model_path

    if not shipped_transition_model_path().is_file():
        print("(no shipped transition model: skipping the transitions)\n")
        return
    c = Controller(model, transition_model=TransitionModel())
    trot = ControlState(np.array([[0.0, 1.9]]), np.zeros(1), np.array([ACTIONS.index("move")]))
    for key_name, key in c.keyframes.items():
        c.reset()
        for _ in range(120):
            c.step(trot)
        started = time.perf_counter()
        start = c.transition_to(key_name, 30)
        ms = (time.perf_counter() - started) * 1e3
        for _ in range(start.frames):  # the lead, the 30 frames and the arrival
            c.step(trot)
        wanted = keyframe_shown_m(c.skeleton, key)[None].astype(np.float64)
        wanted[..., [0, 2]] = from_root_xz(wanted[..., [0, 2]], c.root_xz_m, c.root_yaw_rad)
        error_cm = np.linalg.norm(c.display_pose()[0] - wanted, axis=-1).max() * 100
        verdicts.judge(
            bool(error_cm <= CHECK_KEYFRAME_CM),
            f"RTN from {name}'s 1.9 m/s trot to {key_name} in 30 frames: every joint within "
            f"{error_cm:.3f} cm of the keyframe on arrival (needs <= {CHECK_KEYFRAME_CM} cm); "
            f"requested in {ms:.1f} ms (not judged)",
        )
    print()


def _metres(values) -> str:
    return "[" + ", ".join(f"{v:.3f}" for v in values) + "]"


def run_check(model_path: Path) -> int:
    """Drives the model (--model, or the shipped MANN-8) and checks the transitions and the
    kinematics core: PASS or FAIL per check against the thresholds it prints, exit 1 on any
    failure."""
    import numpy as np
    from canis.runtime.inference import MotionModel
    from canis.runtime.kinematics import ccd_solve, forward_kinematics
    from canis.runtime.poses import load_keyframes
    from canis.runtime.skeleton import Skeleton, shipped_dog_skeleton_path
    from canis.runtime.terrain import Heightmap

    verdicts = _Verdicts()
    model = MotionModel(model_path)
    size = f"-{model.experts}" if model.experts else ""
    name = f"{model.kind.upper()}{size} ({model_path.name})"
    _drive(model, verdicts, name)
    _transitions(model, verdicts, name)
    skeleton = Skeleton.from_json(shipped_dog_skeleton_path())
    stand = load_keyframes()["stand"]
    pose = stand.local_rotations[None].astype(np.float32)
    hips = np.array([[0.0, stand.hips_height_m, 0.0]], dtype=np.float32)
    positions, _ = forward_kinematics(skeleton, pose, hips)
    paws = skeleton.group("paws")
    print(
        f"standing keyframe: hips at {stand.hips_height_m:.3f} m, paws at "
        f"{_metres(positions[0, paws, 1])} m"
    )
    # A slope rising 10 cm per metre along z (the dog's forward), sampled under each paw.
    slope = Heightmap(
        np.array([[-0.2, -0.2], [0.2, 0.2]]), cell_size_m=4.0, origin_xz_m=(-2.0, -2.0)
    )
    ground, normals = slope.sample(positions[0, paws][:, [0, 2]])
    print(f"a 10% slope under the paws: heights {_metres(ground)} m, normal {_metres(normals[0])}")
    # Put the front-left paw on that slope with the native CCD.
    paw = skeleton.index("LeftHandSite")
    target = positions[:, paw].copy()
    target[:, 1] = ground[0] + positions[0, paw, 1]
    residual = ccd_solve(
        skeleton, pose, hips, skeleton.group("front_left_leg"), target, max_iterations=64
    )
    verdicts.judge(
        bool(residual[0] * 1000 <= CHECK_CCD_RESIDUAL_MM),
        f"CCD moved the front-left paw {100 * ground[0]:+.1f} cm onto the slope: residual "
        f"{residual[0] * 1000:.3f} mm (needs <= {CHECK_CCD_RESIDUAL_MM} mm)",
    )
    if verdicts.failed:
        print(f"\ncanis demo --check: FAIL, {len(verdicts.failed)} of {verdicts.count} checks")
        return 1
    print(f"\ncanis demo --check: PASS, all {verdicts.count} checks")
    return 0


def _check_view_and_status(args) -> None:
    """--camera-yaw and --status-file, before any window or run: a NaN yaw would render empty
    frames, and a status file in a missing folder would fail after the first frame."""
    from canis.runtime.profiler import check_output_path

    if not math.isfinite(args.camera_yaw):
        raise ValueError(f"--camera-yaw {args.camera_yaw}: must be a finite number of degrees")
    if args.status_file is not None:
        check_output_path(args.status_file, "status file")

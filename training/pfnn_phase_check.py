"""The PFNN phase checks of docs/EVALUATION.md ("A fair PFNN"): the labels over the mocap,
and the phase a PFNN integrates in closed loop against its own footfalls.

    python -m canis.training.pfnn_phase_check [--bvh DIR] [--models PFNN=path.onnx,...]

Labels: per gait (and per action off locomotion), the phase's rate (median, p5, p95, in Hz of
cycles) and its largest step, the count of steps that go backwards once wrapped (the phase
increment target is the wrapped step), and where the right front paw lands within a
left-front stride. Closed loop: each model driven through the runtime (speed tracking on, as
the controllers table runs them) in the controllers table's walk, trot-speed, canter and turn
commands; the root speed reached and turn rate, the integrated phase's rate against the
left-front stride rate of the shown footfalls, and how consistently the phase lands at the
same value at each left-front touchdown (the length of the mean unit vector of the phase at
touchdowns: 1 means always the same phase, 0 unrelated), the turn once more with the phase
driven by a clock instead of the network's own increments; and the speed reached when asked
0.3-1.5 m/s straight ahead, with and without the runtime's speed tracking.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from canis.runtime.features import ACTIONS, FPS
from canis.runtime.readouts import GAITS, NO_GAIT
from canis.runtime.root import wrap_angle_rad

CYCLE_HZ = FPS / (2 * np.pi)  # rad/frame -> cycles per second
SETTLE_S = 3.0
# The controllers table's scenario commands (docs/EVALUATION.md: the mocap's medians), and the
# paper's trot speed.
SCENARIOS = {
    "walk": (0.56, 0.0),
    "trot": (1.9, 0.0),
    "canter": (2.57, 0.0),
    "turn": (0.59, 76.8),
}
TURN_SWITCH_S = 5.0
# The turn again with the phase driven by a clock at about the mocap's walking stride rate.
TURN_CLOCK_HZ = 1.2
SWEEP_SPEEDS_MPS = (0.3, 0.45, 0.56, 0.7, 0.9, 1.1, 1.5)


def touchdowns(contacts: np.ndarray, paw: int) -> np.ndarray:
    return np.flatnonzero(np.diff(contacts[:, paw].astype(int)) == 1) + 1


def phase_consistency(phase_rad: np.ndarray, frames: np.ndarray) -> float:
    """How alike the phase is at those frames: the length of the mean unit phasor (1: the
    same phase every time, near 0: spread around the cycle); NaN without frames."""
    return float(abs(np.mean(np.exp(1j * phase_rad[frames])))) if len(frames) else float("nan")


def label_rows(mocap_dir: Path) -> list[str]:
    from canis.training.evaluate_controllers import load_clips

    steps, gaits, actions, fractions = [], [], [], {g: [] for g in GAITS}
    for clip in load_clips(mocap_dir, progress=False):
        labels = clip.labels
        steps.append(wrap_angle_rad(np.diff(labels.phase_rad)))
        gaits.append(labels.gait_index[:-1])
        actions.append(labels.action_index[:-1])
        left, right = touchdowns(labels.contacts, 0), touchdowns(labels.contacts, 1)
        for a, b in zip(left[:-1], left[1:], strict=True):
            between = right[(right > a) & (right < b)]
            for g, name in enumerate(GAITS):
                if len(between) == 1 and (labels.gait_index[a:b] == g).mean() > 0.8:
                    fractions[name].append((between[0] - a) / (b - a))
    step, gait, action = np.concatenate(steps), np.concatenate(gaits), np.concatenate(actions)
    rows = [
        f"labels: {len(step)} steps, {int((step < 0).sum())} backwards once wrapped, "
        f"largest {step.max():.3f} rad"
    ]
    groups = [(name, gait == g) for g, name in enumerate(GAITS)]
    groups += [
        (f"{name} (no gait)", (action == a) & (gait == NO_GAIT)) for a, name in enumerate(ACTIONS)
    ]
    for name, mask in groups:
        if not mask.any():
            continue
        hz = step[mask] * CYCLE_HZ
        p5, p50, p95 = np.percentile(hz, [5, 50, 95])
        line = (
            f"  {name}: {int(mask.sum())} frames, phase {p50:.2f} Hz (p5 {p5:.2f}, p95 "
            f"{p95:.2f}), largest step {step[mask].max():.3f} rad"
        )
        if name in fractions and fractions[name]:
            f10, f50, f90 = np.percentile(fractions[name], [10, 50, 90])
            line += f"; right front lands at {f50:.2f} of the stride (p10 {f10:.2f}, p90 {f90:.2f})"
        rows.append(line)
    return rows


def closed_loop_figures(model_path: Path, scenario: str, clock_hz: float | None = None) -> dict:
    """One scenario's figures (closed_loop_row's); with clock_hz the network's phase is a clock
    at that rate instead of the integral of its own phase increments (does the phase's
    dynamics cause a failure?)."""
    from canis.runtime.controller import DT_S, Controller
    from canis.runtime.inference import MotionModel
    from canis.runtime.skeleton import Skeleton, shipped_dog_skeleton_path
    from canis.tools.closed_loop import Steering, record
    from canis.training.evaluate_controllers import footfalls

    model = MotionModel(model_path)
    if model.kind != "pfnn":
        raise ValueError(f"{model_path}: is a {model.kind} model, not a PFNN (it has no phase)")
    speed, degps = SCENARIOS[scenario]
    rate = np.radians(degps)
    steering = Steering(speed, lambda t_s: rate if int(t_s // TURN_SWITCH_S) % 2 == 0 else -rate)
    controller = Controller(model, speed_tracking=True)
    phases, planted = [], []
    original_step = controller.step

    def step(control):  # record's loop, keeping the phase and the runtime's contacts each frame
        out = original_step(control)
        if clock_hz is not None:
            clock_rad = 2 * np.pi * clock_hz * (len(phases) + 1) * DT_S
            controller.state.phase_rad[:] = clock_rad % (2 * np.pi)
        phases.append(float(controller.state.phase_rad[0]))
        planted.append(controller.contacts[0].copy())
        return out

    controller.step = step
    seconds = SETTLE_S + 20.0
    run = record(controller, steering, int(round(seconds / DT_S)))
    settled = int(round(SETTLE_S / DT_S))
    phase = np.array(phases)
    contacts = footfalls(Skeleton.from_json(shipped_dog_skeleton_path()), run)
    left = touchdowns(contacts, 0)
    left = left[left >= settled]
    stride_hz = 1.0 / (np.median(np.diff(left)) * DT_S) if len(left) > 2 else float("nan")
    coherence = phase_consistency(phase, left)
    # The same from the contacts the runtime tells (runtime/kinematics.py estimate_contacts: under 5
    # cm and slow), which the foot lock acts on: a paw that slows in its swing is a footfall
    # to the evaluation's rule (half the body's speed) but not to this one.
    planted_left = touchdowns(np.array(planted), 0)
    planted_left = planted_left[planted_left >= settled]
    planted_hz = len(planted_left) / (len(phase) - settled) / DT_S
    planted_coherence = phase_consistency(phase, planted_left)
    # The turn rate over whole seconds: the body also sways with every stride.
    yaw = np.unwrap(run.root_yaw_rad[settled:])[:: int(round(1.0 / DT_S))]
    turn = float(np.degrees(np.abs(np.diff(yaw))).mean())
    phase_hz = float(np.median(wrap_angle_rad(np.diff(phase[settled:]))) * CYCLE_HZ)
    return {
        "speed_mps": float(run.speeds_mps[settled:].mean()),
        "turn_degps": turn,
        "phase_hz": phase_hz,
        "stride_hz": stride_hz,
        "touchdowns": len(left),
        "consistency": coherence,
        "planted_touchdowns_per_s": planted_hz,
        "planted_consistency": planted_coherence,
    }


def closed_loop_row(
    name: str, model_path: Path, scenario: str, clock_hz: float | None = None
) -> str:
    """One scenario's line of closed_loop_figures."""
    f = closed_loop_figures(model_path, scenario, clock_hz)
    speed, degps = SCENARIOS[scenario]
    driven = f", phase driven by a {clock_hz} Hz clock" if clock_hz is not None else ""
    return (
        f"  {name} {scenario} (asked {speed} m/s, {degps} deg/s{driven}): "
        f"{f['speed_mps']:.2f} m/s, turning {f['turn_degps']:.0f} deg/s; phase "
        f"{f['phase_hz']:.2f} Hz, left-front strides {f['stride_hz']:.2f} Hz "
        f"({f['touchdowns']} touchdowns), phase at touchdown consistency "
        f"{f['consistency']:.2f}; by the runtime's contacts "
        f"{f['planted_touchdowns_per_s']:.2f} touchdowns/s, consistency "
        f"{f['planted_consistency']:.2f}"
    )


def speed_sweep_rows(name: str, model_path: Path) -> list[str]:
    """The mean root speed reached (after SETTLE_S, over 10 s) when asked each of
    SWEEP_SPEEDS_MPS straight ahead, with the runtime's speed tracking on and off."""
    from canis.runtime.controller import DT_S, Controller
    from canis.runtime.inference import MotionModel
    from canis.tools.closed_loop import Steering, record

    model = MotionModel(model_path)
    rows = []
    for tracking in (True, False):
        cells = []
        for speed in SWEEP_SPEEDS_MPS:
            controller = Controller(model, speed_tracking=tracking)
            run = record(controller, Steering(speed), int(round((SETTLE_S + 10.0) / DT_S)))
            reached = run.speeds_mps[int(round(SETTLE_S / DT_S)) :].mean()
            cells.append(f"{speed} -> {reached:.2f}")
        rows.append(f"  {name} speed {'tracked' if tracking else 'untracked'}: {', '.join(cells)}")
    return rows


def main(argv=None) -> int:
    from canis.training.data_paths import default_mocap_dir

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bvh", type=Path, default=None, help="mocap folder (default: shared)")
    parser.add_argument("--models", default="", help="NAME=PATH.onnx,... PFNNs to drive")
    parser.add_argument("--no-labels", action="store_true", help="skip the label statistics")
    args = parser.parse_args(argv)
    models = []
    for item in filter(None, args.models.split(",")):
        name, _, path = item.partition("=")
        if not path or not Path(path).is_file():
            parser.error(f"--models: {item!r} is not NAME=PATH to an existing .onnx file")
        models.append((name, Path(path)))
    if not args.no_labels:
        mocap = args.bvh or default_mocap_dir()
        if mocap is None or not Path(mocap).is_dir():
            parser.error(f"--bvh: no mocap folder at {mocap}")
        print("\n".join(label_rows(Path(mocap))), flush=True)
    for name, path in models:
        print(f"closed loop: {name} ({path})")
        for scenario in SCENARIOS:
            try:
                print(closed_loop_row(name, path, scenario), flush=True)
            except ValueError as error:
                parser.error(f"--models: {error}")
        print(closed_loop_row(name, path, "turn", clock_hz=TURN_CLOCK_HZ), flush=True)
        print("\n".join(speed_sweep_rows(name, path)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""How much the "at once" cells of the postures table (docs/EVALUATION.md, `canis evaluate
transitions --handback-only`) depend on the gait's phase at the request: the same run as
postures_report's at-once way (the demo's setup, Controller.transition_to straight from the
gait), asked 0..N-1 frames after its 3 s of gait. One phase is what the table samples; a
cell that moves by tens of cm between neighbouring phases is the network's, not the
schedule's.

    python -m canis.training.posture_phase_sweep [--phases 8] [--ground flat]

prints, for each gait and posture, the largest per-frame joint displacement (cm) of the shown
pose at each phase, with the step relative to the hand-back where it happened (negative:
before it)."""

from __future__ import annotations

import argparse

from canis.training.evaluate_transitions import POSTURE_STARTS, _posture_run


def sweep(ground: str, phases: int) -> list[tuple[str, str, list[tuple[float, int]]]]:
    from canis.runtime.assets import shipped_model_path
    from canis.runtime.control import load_speed_calibration
    from canis.runtime.inference import MotionModel
    from canis.runtime.poses import KEYFRAME_ACTIONS
    from canis.runtime.terrain import load_terrain
    from canis.runtime.transition import TransitionModel

    path = shipped_model_path()
    terrain = None if ground == "flat" else load_terrain(ground)
    setup = (
        MotionModel(path, device="cpu"),
        terrain,
        TransitionModel(None),
        load_speed_calibration(path),
    )
    rows = []
    for start, speed in POSTURE_STARTS.items():
        if not speed:
            continue  # from standing the phase does not matter
        for target in KEYFRAME_ACTIONS:
            runs = [_posture_run(setup, speed, target, "at_once", p) for p in range(phases)]
            worst = [(r["at_once_cm_per_frame"], r["at_once_after_frame"]) for r in runs]
            rows.append((start, target, worst))
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--phases", type=int, default=8, help="frames of delay tried (0..N-1)")
    parser.add_argument("--ground", default="flat", help="flat or a terrain name (hills)")
    args = parser.parse_args(argv)
    if args.phases < 1:
        parser.error(f"--phases must be at least 1, got {args.phases}")
    for start, target, worst in sweep(args.ground, args.phases):
        cells = " ".join(f"{cm:.2f}@{at:+d}" for cm, at in worst)
        largest = max(cm for cm, _ in worst)
        print(f"{args.ground} {start} -> {target}: worst {largest:.2f} cm; by phase {cells}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

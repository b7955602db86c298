"""What each speed gives the foot lock: `python -m canis.training.contact_ablation
[MODEL.onnx] [--mocap DIR]` drives the model in the controllers evaluation's walk, canter and
turn (training/evaluate_controllers.py, with the runtime's foot lock) with the runtime's
contacts told from the predicted velocity alone, from the shown paws' motion alone, and from
either (runtime.ik.estimate_contacts, what ships), and prints each one's skating (all legs and
back legs, cm/frame) and share of paws planted. A measurement for docs/EVALUATION.md (the
twenty-sixth session); it needs the mocap.

The alternatives replace estimate_contacts in the numpy definition of the frame
(Controller(native_frame=False)); the native core holds only what ships, so "either" is run
through both, which must agree.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from canis.runtime import display
from canis.runtime.assets import shipped_model_path
from canis.runtime.ik import CONTACT_HEIGHT_M, CONTACT_SPEED_MPS, estimate_contacts
from canis.runtime.inference import MotionModel
from canis.runtime.root import norm_xz
from canis.runtime.skeleton import Skeleton, shipped_dog_skeleton_path
from canis.training import evaluate_controllers as ec
from canis.training.data_paths import default_mocap_dir


def _by_predicted_velocity(heights_m, shown_speeds_mps, velocities_mps):
    predicted = norm_xz(velocities_mps[..., ::2])
    return (heights_m < CONTACT_HEIGHT_M) & (predicted < CONTACT_SPEED_MPS)


def _by_shown_motion(heights_m, shown_speeds_mps, velocities_mps):
    return (heights_m < CONTACT_HEIGHT_M) & (shown_speeds_mps < CONTACT_SPEED_MPS)


RULES = {
    "predicted velocity": (_by_predicted_velocity, False),
    "shown motion": (_by_shown_motion, False),
    "either (numpy)": (estimate_contacts, False),
    "either (native, shipped)": (estimate_contacts, True),
}


def measure(model, skeleton, commands, rule, native: bool) -> dict:
    """The evaluation's foot-lock scenarios with `rule` as the runtime's contacts."""
    controller_class = ec.Controller
    planted = []

    def controller(*args, **kwargs):
        made = controller_class(*args, native_frame=native, **kwargs)
        step = made.step

        def counted_step(control):
            out = step(control)
            planted.append(made.contacts[0].copy())
            return out

        made.step = counted_step
        return made

    display.estimate_contacts, ec.Controller = rule, controller
    try:
        quality = ec.scenario_quality(model, skeleton, commands, foot_lock=True)
    finally:
        display.estimate_contacts, ec.Controller = estimate_contacts, controller_class
    return quality | {"planted_share": np.mean(planted, axis=0)}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", nargs="?", type=Path, default=shipped_model_path("MANN-8 fp32"))
    parser.add_argument("--mocap", type=Path, default=default_mocap_dir())
    args = parser.parse_args(argv)
    if args.mocap is None:
        parser.error("no mocap found: give --mocap DIR (or set CANIS_MOCAP_DIR)")
    skeleton = Skeleton.from_json(shipped_dog_skeleton_path())
    commands = ec.ground_truth(list(ec.load_clips(args.mocap)))["commands"]
    model = MotionModel(args.model)
    for name, (rule, native) in RULES.items():
        quality = measure(model, skeleton, commands, rule, native)
        all_legs, back_legs = quality["skating_cm"], quality["skating_back_cm"]
        figures = " / ".join(f"{all_legs[s]:.3f} ({back_legs[s]:.3f})" for s in ec.SCENARIOS)
        share = " / ".join(f"{p:.0%}" for p in quality["planted_share"])
        print(
            f"{name}: skating walk / canter / turn, all legs (back) {figures}; paws planted "
            f"(front left, front right, back left, back right) {share} of the three "
            "scenarios' frames"
        )


if __name__ == "__main__":
    main()

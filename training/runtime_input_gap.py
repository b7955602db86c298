"""What the runtime's own input costs a network, the pose aside: dogs placed in the mocap's
state at held-out frames (training/runtime_rollout.py), their first x built by the runtime
against the mocap's own x for the same frame, and the mocap's x with one field of the
future samples (or the current velocity) taken from the runtime's. The network's one-step
loss (standardised MSE against the mocap's y) on each says which part of the trajectory block
the network reads differently in the game than in training. With the clip's path given, and
without it (as from a stick).

    python -m canis.training.runtime_input_gap [--model PATH] [--starts N]
"""

from __future__ import annotations

import argparse

import numpy as np
from canis.runtime.features import CURRENT_SAMPLE, INPUT

FIELDS = ("position", "direction", "velocity", "speed", "action")


def input_gap(
    model_path, dataset_path, starts: int, seed: int = 0, held_out: bool = True
) -> dict[str, dict]:
    """{"path" / "stick": {"mocap x", "runtime x", "future <field>", "current velocity": loss}}
    over `starts` frames of the held-out clips (or, `held_out` False, the training clips)."""
    from canis.runtime.inference import MotionModel
    from canis.training.closed_loop_training import successors
    from canis.training.dataset import load
    from canis.training.runtime_rollout import MocapRun, roll_out, rollout_starts

    data = load(dataset_path)
    rows = data["validation"] if held_out else ~data["validation"]
    x_raw, y_raw = data["X"][rows], data["Y"][rows]
    after = successors(data["clip"][rows], data["frame"][rows])
    action = data["action"][rows].astype(np.int64)
    candidates = rollout_starts(after, 1)
    if not len(candidates):
        raise ValueError(
            f"{dataset_path}: no {'held-out' if held_out else 'training'} clip is long enough "
            "for a dog's history and the path ahead (runtime_rollout.chain_length)"
        )
    picked = np.random.default_rng(seed).choice(candidates, min(starts, len(candidates)), False)
    model = MotionModel(model_path, threads=1)
    y, y_std = y_raw[picked], data["y_std"]

    def loss(x):
        out = model.run(np.ascontiguousarray(x, np.float32))["y"]
        return float((((out - y) / y_std) ** 2).mean())

    results = {}
    for name, path in (("path", True), ("stick", False)):
        run = MocapRun.of(y_raw, after, picked, 1)
        given = np.full(len(picked), path)
        runtime_x = roll_out(model, run, x_raw, action, 1, given)[0][:, 0]
        mocap_x = x_raw[picked]

        def mixed(field, samples, mocap_x=mocap_x, runtime_x=runtime_x):
            """The mocap's x with one field of `samples` taken from the runtime's."""
            x = mocap_x.copy()
            ours = INPUT.field(runtime_x, "trajectory", field)
            INPUT.field(x, "trajectory", field)[:, samples] = ours[:, samples]
            return x

        future = slice(CURRENT_SAMPLE + 1, None)
        results[name] = {"mocap x": loss(mocap_x), "runtime x": loss(runtime_x)}
        results[name] |= {f"future {field}": loss(mixed(field, future)) for field in FIELDS}
        results[name]["current velocity"] = loss(mixed("velocity", CURRENT_SAMPLE))
    return results


def main(argv=None) -> None:
    from canis.runtime.assets import shipped_model_path

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--model", default=None, help="motion model (default: the shipped MANN-8, fp32)"
    )
    parser.add_argument("--dataset", default="data/dog_dataset.npz")
    parser.add_argument("--starts", type=int, default=1024, help="held-out frames")
    args = parser.parse_args(argv)
    model = args.model or shipped_model_path("MANN-8 fp32")
    for name, figures in input_gap(model, args.dataset, args.starts).items():
        print(f"{name}: " + ", ".join(f"{k} {v:.4f}" for k, v in figures.items()))


if __name__ == "__main__":
    main()

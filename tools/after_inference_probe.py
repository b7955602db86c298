"""Why the work after inference costs more inside a frame than alone: the network's weights
(5.7 MB for the int8 MANN-8) stream through the caches every frame and evict what the Python
after it works on. This times the decode stage's calls (the non-finite check, y's copy, the
root update) inside whole frames, with the model's inference replaced in turn by:

- the model itself;
- a stand-in that streams as many bytes as the model's weights (one numpy sum a pass) for as
  long as the inference took;
- a stand-in that spins as long on a small array that stays in the cache.

If the decode's calls are slower after the model and after the streaming stand-in than after
the cache-resident one, the cost is the caches', not the calls': work after inference is
cheaper the less memory it touches (one native call rather than many numpy calls).

`python -m canis.tools.after_inference_probe [--frames N]`"""

from __future__ import annotations

import argparse
import time

import numpy as np
from canis.runtime import controller as controller_module
from canis.runtime import pose
from canis.runtime.assets import shipped_model_path
from canis.runtime.inference import MotionModel
from canis.tools.benchmark import trotting_control, weight_bytes_per_frame


def _timed(owner, name: str, samples: list):
    """Replaces owner.name by a timed wrapper; returns the original, to put back."""
    call = getattr(owner, name)

    def timed(*args, **kwargs):
        start = time.perf_counter_ns()
        result = call(*args, **kwargs)
        samples.append(time.perf_counter_ns() - start)
        return result

    setattr(owner, name, timed)
    return call


def probe(model_path=None, frames: int = 2000) -> dict:
    from canis.runtime.controller import Controller
    from canis.runtime.terrain import procedural

    model_path = model_path or shipped_model_path()
    model = MotionModel(model_path, device="cpu", threads=1)
    weights = np.ones(weight_bytes_per_frame(model_path) // 8)
    small = np.ones(2048)  # 16 KB: stays in the L1 and L2 caches
    results = {}
    for kind in ("model", "streaming stand-in", "cache-resident stand-in"):
        controller = Controller(model, count=1, terrain=procedural("hills"))
        control = trotting_control(1)
        for _ in range(60):
            controller.step(control)
        outputs, inference_ns = model.run_bound(controller._buffers), []
        if kind != "model":
            array = weights if kind.startswith("streaming") else small
            budget_ns = int(np.median(results["model"]["inference_ns"]))

            def stand_in(buffers, array=array, budget_ns=budget_ns, outputs=outputs):
                start = time.perf_counter_ns()
                while time.perf_counter_ns() - start < budget_ns:
                    array.sum()
                return outputs

            controller.model = type("StandIn", (), {"run_bound": staticmethod(stand_in)})()
        samples = {"inference_ns": inference_ns, "non_finite_rows": [], "advance_root": []}
        inference = _timed(controller.model, "run_bound", inference_ns)
        # Where the step looks them up: pose.decode calls pose's non_finite_rows, the
        # controller its own advance_root.
        checks = _timed(pose, "non_finite_rows", samples["non_finite_rows"])
        update = _timed(controller_module, "advance_root", samples["advance_root"])
        try:
            for _ in range(frames):
                controller.step(control)
                controller.profiler.end_frame()
        finally:  # the functions back as they were
            pose.non_finite_rows, controller_module.advance_root = checks, update
            controller.model.run_bound = inference
        results[kind] = samples
    return results


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=2000)
    args = parser.parse_args(argv)
    from canis.runtime.machine import benchmark_machine, machine_paragraph

    print(machine_paragraph(benchmark_machine()))
    results = probe(frames=args.frames)
    print(
        "| inference replaced by | inference p50 us | non_finite_rows p50 us | "
        "advance_root p50 us |"
    )
    print("|---|---|---|---|")
    for kind, samples in results.items():
        median = {name: np.median(values[100:]) / 1e3 for name, values in samples.items()}
        print(
            f"| {kind} | {median['inference_ns']:.0f} | {median['non_finite_rows']:.1f} | "
            f"{median['advance_root']:.1f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

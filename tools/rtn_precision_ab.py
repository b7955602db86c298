"""One RTN step of two exported RTNs (e.g. fp32 and int8), interleaved in one process, timed
in thread CPU time so that other processes on a shared machine inflate the figures less than
wall time would. Each step is timed twice: back to back, and right after a step of the
shipped motion network, which is what a frame does between two RTN steps.

    .venv/bin/python -m canis.tools.rtn_precision_ab A_step.onnx B_step.onnx [repeats]
"""

from __future__ import annotations

import sys
import time

import numpy as np
import onnxruntime as ort
from canis.runtime.assets import shipped_model_path
from canis.runtime.transition import TransitionModel
from canis.runtime.transition_frames import FRAME_SIZE, PLACEMENT_SIZE

WARMUP = 20


def main(paths: list[str], repeats: int = 400) -> None:
    models = {path: TransitionModel(path) for path in paths}
    rng = np.random.default_rng(0)
    frame = (0.1 * rng.standard_normal((1, FRAME_SIZE))).astype(np.float32)
    place = (0.1 * rng.standard_normal((1, PLACEMENT_SIZE))).astype(np.float32)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    motion = ort.InferenceSession(
        str(shipped_model_path()), options, providers=["CPUExecutionProvider"]
    )
    feeds = {
        i.name: np.zeros([d if isinstance(d, int) else 1 for d in i.shape], np.float32)
        for i in motion.get_inputs()
    }
    times = {p: {"back to back": [], "after a motion step": []} for p in models}
    for _ in range(repeats):
        for path, model in models.items():
            h, c = model.init(frame)
            started = time.thread_time()
            model.step(frame, place, frame, np.array([20]), h, c)
            times[path]["back to back"].append(time.thread_time() - started)
            motion.run(None, feeds)
            started = time.thread_time()
            model.step(frame, place, frame, np.array([20]), h, c)
            times[path]["after a motion step"].append(time.thread_time() - started)
    for path, cases in times.items():
        for case, values in cases.items():
            ms = 1e3 * np.array(values[WARMUP:])
            print(f"{path} {case}: p50 {np.median(ms):.3f} ms, p99 {np.percentile(ms, 99):.3f} ms")


if __name__ == "__main__":
    main(sys.argv[1:3], *(int(a) for a in sys.argv[3:4]))

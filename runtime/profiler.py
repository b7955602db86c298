"""Per-stage frame timing: rolling p50/p99, frame-budget overruns, Chrome trace export.

Stages are named after the pipeline (input, trajectory, features, inference, decode, ik,
render). `with profiler.stage("inference"): ...` times one stage; `end_frame()` closes the
frame. The trace is the Chrome trace-event JSON that Perfetto and chrome://tracing open.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict, deque
from contextlib import contextmanager
from pathlib import Path

import numpy as np

STAGES = ("input", "trajectory", "features", "inference", "decode", "ik", "render")
FRAME_BUDGET_MS = 2.0
WINDOW_FRAMES = 600  # ten seconds at 60 Hz


class Profiler:
    def __init__(
        self,
        budget_ms: float = FRAME_BUDGET_MS,
        window: int = WINDOW_FRAMES,
        keep_trace: bool = False,
    ):
        self.budget_ms = budget_ms
        self.window = window
        self.recent: dict[str, deque] = defaultdict(lambda: deque(maxlen=window))
        self.totals: dict[str, list] = defaultdict(list)
        self.frame_ms: deque = deque(maxlen=window)
        self.all_frame_ms: list[float] = []
        self.overruns = 0
        self.frames = 0
        self.keep_trace = keep_trace
        self.events: list[dict] = []
        self._current: dict[str, float] = {}
        self._frame_start = time.perf_counter()
        self._origin = self._frame_start

    @contextmanager
    def stage(self, name: str):
        start = time.perf_counter()
        try:
            yield
        finally:
            end = time.perf_counter()
            self._current[name] = self._current.get(name, 0.0) + (end - start) * 1e3
            if self.keep_trace:
                self.events.append(
                    {
                        "name": name,
                        "ph": "X",
                        "pid": 1,
                        "tid": 1,
                        "ts": (start - self._origin) * 1e6,
                        "dur": (end - start) * 1e6,
                    }
                )

    def end_frame(self) -> float:
        """Closes the frame; returns the frame's time in ms (sum of its stages)."""
        frame_ms = sum(self._current.values())
        for name, ms in self._current.items():
            self.recent[name].append(ms)
            self.totals[name].append(ms)
        self.frame_ms.append(frame_ms)
        self.all_frame_ms.append(frame_ms)
        self.overruns += frame_ms > self.budget_ms
        self.frames += 1
        self._current = {}
        return frame_ms

    def rolling(self) -> dict[str, dict[str, float]]:
        """p50/p99 per stage and for the whole frame over the last `window` frames."""
        stats = {name: _percentiles(values) for name, values in _in_order(self.recent)}
        stats["frame"] = _percentiles(self.frame_ms)
        return stats

    def summary(self) -> dict:
        stats = {name: _percentiles(values) for name, values in _in_order(self.totals)}
        stats["frame"] = _percentiles(self.all_frame_ms)
        return {
            "frames": self.frames,
            "budget_ms": self.budget_ms,
            "overruns": self.overruns,
            "stages": stats,
        }

    def write_trace(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps({"traceEvents": self.events, "displayTimeUnit": "ms"}))


def _in_order(per_stage: dict) -> list:
    """Stages in pipeline order, then any others a caller timed."""
    known = [(n, per_stage[n]) for n in STAGES if n in per_stage]
    return known + [(n, v) for n, v in per_stage.items() if n not in STAGES]


def _percentiles(values) -> dict[str, float]:
    if not len(values):
        return {"p50_ms": float("nan"), "p99_ms": float("nan"), "mean_ms": float("nan")}
    array = np.asarray(values)
    return {
        "p50_ms": float(np.median(array)),
        "p99_ms": float(np.percentile(array, 99)),
        "mean_ms": float(array.mean()),
    }

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

# "transition" appears only in frames where the transition network generates or plays.
STAGES = ("input", "trajectory", "features", "inference", "decode", "transition", "ik", "render")
FRAME_BUDGET_MS = 2.0
WINDOW_FRAMES = 600  # ten seconds at 60 Hz


class Histogram:
    """Percentiles of a long stream in constant memory: counts in fixed-width bins (a game
    runs for hours; keeping every sample would grow without bound). Values past `maximum`
    land in the last bin."""

    def __init__(self, bin_width: float = 0.01, maximum: float = 200.0):
        self.bin_width = bin_width
        self.counts = np.zeros(int(maximum / bin_width) + 1, dtype=np.int64)
        self.total = 0.0

    def add(self, value: float) -> None:
        index = min(max(int(value / self.bin_width), 0), len(self.counts) - 1)
        self.counts[index] += 1
        self.total += value

    def add_many(self, values: np.ndarray) -> None:
        indices = np.clip(
            (np.asarray(values) / self.bin_width).astype(np.int64), 0, len(self.counts) - 1
        )
        np.add.at(self.counts, indices, 1)
        self.total += float(np.sum(values))

    def __len__(self) -> int:
        return int(self.counts.sum())

    def percentiles(self) -> dict[str, float]:
        n = len(self)
        if not n:
            return {
                "p50": float("nan"),
                "p95": float("nan"),
                "p99": float("nan"),
                "mean": float("nan"),
            }
        cumulative = np.cumsum(self.counts)

        def at(q):  # the upper edge of the bin holding the q-quantile
            return float((np.searchsorted(cumulative, q * n) + 1) * self.bin_width)

        return {"p50": at(0.5), "p95": at(0.95), "p99": at(0.99), "mean": self.total / n}


def _in_ms(stats: dict[str, float]) -> dict[str, float]:
    return {"p50_ms": stats["p50"], "p99_ms": stats["p99"], "mean_ms": stats["mean"]}


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
        self.totals: dict[str, Histogram] = defaultdict(Histogram)
        self.frame_ms: deque = deque(maxlen=window)
        self.all_frames = Histogram()
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
            self.totals[name].add(ms)
        self.frame_ms.append(frame_ms)
        self.all_frames.add(frame_ms)
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
        """Whole-run p50/p99 (to 0.01 ms) per stage and frame, and budget overruns."""
        stats = {name: _in_ms(h.percentiles()) for name, h in _in_order(self.totals)}
        stats["frame"] = _in_ms(self.all_frames.percentiles())
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

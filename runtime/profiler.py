"""Frame timing: frames as wall time with their thread CPU time, stages inside them, rolling
and whole-run statistics, the worst frames, and a Chrome trace (the trace-event JSON that
Perfetto and chrome://tracing open).

    profiler.begin_frame()                 # optional: else the frame opens at its first stage
    with profiler.stage("inference"): ...  # input, trajectory, ... render: timed inside it
    profiler.end_frame()                   # the frame's wall time, from begin to here

A frame's duration is its wall time; the part no stage timed is `other`. Its CPU time is the
thread's (time.thread_time_ns): wall well above CPU means the thread was descheduled or
waiting, not computing. Stages sum within a frame (two steps in one displayed frame add
their inference times). Per-frame records live in a ring of `max_frames`; the `worst_frames`
slowest frames are kept whole besides, so the frame that stalled is still there after the
ring has wrapped. With keep_trace=True each record also keeps its slices, counters and
instant markers for write_trace; memory and the trace's size are bounded by the ring.
"""

from __future__ import annotations

import heapq
import json
import math
import threading
import time
from collections import defaultdict, deque
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from canis.runtime.profiler_trace import check_output_path, chrome_trace, write_frames_csv

# "transition" appears only in frames where the transition network generates or plays.
STAGES = ("input", "trajectory", "features", "inference", "decode", "transition", "ik", "render")
FRAME_BUDGET_MS = 2.0
WINDOW_FRAMES = 600  # ten seconds at 60 Hz
# Frames kept per frame (ring) for the trace, CSV and comparisons: one minute at 60 Hz, which
# keeps a trace of one dog near 10 MB however long the run (docs/EMBEDDING.md).
MAX_FRAMES = 3600
WORST_FRAMES = 10


class Histogram:
    """Percentiles of a long stream in constant memory: counts in fixed-width bins (a game
    runs for hours; keeping every sample would grow without bound). Values past `maximum`
    land in the last bin; the exact maximum is kept beside."""

    # Values wait in a list and are binned together, one vectorised call per this many:
    # binning each value alone was a fifth of what the profiler costs a frame (a frame of 7
    # stages: 12.5 -> 9.5 us of thread CPU time); binning 256 takes ~20 us, between frames.
    PENDING = 256

    def __init__(self, bin_width: float = 0.01, maximum: float = 200.0):
        self.bin_width = bin_width
        self._counts = np.zeros(int(maximum / bin_width) + 1, dtype=np.int64)
        self._pending: list[float] = []
        self.total = 0.0
        self.max = float("nan")

    @property
    def counts(self) -> np.ndarray:
        """Values per bin (the pending ones binned first)."""
        self._flush()
        return self._counts

    def _flush(self) -> None:
        if self._pending:
            values, self._pending = np.array(self._pending, dtype=np.float64), []
            self._bin(values)

    def _bin(self, values: np.ndarray) -> None:
        indices = np.clip((values / self.bin_width).astype(np.int64), 0, len(self._counts) - 1)
        np.add.at(self._counts, indices, 1)

    def add(self, value: float) -> None:
        if not -math.inf < value < math.inf:  # refused, as binning it at once refused it
            raise ValueError(f"Histogram.add: the value must be finite, got {value}")
        self._pending.append(value)
        if len(self._pending) >= self.PENDING:
            self._flush()
        self.total += value
        if not value <= self.max:  # also replaces the initial NaN
            self.max = value

    def add_many(self, values: np.ndarray) -> None:
        values = np.asarray(values)
        if not values.size:
            return
        self._bin(values)
        self.total += float(np.sum(values))
        self.max = float(np.nanmax([self.max, values.max()]))

    def __len__(self) -> int:
        return int(self.counts.sum())

    def percentiles(self) -> dict[str, float]:
        n = len(self)
        if not n:
            nan = float("nan")
            return {"p50": nan, "p95": nan, "p99": nan, "mean": nan, "max": nan}
        cumulative = np.cumsum(self.counts)

        def at(q):  # the upper edge of the bin holding the q-quantile
            return float((np.searchsorted(cumulative, q * n) + 1) * self.bin_width)

        return {
            "p50": at(0.5),
            "p95": at(0.95),
            "p99": at(0.99),
            "mean": self.total / n,
            "max": self.max,
        }


@dataclass
class FrameRecord:
    """One closed frame: wall and CPU time, the stages' summed times (ms), the untimed rest,
    how many controller steps it ran, and (with keep_trace) its trace events as tuples
    (phase, name, start_ns, duration_ns, args)."""

    number: int
    start_ns: int
    wall_ms: float
    cpu_ms: float
    stages: dict[str, float]
    other_ms: float
    steps: int
    context: dict
    events: list | None = None

    def row(self) -> dict:
        return {
            "frame": self.number,
            "wall_ms": self.wall_ms,
            "cpu_ms": self.cpu_ms,
            "other_ms": self.other_ms,
            "steps": self.steps,
            "stages": dict(self.stages),
        }


class _StageTimer:
    """The context manager stage() returns: a plain class, as it runs ~8 times a frame
    and a generator-based contextmanager costs several times more per use."""

    __slots__ = ("profiler", "name", "frame", "start")

    def __init__(self, profiler: Profiler, name: str):
        self.profiler, self.name = profiler, name

    def __enter__(self) -> None:
        self.start = time.perf_counter_ns()
        self.frame = self.profiler._open or self.profiler._begin(self.start)

    def __exit__(self, *exc) -> None:
        end = time.perf_counter_ns()
        frame, name = self.frame, self.name
        frame.stages[name] = frame.stages.get(name, 0.0) + (end - self.start) / 1e6
        if frame.events is not None:
            frame.events.append(("X", name, self.start, end - self.start, None))


@dataclass
class _OpenFrame:
    start_ns: int
    cpu_start_ns: int
    stages: dict[str, float] = field(default_factory=dict)
    steps: int = 0
    events: list | None = None


def _in_ms(stats: dict[str, float]) -> dict[str, float]:
    return {
        "p50_ms": stats["p50"],
        "p99_ms": stats["p99"],
        "mean_ms": stats["mean"],
        "max_ms": stats["max"],
    }


class Profiler:
    def __init__(
        self,
        budget_ms: float = FRAME_BUDGET_MS,
        window: int = WINDOW_FRAMES,
        keep_trace: bool = False,
        max_frames: int = MAX_FRAMES,
        worst_frames: int = WORST_FRAMES,
    ):
        """`keep_trace`: keep each frame's slices, counters and markers for write_trace (a
        few microseconds a frame); without it write_trace refuses. `max_frames`: frames kept
        per frame (the ring behind the trace, CSV and samples); `worst_frames`: the slowest
        frames kept besides, whole."""
        if max_frames < 1 or worst_frames < 0 or window < 1:
            raise ValueError("Profiler: max_frames and window must be at least 1, worst_frames 0")
        self.budget_ms = budget_ms
        self.window = window
        self.keep_trace = keep_trace
        self.max_frames = max_frames
        self.worst_count = worst_frames
        self.recent: dict[str, deque] = defaultdict(lambda: deque(maxlen=window))
        self.totals: dict[str, Histogram] = defaultdict(Histogram)
        self.frame_ms: deque = deque(maxlen=window)  # wall time of the recent frames
        self.all_frames = Histogram()
        self.cpu = Histogram()
        self.other = Histogram()
        self.overruns = 0
        self.frames = 0
        self.ring: deque[FrameRecord] = deque(maxlen=max_frames)
        self._worst: list[tuple[float, int, FrameRecord]] = []  # min-heap of the slowest
        self.context: dict = {}  # args every frame slice carries (dogs, model, precision)
        self._open: _OpenFrame | None = None
        self._pending: list = []  # markers and counters recorded between frames
        self._origin_ns = time.perf_counter_ns()
        self._last_end_ns: int | None = None
        self._first_start_ns: int | None = None
        self.between_frames_ns = 0  # time from one frame's end to the next one's start
        self.process_name = "canis"
        self.thread_name = threading.current_thread().name
        self.used: dict = {}  # the model's device, provider, threads (use_model)
        self.machine: dict | None = None  # None: described when a trace is written

    # --- recording --------------------------------------------------------------------
    def describe(self, **context) -> None:
        """Context every following frame slice carries in its args (dogs=N, model=...,
        precision=...); None removes a key."""
        for key, value in context.items():
            if value is None:
                self.context.pop(key, None)
            else:
                self.context[key] = value

    def use_model(self, used: dict, dogs: int) -> None:
        """Called by the Controller: frames carry the model's file, its precision and the
        dog count; the trace's machine description gets its device, provider and threads
        (`used` is canis.runtime.machine.model_used(model))."""
        self.describe(dogs=dogs, model=used.get("model"), precision=used.get("precision"))
        self.used = dict(used)

    def begin_frame(self) -> None:
        """Opens a frame now (closing one still open). Without it a frame opens at its first
        stage, and time before that stage (reading input, a script) is between frames."""
        if self._open is not None:
            self.end_frame()
        self._begin(time.perf_counter_ns())

    def _begin(self, start_ns: int) -> _OpenFrame:
        self._open = _OpenFrame(
            start_ns, time.thread_time_ns(), events=[] if self.keep_trace else None
        )
        if self._pending and self.keep_trace:
            self._open.events.extend(self._pending)
        self._pending = []
        if self._first_start_ns is None:
            self._first_start_ns = start_ns
        elif self._last_end_ns is not None:
            self.between_frames_ns += max(start_ns - self._last_end_ns, 0)
        return self._open

    def stage(self, name: str) -> _StageTimer:
        """`with profiler.stage("inference"): ...` times the block as that stage of the open
        frame (opening one if none is)."""
        return _StageTimer(self, name)

    def instant(self, name: str, /, **args) -> None:
        """A marker in the trace at this moment (a script event, a transition's start, a
        terrain change), with `args`. Free without keep_trace."""
        if self.keep_trace:
            self._events().append(("i", name, time.perf_counter_ns(), None, args or None))

    def counter(self, name: str, /, **values: float) -> None:
        """A counter track's values from this moment on (e.g. counter("speed_mps", dog0=1.2)).
        Free without keep_trace."""
        if self.keep_trace:
            self._events().append(("C", name, time.perf_counter_ns(), None, values))

    def _events(self) -> list:
        return self._open.events if self._open is not None else self._pending

    def end_step(self, dogs: int, velocity_xz_mps=None, expert_weights=None) -> None:
        """Called by the Controller after each step: counts the step in the open frame and,
        with keep_trace, samples the counter tracks: dogs, their speed, dog 0's expert
        weights."""
        if self._open is not None:
            self._open.steps += 1
        if self.context.get("dogs") != dogs:
            self.describe(dogs=dogs)
        if not self.keep_trace:
            return
        # Copies now, turned into counter values only when a trace is written.
        now = time.perf_counter_ns()
        events = self._events()
        if velocity_xz_mps is not None:
            events.append(("C", "speed_mps", now, None, np.array(velocity_xz_mps)))
        if expert_weights is not None:
            events.append(("C", "expert_weights_dog0", now, None, np.array(expert_weights[0])))

    def end_frame(self) -> float:
        """Closes the frame; returns its wall time in ms (from begin_frame, or its first
        stage, to now). A frame with nothing in it closes as an empty frame."""
        end_ns = time.perf_counter_ns()
        cpu_end_ns = time.thread_time_ns()
        frame = self._open or self._begin(end_ns)
        self._open = None
        self._last_end_ns = end_ns
        wall_ms = (end_ns - frame.start_ns) / 1e6
        cpu_ms = max(cpu_end_ns - frame.cpu_start_ns, 0) / 1e6
        other_ms = max(wall_ms - sum(frame.stages.values()), 0.0)
        for name, ms in frame.stages.items():
            self.recent[name].append(ms)
            self.totals[name].add(ms)
        self.frame_ms.append(wall_ms)
        self.recent["frame_cpu"].append(cpu_ms)
        self.recent["other"].append(other_ms)
        self.all_frames.add(wall_ms)
        self.cpu.add(cpu_ms)
        self.other.add(other_ms)
        self.overruns += wall_ms > self.budget_ms
        record = FrameRecord(
            self.frames,
            frame.start_ns,
            wall_ms,
            cpu_ms,
            frame.stages,
            other_ms,
            frame.steps,
            dict(self.context),
            frame.events,
        )
        self.frames += 1
        self.ring.append(record)
        if self.worst_count:
            entry = (wall_ms, record.number, record)
            if len(self._worst) < self.worst_count:
                heapq.heappush(self._worst, entry)
            elif wall_ms > self._worst[0][0]:
                heapq.heapreplace(self._worst, entry)
        return wall_ms

    # --- reading ----------------------------------------------------------------------
    def rolling(self) -> dict[str, dict[str, float]]:
        """p50/p99 per stage, for the frame's wall time ("frame"), its thread CPU time
        ("frame_cpu") and its untimed rest ("other"), over the last `window` frames."""
        stats = {name: percentiles_ms(values) for name, values in _in_order(self.recent)}
        stats["frame"] = percentiles_ms(self.frame_ms)
        return stats

    def worst(self) -> list[FrameRecord]:
        """The slowest frames seen (by wall time), slowest first."""
        return [entry[2] for entry in sorted(self._worst, key=lambda e: (-e[0], e[1]))]

    def summary(self) -> dict:
        """Whole-run p50/p99/mean (to 0.01 ms) and exact max per stage, for the frame's wall
        time, its CPU time and its untimed rest; budget overruns; the worst frames whole;
        the share of the span spent between frames."""
        stats = {name: _in_ms(h.percentiles()) for name, h in _in_order(self.totals)}
        stats["frame"] = _in_ms(self.all_frames.percentiles())
        span_ns = (self._last_end_ns or 0) - (self._first_start_ns or 0)
        return {
            "frames": self.frames,
            "budget_ms": self.budget_ms,
            "overruns": self.overruns,
            "stages": stats,
            "frame_cpu": _in_ms(self.cpu.percentiles()),
            "other": _in_ms(self.other.percentiles()),
            "between_frames_share": self.between_frames_ns / span_ns if span_ns > 0 else 0.0,
            "worst_frames": [r.row() for r in self.worst()],
        }

    def records(self) -> list[FrameRecord]:
        """The frames kept: the ring and the worst frames, in order."""
        kept = {r.number: r for r in self.ring}
        kept.update({r.number: r for r in self.worst()})
        return [kept[n] for n in sorted(kept)]

    def samples(self) -> dict[str, list[float]]:
        """Per-frame times (ms, rounded to 0.1 us) of the frames in the ring, by stage (only
        frames where it ran), "frame" (wall), "frame_cpu" and "other": the samples
        `canis compare` bootstraps."""
        columns: dict[str, list[float]] = {"frame": [], "frame_cpu": [], "other": []}
        for r in self.ring:
            columns["frame"].append(round(r.wall_ms, 4))
            columns["frame_cpu"].append(round(r.cpu_ms, 4))
            columns["other"].append(round(r.other_ms, 4))
            for name, ms in r.stages.items():
                columns.setdefault(name, []).append(round(ms, 4))
        return dict(_in_order(columns))

    def recent_frames(self, count: int) -> dict[str, np.ndarray]:
        """The last `count` frames, aligned: per stage (pipeline order) an array with 0 where
        the stage did not run, "other" (untimed) and "frame" (wall), oldest first (for
        plots)."""
        records = list(self.ring)[-count:]
        names = [n for n, _ in _in_order({n: 0 for r in records for n in r.stages})]
        table = {n: np.array([r.stages.get(n, 0.0) for r in records]) for n in names}
        table["other"] = np.array([r.other_ms for r in records])
        table["frame"] = np.array([r.wall_ms for r in records])
        return table

    def write_csv(self, path: str | Path) -> None:
        """One row per kept frame: number, start (ms from the profiler's creation), wall,
        CPU, other, steps and every stage's time (empty where it did not run)."""
        names = [n for n, _ in _in_order({n: 0 for r in self.records() for n in r.stages})]
        write_frames_csv(self, names, path)

    def trace(self) -> dict:
        """The kept frames as a Chrome trace (runtime/profiler_trace.py)."""
        return chrome_trace(self)

    def summary_line(self) -> str:
        frame = self.summary()["stages"]["frame"]
        return (
            f"{self.frames} frames, {len(self.records())} kept; wall p50 {frame['p50_ms']:.2f} "
            f"ms, p99 {frame['p99_ms']:.2f} ms, max {frame['max_ms']:.2f} ms"
        )

    def write_trace(self, path: str | Path) -> None:
        """Writes trace() as JSON. Call check_output_path(path) before a long run to fail
        early on a folder that does not exist."""
        trace = self.trace()
        path = check_output_path(path, "trace")
        path.write_text(json.dumps(trace, separators=(",", ":")))


def _in_order(per_stage: dict) -> list:
    """Stages in pipeline order, then any others a caller timed."""
    known = [(n, per_stage[n]) for n in STAGES if n in per_stage]
    return known + [(n, v) for n, v in per_stage.items() if n not in STAGES]


_STATISTICS = {
    "p50": np.median,
    "p99": lambda a: np.percentile(a, 99),
    "mean": np.mean,
    "max": np.max,
}


def percentiles_ms(values_ms, statistics=("p50", "p99", "mean", "max")) -> dict[str, float]:
    """{"p50_ms": ..., "p99_ms": ...}: the named statistics of timings in milliseconds (NaN
    for no timings). The one summary every timing report (run, bench, compare, viewer) uses."""
    array = np.asarray(values_ms, dtype=np.float64)
    return {
        f"{name}_ms": float(_STATISTICS[name](array)) if array.size else float("nan")
        for name in statistics
    }

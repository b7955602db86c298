"""A profiler's kept frames written out: the Chrome trace (the trace-event JSON that Perfetto
and chrome://tracing open) and the CSV of per-frame times (runtime/profiler.py's
Profiler.trace, write_trace and write_csv)."""

from __future__ import annotations

import csv
import os
import threading
from pathlib import Path

import numpy as np

# Per dog speed tracks up to this many dogs; past it, the mean and the fastest.
SPEED_TRACK_DOGS = 4


def write_frames_csv(profiler, names: list[str], path: str | Path) -> None:
    """Profiler.write_csv's file, the stages' columns `names`."""
    records = profiler.records()
    with open(path, "w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(
            ["frame", "start_ms", "wall_ms", "cpu_ms", "other_ms", "steps"]
            + [f"{n}_ms" for n in names]
        )
        for r in records:
            writer.writerow(
                [
                    r.number,
                    f"{(r.start_ns - profiler._origin_ns) / 1e6:.4f}",
                    f"{r.wall_ms:.4f}",
                    f"{r.cpu_ms:.4f}",
                    f"{r.other_ms:.4f}",
                    r.steps,
                ]
                + [f"{r.stages[n]:.4f}" if n in r.stages else "" for n in names]
            )


def chrome_trace(profiler) -> dict:
    """The kept frames as a Chrome trace: process and thread names, one `frame` slice
    per frame with its stages nested inside (args: frame number, steps, CPU and other
    ms, context; tdur: thread CPU time), counter tracks and instant markers; the machine
    description under otherData."""
    if not profiler.keep_trace:
        raise ValueError(
            "this Profiler keeps no trace: create it with Profiler(keep_trace=True) "
            "(and pass it to the Controller) to write one"
        )
    from canis.runtime.machine import describe_machine

    pid, tid = os.getpid(), threading.get_native_id()

    def us(ns: int) -> float:
        return round((ns - profiler._origin_ns) / 1e3, 3)

    events = [
        {"name": "process_name", "ph": "M", "cat": "__metadata", "pid": pid, "tid": tid,
         "ts": 0, "args": {"name": profiler.process_name}},
        {"name": "thread_name", "ph": "M", "cat": "__metadata", "pid": pid, "tid": tid,
         "ts": 0, "args": {"name": profiler.thread_name}},
    ]  # fmt: skip
    dogs = None
    for r in profiler.records():
        end_ns = r.start_ns + round(r.wall_ms * 1e6)
        # The dogs track is written where its value changes, and at the first frame
        # kept, so it survives the ring dropping the frame that set it.
        if r.context.get("dogs") is not None and r.context["dogs"] != dogs:
            dogs = r.context["dogs"]
            counter = {"name": "dogs", "cat": "counter", "ph": "C", "pid": pid, "tid": tid}
            events.append(counter | {"ts": us(r.start_ns), "args": {"dogs": dogs}})
        args = {
            "frame": r.number,
            "steps": r.steps,
            "cpu_ms": round(r.cpu_ms, 4),
            "other_ms": round(r.other_ms, 4),
        } | r.context
        events.append(
            {
                "name": "frame",
                "cat": "frame",
                "ph": "X",
                "pid": pid,
                "tid": tid,
                "ts": us(r.start_ns),
                "dur": round(us(end_ns) - us(r.start_ns), 3),
                "tdur": round(r.cpu_ms * 1e3, 3),
                "args": args,
            }
        )
        for phase, name, start_ns, duration_ns, event_args in r.events or ():
            event = {"name": name, "ph": phase, "pid": pid, "tid": tid, "ts": us(start_ns)}
            if phase == "X":
                # Never past the frame's end, whatever the rounding to microseconds.
                stage_end = min(us(start_ns + duration_ns), us(end_ns))
                event |= {"cat": "stage", "dur": round(stage_end - event["ts"], 3)}
            elif phase == "i":
                event |= {"cat": "marker", "s": "t"}
            else:
                event["cat"] = "counter"
                if isinstance(event_args, np.ndarray):
                    event_args = _counter_values(name, event_args)
            if event_args:
                event["args"] = event_args
            events.append(event)
    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {
            "canis_profiler": profiler.summary_line(),
            "machine": profiler.machine or describe_machine(**profiler.used),
        },
    }


def _counter_values(name: str, values: np.ndarray) -> dict[str, float]:
    """A counter sample end_step kept as an array, as the trace's values."""
    if name == "speed_mps":  # (N, 2) velocities
        speed = np.linalg.norm(values, axis=-1)
        if len(speed) > SPEED_TRACK_DOGS:
            return {"mean": round(float(speed.mean()), 4), "max": round(float(speed.max()), 4)}
        return {f"dog{i}": round(float(s), 4) for i, s in enumerate(speed)}
    return {f"e{k}": round(float(w), 4) for k, w in enumerate(values)}


def check_output_path(path: str | Path, what: str = "output", make_folders: bool = False) -> Path:
    """`path` if a file can be written there, else a one-line error naming it: before a run,
    so an hour of timing is not lost to a typo in the folder. `make_folders`: the folders on
    the way may be missing (the writer makes them); the nearest one that exists must be a
    writable folder."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{path}: is a folder; give a file name for the {what}")
    folder = path.parent
    while make_folders and not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"{path}: {folder} is a file, not a folder, for the {what}")
    if not folder.is_dir():
        raise FileNotFoundError(f"{path}: the folder {path.parent} does not exist for the {what}")
    if not os.access(folder, os.W_OK):
        raise PermissionError(f"{path}: the folder {folder} is not writable for the {what}")
    return path

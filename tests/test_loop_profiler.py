import json
import time

import numpy as np
import pytest
from canis.runtime.loop import STEP_S, FixedTimestep
from canis.runtime.profiler import Profiler


def test_accumulator_runs_whole_steps_and_keeps_the_remainder():
    loop = FixedTimestep()
    assert loop.advance(STEP_S * 0.5) == 0
    assert loop.advance(STEP_S * 0.75) == 1
    assert loop.alpha == pytest.approx(0.25)
    # A steady 144 Hz display still simulates 60 steps per second on average.
    loop = FixedTimestep()
    assert sum(loop.advance(1 / 144) for _ in range(144)) == pytest.approx(60, abs=1)


def test_a_stalled_frame_drops_time_instead_of_spiralling():
    loop = FixedTimestep(max_steps=4)
    assert loop.advance(2.0) == 4  # the window was dragged for two seconds
    assert loop.dropped_s == pytest.approx(2.0 - 4 * STEP_S, abs=STEP_S)
    assert loop.accumulator_s < STEP_S
    assert loop.advance(STEP_S) == 1  # and the next frame is normal again
    assert loop.advance(float("nan")) == 0 and loop.advance(-1.0) == 0


def test_profiler_stats_overruns_and_trace(tmp_path):
    profiler = Profiler(budget_ms=2.0, keep_trace=True)
    for i in range(10):
        with profiler.stage("inference"):
            time.sleep(0.003 if i == 9 else 0.0005)
        with profiler.stage("ik"):
            pass
        profiler.end_frame()
    summary = profiler.summary()
    assert summary["frames"] == 10 and summary["overruns"] >= 1
    stats = profiler.rolling()
    assert stats["inference"]["p50_ms"] >= 0.5 and stats["frame"]["p99_ms"] >= 2.5
    profiler.write_trace(tmp_path / "trace.json")
    events = json.loads((tmp_path / "trace.json").read_text())["traceEvents"]
    assert len(events) == 20 and {e["name"] for e in events} == {"inference", "ik"}
    assert all(e["ph"] == "X" and e["dur"] >= 0 for e in events)
    assert np.all(np.diff([e["ts"] for e in events]) >= 0)

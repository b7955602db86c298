import csv
import json
import time

import numpy as np
import pytest
from canis.runtime.loop import STEP_S, FixedTimestep, wait_for_next_tick
from canis.runtime.profiler import Histogram, Profiler, check_output_path


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
    slices = [e for e in events if e["ph"] == "X"]
    assert [e["name"] for e in slices if e["cat"] == "frame"] == ["frame"] * 10
    assert {e["name"] for e in slices if e["cat"] == "stage"} == {"inference", "ik"}
    assert all(e["dur"] >= 0 for e in slices) and all("cat" in e for e in events)
    assert np.all(np.diff([e["ts"] for e in slices]) >= 0)


def test_frames_are_wall_time_with_cpu_time_and_the_untimed_rest():
    profiler = Profiler()
    profiler.begin_frame()
    time.sleep(0.004)  # untimed, and not on the CPU
    with profiler.stage("inference"):
        sum(range(20000))  # on the CPU
    wall_ms = profiler.end_frame()
    record = profiler.ring[-1]
    assert wall_ms == record.wall_ms >= 4.0 + record.stages["inference"]
    assert record.other_ms >= 4.0 - 1e-6
    assert record.cpu_ms < wall_ms - 3.0  # the sleep is wall time, not CPU time
    summary = profiler.summary()
    assert summary["frame_cpu"]["max_ms"] == pytest.approx(record.cpu_ms)
    assert summary["other"]["max_ms"] == pytest.approx(record.other_ms)


def test_render_is_timed_in_the_frame_it_draws():
    profiler = Profiler()
    for _ in range(3):
        profiler.begin_frame()
        with profiler.stage("inference"):
            pass
        with profiler.stage("render"):
            time.sleep(0.001)
        profiler.end_frame()
    assert all("render" in r.stages and "inference" in r.stages for r in profiler.ring)
    assert all(r.wall_ms >= r.stages["render"] for r in profiler.ring)


def test_ring_is_bounded_and_keeps_the_worst_frames_whole(tmp_path):
    profiler = Profiler(keep_trace=True, max_frames=50, worst_frames=3)
    for i in range(400):
        with profiler.stage("inference"):
            if i == 7:  # the stall, long before the ring's last 50 frames
                time.sleep(0.02)
        profiler.end_step(1, np.ones((1, 2)), np.full((1, 8), 0.125))
        profiler.instant("marker", i=i)
        profiler.end_frame()
    assert len(profiler.ring) == 50
    worst = profiler.worst()
    assert len(worst) == 3 and worst[0].number == 7 and worst[0].wall_ms >= 20
    summary = profiler.summary()
    assert summary["stages"]["frame"]["max_ms"] == pytest.approx(worst[0].wall_ms)
    assert summary["worst_frames"][0]["frame"] == 7
    kept = profiler.records()
    assert 50 <= len(kept) <= 53 and 7 in [r.number for r in kept]
    events = profiler.trace()["traceEvents"]
    frames = [e for e in events if e["name"] == "frame"]
    assert len(frames) == len(kept)
    stalled = next(e for e in frames if e["args"]["frame"] == 7)
    assert stalled["dur"] >= 20e3
    marker = next(e for e in events if e["ph"] == "i" and e["args"]["i"] == 7)
    assert stalled["ts"] <= marker["ts"] <= stalled["ts"] + stalled["dur"]
    # The dogs track was set in frame 0, long gone from the ring; the trace still has it.
    assert [e["args"] for e in events if e["name"] == "dogs"] == [{"dogs": 1}]
    # Bounded: ten times as many frames make a trace of the same size.
    size = len(json.dumps(profiler.trace()))
    for _ in range(4000):
        with profiler.stage("inference"):
            pass
        profiler.end_frame()
    assert len(json.dumps(profiler.trace())) < 1.5 * size


def test_histogram_keeps_the_exact_maximum_past_its_last_bin():
    histogram = Histogram(maximum=200.0)
    for value in (1.0, 235.0, 3.0):
        histogram.add(value)
    assert histogram.percentiles()["max"] == 235.0
    histogram.add_many(np.array([2.0, 250.5]))
    assert histogram.percentiles()["max"] == 250.5


def test_histogram_binning_in_batches_counts_as_binning_each_value(rng):
    """add() bins its values Histogram.PENDING at a time: the counts, total and percentiles
    are those of binning each value as it comes; a non-finite value is refused at once."""
    values = [float(v) for v in np.abs(rng.normal(size=3 * Histogram.PENDING + 7)) * 3]
    values += [250.0, 0.0, -0.003, 1e-12]
    histogram = Histogram(maximum=200.0)
    expected = np.zeros_like(histogram.counts)
    total = 0.0
    for value in values:
        histogram.add(value)
        expected[min(max(int(value / 0.01), 0), len(expected) - 1)] += 1
        total += value
    assert np.array_equal(histogram.counts, expected)
    assert histogram.total == total and len(histogram) == len(values)
    for bad in (float("nan"), float("inf")):
        with pytest.raises(ValueError, match="must be finite"):
            histogram.add(bad)


def test_trace_needs_keep_trace_and_an_existing_folder(tmp_path):
    profiler = Profiler()
    with profiler.stage("inference"):
        pass
    profiler.end_frame()
    with pytest.raises(ValueError, match="keep_trace=True"):
        profiler.write_trace(tmp_path / "trace.json")
    keeping = Profiler(keep_trace=True)
    keeping.end_frame()
    with pytest.raises(FileNotFoundError, match="does not exist"):
        keeping.write_trace(tmp_path / "missing" / "trace.json")
    with pytest.raises(ValueError, match="is a folder"):
        check_output_path(tmp_path)


def test_trace_context_counters_markers_and_csv(tmp_path):
    profiler = Profiler(keep_trace=True)
    profiler.describe(dogs=2, model="mann8.onnx", precision="float32")
    profiler.instant("before the frame")  # lands in the next frame's events
    for _ in range(3):
        profiler.begin_frame()
        with profiler.stage("inference"):
            pass
        profiler.end_step(2, np.array([[3.0, 4.0], [0.0, 1.0]]), np.full((2, 4), 0.25))
        profiler.end_frame()
    trace = profiler.trace()
    events = trace["traceEvents"]
    names = {e["name"]: e for e in events if e["ph"] == "M"}
    assert names["process_name"]["args"]["name"] and names["thread_name"]["args"]["name"]
    frame = next(e for e in events if e["name"] == "frame")
    expected = {"frame": 0, "steps": 1, "dogs": 2, "model": "mann8.onnx"}
    assert frame["args"].items() >= expected.items()
    assert "tdur" in frame and frame["args"]["precision"] == "float32"
    counters = [e for e in events if e["ph"] == "C"]
    speed = next(e for e in counters if e["name"] == "speed_mps")
    assert speed["args"] == {"dog0": 5.0, "dog1": 1.0}
    assert [e["name"] for e in counters].count("dogs") == 1  # only when it changes
    assert any(e["name"] == "expert_weights_dog0" for e in counters)
    assert any(e["ph"] == "i" and e["name"] == "before the frame" for e in events)
    assert trace["otherData"]["machine"]["python"]
    profiler.write_csv(tmp_path / "frames.csv")
    rows = list(csv.DictReader(open(tmp_path / "frames.csv")))
    assert len(rows) == 3 and float(rows[0]["wall_ms"]) >= float(rows[0]["inference_ms"])
    assert rows[0]["steps"] == "1"


def test_paced_frames_wait_for_their_tick_and_a_late_one_does_not():
    start = time.perf_counter()
    tick = wait_for_next_tick(start, 0.02)
    assert tick == start + 0.02 and time.perf_counter() >= tick  # slept to it
    late = time.perf_counter() - 1.0  # a tick a second behind: no sleep, the next one is due
    before = time.perf_counter()
    assert wait_for_next_tick(late, 0.02) == late + 0.02
    assert time.perf_counter() - before < 0.5

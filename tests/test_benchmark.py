"""`canis bench`'s measurements, run small: every table it writes has its figures."""

import re
import time

from canis.runtime.assets import shipped_models_dir
from canis.tools import benchmark

SHIPPED_MODELS = shipped_models_dir()


MANN8 = SHIPPED_MODELS / "mann8.onnx"


def test_a_small_benchmark_report():
    inference = benchmark.benchmark_inference(
        MANN8, batches=(1, 4), threads=(1,), seconds_per_case=0.05
    )
    assert [r["batch"] for r in inference] == [1, 4]
    assert all(0 < r["p50_ms"] <= r["p99_ms"] for r in inference)
    frames = benchmark.benchmark_frames(MANN8, counts=(1, 2), frames=60)
    locked = benchmark.benchmark_frames(MANN8, counts=(1,), frames=60, foot_lock=True)
    assert locked[0]["foot_lock"] and not frames[0]["foot_lock"]
    started = time.perf_counter()
    paced = benchmark.benchmark_frames(MANN8, counts=(1,), frames=60, paced=True)
    assert time.perf_counter() - started >= 60 / 60  # a frame every 1/60 s at the least
    assert paced[0]["paced"] and not frames[0]["paced"]
    stages = frames[0]["stages"]
    assert {"input", "trajectory", "features", "inference", "decode", "ik", "frame"} <= set(stages)
    memory = benchmark.session_memory_mb(MANN8)
    assert memory > 5.0  # 22 MB of weights must show up
    report = {
        "machine": benchmark.benchmark_machine(),
        "inference": inference,
        "frames": frames,
        "frames_foot_lock": locked,
        "frames_paced": paced,
        "sizes_mb": {"mann8.onnx": benchmark.model_size_mb(MANN8)},
        "memory_mb": {"mann8.onnx": memory},
        "frame_model": "mann8.onnx",
        "non_inference_ms_p50": 0.1,
    }
    text = benchmark.markdown(report)
    assert f"| mann8.onnx | mann | fp32 | 22.3 MB | {memory:.1f} MB | 1 | 4 |" in text
    assert "With the foot lock on" in text and "Paced as a game's frames" in text
    assert re.search(r"\n\| paced \| \d+\.\d{3} \|", text)
    assert len(re.findall(r"\n\| 1 \| \d", text)) == 2  # one dog, without and with the lock


def test_the_report_explains_the_machine_and_the_floor():
    from canis.runtime.machine import benchmark_machine, describe_machine, machine_paragraph

    m = benchmark_machine()
    assert m["logical_cores"] >= 1 and m["ram_read_gbps"] > 0
    # The same description as every run, soak and trace, with the benchmark's extras.
    assert set(describe_machine()) <= set(m)
    text = machine_paragraph(m)
    assert m["cpu"] in text and "GB/s" in text and "ONNX Runtime" in text
    floor = benchmark.memory_floor(MANN8)
    # MANN-8's weights: 3 blended layers of 8 experts and the gating network, about 22 MB.
    assert 21e6 < floor["weight_bytes"] <= MANN8.stat().st_size
    assert floor["read_floor_ms"] > 0
    # 2 blocks of 10 calls each, not canis bench's 20 of 50 (1.5 s of CPU): the figures and
    # the table are made the same way from any number of timed calls.
    raw = benchmark.raw_onnxruntime_floor(MANN8, rounds=2, block=10)
    assert raw["onnxruntime"]["p50_ms"] > 0 and raw["runtime"]["p50_ms"] > 0
    report = {"floors": {"mann8.onnx": floor | raw}, "precisions": {"mann8.onnx": "fp32"}}
    table = "\n".join(benchmark._floor_section(report))
    assert f"| mann8.onnx | fp32 | {floor['weight_bytes'] / 1e6:.1f} MB |" in table


def test_streamed_transition_cost_is_measured_per_frame(tiny_model, tiny_rtn):
    """canis bench's streamed-transition table (it read a trace format that had changed)."""
    from canis.runtime.transition import TransitionModel
    from canis.tools.transition_benchmark import streamed_cost

    cost = streamed_cost(TransitionModel(tiny_rtn), tiny_model, dogs=2, length=5, cycles=1)
    assert cost["frames_with_lead"] > 5
    assert 0 < cost["ask_stage_p50_ms"] and 0 < cost["stage_p50_ms"] <= cost["stage_max_ms"]
    for kind in ("ask", "transition", "plain"):
        assert 0 < cost[f"{kind}_wall_p50_ms"] <= cost[f"{kind}_wall_max_ms"]
        assert 0 < cost[f"{kind}_cpu_p50_ms"] <= cost[f"{kind}_cpu_max_ms"]
    assert cost["transition_wall_p50_ms"] >= cost["stage_p50_ms"]  # the step holds the stage
    assert cost["transition_worker_cpu_max_ms"] == 0  # no worker: no steps on its thread


def test_the_transition_worker_s_cost_is_measured(tiny_model, tiny_rtn):
    from canis.runtime.transition import TransitionModel
    from canis.tools.transition_benchmark import streamed_cost, streamed_lines

    rtn = TransitionModel(tiny_rtn)
    cost = streamed_cost(rtn, tiny_model, dogs=1, length=5, cycles=1, worker=True)
    assert cost["worker"] and 0 < cost["transition_worker_cpu_p50_ms"]
    table = "\n".join(streamed_lines([cost]))
    assert "| worker thread | 1 | of a transition |" in table


def test_the_viewer_section_alone_is_replaced():
    from canis.tools.bench import replace_viewer_section

    old = "# B\n\n## Inference\n\nx\n\n## The viewer (1280x720)\n\nold\n\n## After\n\ny\n"
    new = "\n## The viewer (640x360)\n\nnew\n"
    text = replace_viewer_section(old, new)
    assert text == "# B\n\n## Inference\n\nx\n\n## The viewer (640x360)\n\nnew\n\n## After\n\ny\n"
    last = replace_viewer_section("# B\n\n## The viewer (a)\n\nold\n", new)
    assert last == "# B\n\n## The viewer (640x360)\n\nnew\n"
    assert replace_viewer_section("# B\n", new) == "# B\n" + new


def test_bench_rewrites_only_its_own_section_of_the_report(tmp_path, monkeypatch, capsys):
    """`canis bench` (the README's command) wrote docs/BENCHMARKS.md whole, over the earlier
    runs and the measurements written by hand between them. It now keeps them: its report goes
    in its own marked section, appended the first time and replaced after that."""
    from canis.cli import main

    runs = iter(("first", "second", "third"))
    monkeypatch.setattr(benchmark, "run_benchmarks", lambda *a, **k: {"run": next(runs)})
    monkeypatch.setattr(benchmark, "markdown", lambda report: f"## Run\n\n{report['run']}\n")
    monkeypatch.setattr("canis.tools.bench.print_summary", lambda report: None)
    doc = tmp_path / "BENCHMARKS.md"
    doc.write_text("# Benchmarks\n\nMeasured by hand, with how to reproduce it.\n")
    options = ["--no-viewer", "--models", str(MANN8), "--precisions", ""]
    options += ["--transition-model", str(tmp_path / "none_step.onnx")]
    assert main(["bench", "--markdown", str(doc), *options]) == 0
    assert main(["bench", "--markdown", str(doc), *options]) == 0
    text = doc.read_text()
    assert text.startswith("# Benchmarks\n\nMeasured by hand, with how to reproduce it.\n")
    assert text.count("<!-- bench:begin -->") == 1 and "second" in text and "first" not in text
    fresh = tmp_path / "new" / "BENCHMARKS.md"  # a new report gets the document's title
    assert main(["bench", "--markdown", str(fresh), *options]) == 0
    assert fresh.read_text().startswith("# Benchmarks\n\n<!-- bench:begin -->\n## Run")


def test_the_after_inference_probe_times_each_stand_in():
    from canis.tools.after_inference_probe import probe

    results = probe(frames=30)
    assert list(results) == ["model", "streaming stand-in", "cache-resident stand-in"]
    for samples in results.values():
        assert all(len(values) == 30 and min(values) > 0 for values in samples.values())


def test_the_rtn_step_benchmark_feeds_any_transition_network(tiny_rtn):
    """canis bench times the step graph as the runtime feeds it: the network's own hidden width
    and, for one trained with target noise (the shipped RTN since 2026-11-25), zero noise; it
    stopped on the shipped RTN's missing 'target_noise' input."""
    from pathlib import Path

    import numpy as np
    from canis.runtime.transition import STEP_OUTPUTS, TransitionModel
    from canis.tools.transition_benchmark import step_feeds

    noisy = Path(__file__).resolve().parent / "fixtures" / "tiny_rtn_noise_step.onnx"
    for path in (tiny_rtn, noisy):
        model = TransitionModel(path)
        frame, *_ = model.step_session.run(
            STEP_OUTPUTS, step_feeds(model, 3, np.random.default_rng(0))
        )
        assert frame.shape[0] == 3 and np.all(np.isfinite(frame))

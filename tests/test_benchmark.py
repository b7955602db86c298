"""`canis bench`'s measurements, run small: every table it writes has its figures."""

import re
import time
from pathlib import Path

import pytest
from canis.evaluation import benchmark
from canis.runtime.assets import shipped_models_dir

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


def test_the_readout_benchmark_times_a_step_against_a_step_with_every_readout(tiny_model):
    from canis.evaluation import readout_benchmark

    report = readout_benchmark.benchmark_readouts(tiny_model, count=4, rounds=2, block=8)
    assert report["readouts"]["calls"] == 16 and report["readouts"]["p50_ms"] > 0
    assert report["characters"] == 4 and report["target_ratio"] == 1.2
    for key in ("step", "step_and_readouts"):
        assert 0 < report[key]["p50_ms"] <= report[key]["p99_ms"] and report[key]["calls"] == 12
    assert report["ratio_p50"] == report["step_and_readouts"]["p50_ms"] / report["step"]["p50_ms"]
    text = readout_benchmark.markdown(report, benchmark.benchmark_machine())
    assert "## Readouts (tiny_mann4.onnx, 4 dogs trotting on hills" in text
    assert re.search(r"\n\| step \+ readouts \| \d+\.\d\d \| \d+\.\d\d \| 12 \|", text)
    assert "The readouts alone, timed inside the second: p50 " in text
    assert "Measured on this machine: " in text and ".." not in text


def test_bench_readouts_only_prints_the_readouts_and_writes_json(tmp_path, monkeypatch, capsys):
    import json

    from canis.evaluation import readout_benchmark

    from canis.cli import main

    timed = {"p50_ms": 2.0, "p99_ms": 3.0, "calls": 5}
    fake = {"file": "m.onnx", "characters": 256, "terrain": "hills", "target_ratio": 1.2}
    fake |= {"step": timed, "step_and_readouts": timed, "ratio_p50": 1.0, "ratio_p99": 1.0}
    fake["readouts"] = timed
    asked = []
    monkeypatch.setattr(
        readout_benchmark,
        "run_readouts_only",
        lambda model: asked.append(model) or {"machine": None, "readouts": fake},
    )
    assert main(["bench", "--readouts-only", "--json", str(tmp_path / "r.json")]) == 0
    assert "| ratio | 1.000x | 1.000x | |" in capsys.readouterr().out
    assert json.loads((tmp_path / "r.json").read_text())["readouts"]["characters"] == 256
    assert asked[0].name == "mann8.int8.onnx"  # the shipped model, as the frames' timing
    with pytest.raises(SystemExit, match="--readouts-only: prints"):
        main(["bench", "--readouts-only", "--markdown", str(tmp_path / "page.md")])


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
    from canis.evaluation.transition_benchmark import streamed_cost
    from canis.runtime.transition import TransitionModel

    cost = streamed_cost(TransitionModel(tiny_rtn), tiny_model, dogs=2, length=5, cycles=1)
    assert cost["frames_with_lead"] > 5
    assert 0 < cost["ask_stage_p50_ms"] and 0 < cost["stage_p50_ms"] <= cost["stage_max_ms"]
    for kind in ("ask", "transition", "plain"):
        assert 0 < cost[f"{kind}_wall_p50_ms"] <= cost[f"{kind}_wall_max_ms"]
        assert 0 < cost[f"{kind}_cpu_p50_ms"] <= cost[f"{kind}_cpu_max_ms"]
    assert cost["transition_wall_p50_ms"] >= cost["stage_p50_ms"]  # the step holds the stage
    assert cost["transition_worker_cpu_max_ms"] == 0  # no worker: no steps on its thread


def test_the_transition_worker_s_cost_is_measured(tiny_model, tiny_rtn):
    from canis.evaluation.transition_benchmark import streamed_cost, streamed_lines
    from canis.runtime.transition import TransitionModel

    rtn = TransitionModel(tiny_rtn)
    cost = streamed_cost(rtn, tiny_model, dogs=1, length=5, cycles=1, worker=True)
    assert cost["worker"] and 0 < cost["transition_worker_cpu_p50_ms"]
    table = "\n".join(streamed_lines([cost]))
    assert "| worker thread | 1 | of a transition |" in table


def test_the_viewer_section_alone_is_replaced():
    from canis.evaluation.bench import replace_viewer_section

    old = "# B\n\n## Inference\n\nx\n\n## The viewer (1280x720)\n\nold\n\n## After\n\ny\n"
    new = "\n## The viewer (640x360)\n\nnew\n"
    text = replace_viewer_section(old, new)
    assert text == "# B\n\n## Inference\n\nx\n\n## The viewer (640x360)\n\nnew\n\n## After\n\ny\n"
    last = replace_viewer_section("# B\n\n## The viewer (a)\n\nold\n", new)
    assert last == "# B\n\n## The viewer (640x360)\n\nnew\n"
    assert replace_viewer_section("# B\n", new) == "# B\n" + new


def test_bench_rewrites_only_its_own_section_of_the_page_and_only_when_asked(
    tmp_path, monkeypatch, capsys
):
    """`canis bench` writes no tracked doc unless asked; asked (--markdown FILE, or
    --write-docs for docs/RESULTS.md), its report goes in its own marked section, appended the
    first time and replaced after that, and the rest of the page stays."""
    from canis.cli import main

    runs = iter(("first", "second", "third", "fourth"))
    monkeypatch.setattr(benchmark, "run_benchmarks", lambda *a, **k: {"run": next(runs)})
    monkeypatch.setattr(benchmark, "markdown", lambda report: f"## Run\n\n{report['run']}\n")
    monkeypatch.setattr("canis.evaluation.bench.print_summary", lambda report: None)
    monkeypatch.chdir(tmp_path)  # --write-docs writes docs/RESULTS.md under the current folder
    options = ["--no-viewer", "--models", str(MANN8), "--precisions", ""]
    options += ["--transition-model", str(tmp_path / "none_step.onnx")]
    assert main(["bench", *options]) == 0
    assert list(tmp_path.iterdir()) == [], "a plain `canis bench` wrote a file"
    doc = tmp_path / "RESULTS.md"
    doc.write_text("# Results\n\nWritten by hand, with how to reproduce it.\n")
    assert main(["bench", "--markdown", str(doc), *options]) == 0
    assert main(["bench", "--markdown", str(doc), *options]) == 0
    text = doc.read_text()
    assert text.startswith("# Results\n\nWritten by hand, with how to reproduce it.\n")
    assert text.count("<!-- bench:begin -->") == 1 and "third" in text and "second" not in text
    assert not list(tmp_path.glob(".RESULTS.md.*")), "a temporary file was left"
    assert main(["bench", "--write-docs", *options]) == 0
    fresh = (tmp_path / "docs" / "RESULTS.md").read_text()  # a new page gets the title
    assert fresh.startswith("# Results\n\n<!-- bench:begin -->\n## Run\n\nfourth")


def test_evaluate_checks_its_parts_and_output_before_running_any(tmp_path, capsys):
    """`canis evaluate` runs every part; a typo in --parts, or an --out that is a file, is one
    line naming it, before anything is measured or written."""
    from canis.evaluation.release import PARTS, part_parsers

    from canis.cli import main

    assert set(part_parsers()) == set(PARTS)
    assert main(["evaluate", "--parts", "controllers,speeed", "--out", str(tmp_path / "o")]) == 2
    assert "--parts 'controllers,speeed': unknown speeed" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
    a_file = tmp_path / "file"
    a_file.write_text("x")
    assert main(["evaluate", "--parts", "speed", "--out", str(a_file)]) == 2
    assert "exists and is not a folder" in capsys.readouterr().err
    assert a_file.read_text() == "x"


def test_evaluate_writes_each_part_into_one_page(tmp_path, monkeypatch, capsys):
    """With no part named, each part runs as its own subcommand would and writes its section of
    one page (out/evaluation/RESULTS.md, not the tracked docs) and its JSON beside it."""
    from canis.evaluation import speed_tracking

    from canis.cli import main

    monkeypatch.setattr(speed_tracking, "report", lambda model, seconds, command, machine: "S")
    runs = iter(("bench-run",))
    monkeypatch.setattr(benchmark, "run_benchmarks", lambda *a, **k: {"run": next(runs)})
    monkeypatch.setattr(benchmark, "markdown", lambda report: f"B {report['run']}\n")
    monkeypatch.setattr("canis.evaluation.bench.print_summary", lambda report: None)
    monkeypatch.setattr("canis.evaluation.bench.with_precisions", lambda m, p, f: m)
    from canis.demo import benchmark as viewer
    from canis.evaluation import transition_benchmark

    monkeypatch.setattr(transition_benchmark, "benchmark_transitions", lambda *a: {})
    monkeypatch.setattr(transition_benchmark, "markdown", lambda report: "T\n")
    monkeypatch.setattr(viewer, "benchmark_viewer", lambda model: {})
    monkeypatch.setattr(viewer, "markdown", lambda report: "V\n")
    monkeypatch.chdir(tmp_path)
    assert main(["evaluate", "--parts", "speed,bench", "--out", "o"]) == 0
    page = (tmp_path / "o" / "RESULTS.md").read_text()
    assert page.index("<!-- speed:begin -->\nS\n") < page.index("<!-- bench:begin -->")
    assert "B bench-run\nT\nV\n" in page and (tmp_path / "o" / "bench.json").is_file()
    assert not (tmp_path / "docs").exists()


def test_the_rtn_step_benchmark_feeds_any_transition_network(tiny_rtn):
    """canis bench times the step graph as the runtime feeds it: the network's own hidden width
    and, for one trained with target noise (the shipped RTN since 2026-11-25), zero noise; it
    stopped on the shipped RTN's missing 'target_noise' input."""
    from pathlib import Path

    import numpy as np
    from canis.evaluation.transition_benchmark import step_feeds
    from canis.runtime.transition import STEP_OUTPUTS, TransitionModel

    noisy = Path(__file__).resolve().parent / "fixtures" / "tiny_rtn_noise_step.onnx"
    for path in (tiny_rtn, noisy):
        model = TransitionModel(path)
        frame, *_ = model.step_session.run(
            STEP_OUTPUTS, step_feeds(model, 3, np.random.default_rng(0))
        )
        assert frame.shape[0] == 3 and np.all(np.isfinite(frame))


def test_the_speed_table_shows_hills_along_the_ground_and_says_why(tmp_path, capsys):
    """The network sees no terrain, so the horizontal windows on hills repeat flat ground's
    (the table printed the same numbers twice); the hills' rows show the speed along it."""
    from canis.evaluation.speed_tracking import SpeedRun, header, table

    from canis.cli import main

    flat = SpeedRun("flat", 1.0, [[0.98, 0.99]], [[0.98, 0.99]])
    hills = SpeedRun("hills", 1.0, [[0.98, 0.99]], [[1.03, 1.04]])
    text = table([flat, hills])
    assert "| flat | 1.0 | 0.98, 0.99 |" in text and "| hills | 1.0 | 1.03, 1.04 |" in text
    assert "sees no terrain" in header(Path("m.onnx"), 14.0, "canis evaluate speed", "a CPU")
    for seconds in ("0", "3.9", "nan"):
        assert main(["evaluate", "speed", "--seconds", seconds]) == 2
        err = capsys.readouterr().err
        assert "--seconds" in err and "must be from 4" in err and len(err.splitlines()) == 1

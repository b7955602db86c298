import json

import numpy as np
import pytest
from canis.tools.compare import compare_files

from canis.cli import main

MACHINE = {"cpu": "AMD EPYC", "cpu_family": "25", "cpu_model_number": "17",
           "logical_cores": 2, "usable_cores": 2, "commit": "abc"}  # fmt: skip


def run_json(path, samples, model="mann8.onnx", kind="mann", precision="float32", **extra):
    report = {
        "report": "canis run",
        "model": model,
        "kind": kind,
        "precision": precision,
        "characters": 1,
        "threads": 1,
        "device": "cpu",
        "terrain": "flat",
        "foot_lock": False,
        "machine": MACHINE,
        "frame_time": {"stages": {}},
        "frame_samples_ms": {k: list(v) for k, v in samples.items()},
    } | extra
    path.write_text(json.dumps(report))
    return path


def noisy(median_ms, n=1200, seed=0):
    rng = np.random.default_rng(seed)
    return median_ms * rng.lognormal(0.0, 0.2, n)


def test_two_runs_of_the_same_work_show_no_significant_difference(tmp_path):
    a = run_json(
        tmp_path / "a.json", {"inference": noisy(1.0, seed=1), "frame": noisy(2.0, seed=2)}
    )
    b = run_json(
        tmp_path / "b.json", {"inference": noisy(1.0, seed=3), "frame": noisy(2.0, seed=4)}
    )
    result = compare_files(a, b)
    assert result["warnings"] == [] and result["notes"] == []
    assert [r["significant"] for r in result["rows"]] == [False, False]
    low, high = result["rows"][0]["interval"]
    assert 0.9 < low < high < 1.1


def test_a_faster_model_is_reported_with_an_interval(tmp_path, capsys):
    a = run_json(tmp_path / "fp32.json", {"inference": noisy(1.5, seed=1)})
    b = run_json(
        tmp_path / "int8.json",
        {"inference": noisy(0.5, seed=2)},
        model="mann8_int8.onnx",
        precision="int8",
    )
    (row,) = compare_files(a, b)["rows"]
    assert row["significant"] and row["verdict"].startswith("FASTER")
    low, high = row["interval"]
    assert low < 1 / 3 < high < 0.5
    assert main(["compare", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "FASTER x3" in out and "mann8_int8.onnx (int8)" in out


def test_mismatches_are_marked(tmp_path):
    a = run_json(tmp_path / "a.json", {"frame": noisy(2.0)})
    other = MACHINE | {"cpu": "Intel Xeon", "logical_cores": 16, "usable_cores": 16}
    b = run_json(tmp_path / "b.json", {"frame": noisy(2.0)}, kind="pfnn", model="pfnn.onnx",
                 machine=other, characters=8)  # fmt: skip
    warnings = compare_files(a, b)["warnings"]
    assert any(w.startswith("different machines: cpu") for w in warnings)
    assert any(w.startswith("DIFFERENT MODELS") for w in warnings)
    assert any("characters 1 vs 8" in w for w in warnings)


def test_files_that_are_not_canis_runs_get_one_line_errors(tmp_path, capsys):
    good = run_json(tmp_path / "a.json", {"frame": noisy(2.0)})
    (tmp_path / "other.json").write_text('{"traceEvents": []}')
    (tmp_path / "text.csv").write_text("frame,wall_ms\n0,1.0\n")
    bench = {"machine": MACHINE, "inference": [], "frames": []}
    (tmp_path / "bench.json").write_text(json.dumps(bench))
    for other, message in (
        ("other.json", "not a canis run, soak or bench JSON"),
        ("text.csv", "not a JSON file"),
        ("missing.json", "no such file"),
        ("bench.json", "compare like with like"),
    ):
        assert main(["compare", str(good), str(tmp_path / other)]) == 2
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1
    with pytest.raises(ValueError, match="resamples"):
        compare_files(good, good, resamples=5)


def test_benches_compare_by_case_and_dog_count(tmp_path):
    def bench(path, scale, seed):
        inference = [
            {
                "file": "mann8.onnx",
                "threads": 1,
                "batch": 1,
                "samples_ms": list(noisy(scale, seed=seed)),
            }
        ]
        frames = [{"characters": 1, "samples": {"frame": list(noisy(2 * scale, seed=seed + 1))}}]
        path.write_text(json.dumps({"machine": MACHINE, "inference": inference, "frames": frames}))
        return path

    result = compare_files(bench(tmp_path / "a.json", 1.0, 1), bench(tmp_path / "b.json", 2.0, 5))
    assert [r["stage"] for r in result["rows"]] == [
        "inference mann8.onnx threads 1 batch 1",
        "1 dogs: frame",
    ]
    assert all(r["verdict"].startswith("SLOWER x2") for r in result["rows"])


def test_non_finite_times_are_not_compared(tmp_path, capsys):
    """A run against a copy with every number NaN said "no significant difference"."""
    a = run_json(tmp_path / "a.json", {"frame": noisy(2.0, seed=1)})
    b = run_json(tmp_path / "b.json", {"frame": np.full(1200, np.nan)})
    (row,) = compare_files(a, b)["rows"]
    assert row["verdict"] == "NOT COMPARED: non-finite times (0 before, 1200 after)"
    assert not row.get("significant") and row["ratio"] is None
    assert main(["compare", str(a), str(b)]) == 0
    assert "NOT COMPARED" in capsys.readouterr().out

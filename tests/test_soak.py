"""The one-minute soak that CI runs (canis soak --hours 1 is the full one)."""

import json

import pytest
from canis.tools import soak as soak_module
from canis.tools.soak import soak

from canis.cli import main


def test_one_simulated_minute_holds_up(tiny_model, tiny_rtn):
    report = soak(tiny_model, 60.0, characters=2, seed=3, transition_model_path=tiny_rtn)
    assert report["frames"] == 3600
    assert report["transitions"] > 0
    assert set(report["terrains"]) == {"flat", "hills"}  # 30 s each
    assert report["non_finite_model_outputs"] == 0 and report["non_finite_poses"] == 0
    assert report["max_bone_length_error"] < 1e-3  # 0.1%
    assert report["memory_growth_mb"] < 5.0
    assert report["frame_ms"]["p99"] > 0
    worst_at = report["paw_penetration_cm"]["worst_at"]  # where to trace the deepest paw
    assert worst_at["paw"].endswith("Site") and worst_at["terrain"] in {"flat", "hills"}
    assert report["speed_tracking"] == "default"
    signed = report["speed_error_mps"]["signed_mean"]  # the bias inside the mean error
    assert abs(signed) <= report["speed_error_mps"]["mean"] + 1e-9


def test_soak_speed_tracking_is_named_and_needs_a_calibration(tiny_model):
    with pytest.raises(ValueError, match="speed_tracking must be one of default, calibrated"):
        soak(tiny_model, 1.0, speed_tracking="pid")
    with pytest.raises(ValueError, match="has no speed calibration beside it"):
        soak(tiny_model, 1.0, speed_tracking="calibrated")


def summary(worst_cm=1.0, non_finite_poses=0):
    return {
        "characters": 2,
        "simulated_seconds": 60.0,
        "transitions": 3,
        "wall_seconds": 5.0,
        "non_finite_model_outputs": 0,
        "non_finite_poses": non_finite_poses,
        "max_bone_length_error": 2e-4,
        "paw_penetration_cm": {"worst": worst_cm, "mean": 0.1, "p99": 0.8},
        "speed_error_mps": {"mean": 0.4, "p95": 1.1, "signed_mean": 0.2},
        "memory_growth_mb": 0.3,
        "frame_ms": {"p50": 1.0, "p99": 2.0},
    }


@pytest.mark.parametrize(
    "report, code, failing",
    [
        (summary(), 0, []),
        (summary(worst_cm=24.5), 1, ["FAIL worst paw penetration: 24.50 cm (needs <= 5.0 cm)"]),
        (summary(non_finite_poses=2), 1, ["FAIL non-finite network outputs / displayed poses"]),
    ],
)
def test_soak_states_a_verdict_and_its_progress_reads_when_piped(
    monkeypatch, tmp_path, capsys, report, code, failing
):
    """It printed raw JSON with no verdict, always exited 0, and its \\r progress ran together
    in a pipe."""

    def fake_soak(model, seconds, progress, **kwargs):
        for frame in range(0, 3600, 600):
            progress(frame, 3600)
        return dict(report)

    monkeypatch.setattr(soak_module, "soak", fake_soak)
    assert main(["soak", "--hours", "0.1", "--json", str(tmp_path / "s.json")]) == code
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == ["soak: 0% simulated", "soak: 17% simulated"]
    assert not any("\r" in line for line in lines)
    assert all(any(line.startswith(f) for line in lines) for f in failing)
    assert sum(line.startswith("PASS ") for line in lines) == 5 - len(failing)
    assert lines[-1].startswith("canis soak: " + ("PASS" if code == 0 else "FAIL, 1 of 5 checks"))
    written = json.loads((tmp_path / "s.json").read_text())
    assert written["verdict"]["passed"] == (code == 0)

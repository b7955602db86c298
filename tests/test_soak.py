"""The one-minute soak that CI runs (canis soak --hours 1 is the full one)."""

from canis.tools.soak import soak


def test_one_simulated_minute_holds_up(tiny_model, tiny_rtn):
    report = soak(tiny_model, 60.0, characters=2, seed=3, transition_model_path=tiny_rtn)
    assert report["frames"] == 3600
    assert report["transitions"] > 0
    assert set(report["terrains"]) == {"flat", "hills"}  # 30 s each
    assert report["non_finite_model_outputs"] == 0 and report["non_finite_poses"] == 0
    assert report["max_bone_length_error"] < 1e-3  # 0.1%
    assert report["memory_growth_mb"] < 5.0
    assert report["frame_ms"]["p99"] > 0

"""The PFNN phase check's bad input, and the shipped PFNN's phase against its footfalls."""

from pathlib import Path

import pytest
from canis.runtime.assets import shipped_models_dir
from canis.training.pfnn_phase_check import closed_loop_figures, closed_loop_row, main

SHIPPED_MODELS = shipped_models_dir()

FIXTURES = Path(__file__).parent / "fixtures"


def test_models_that_are_not_files_or_not_pfnn_are_refused(capsys, tmp_path):
    with pytest.raises(SystemExit):
        main(["--no-labels", "--models", f"X={tmp_path / 'missing.onnx'}"])
    assert "--models: 'X=" in capsys.readouterr().err
    with pytest.raises(ValueError, match="tiny_mann4.onnx: is a mann model, not a PFNN"):
        closed_loop_row("M", FIXTURES / "tiny_mann4.onnx", "walk")


@pytest.mark.skipif(not (SHIPPED_MODELS / "pfnn.onnx").exists(), reason="no shipped PFNN")
def test_the_shipped_pfnns_phase_keeps_time_with_its_footfalls():
    """Walking, the shipped PFNN's left front paw lands (by the runtime's contacts) once a
    phase cycle, at the same phase each time: the network still follows its phase after the
    fine-tuning that brought its skating to the mocap's."""
    figures = closed_loop_figures(SHIPPED_MODELS / "pfnn.onnx", "walk")
    assert figures["planted_touchdowns_per_s"] == pytest.approx(figures["phase_hz"], rel=0.1)
    assert figures["planted_consistency"] > 0.9

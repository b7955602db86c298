"""The PFNN phase check's bad input and its closed-loop row on the tiny fixture models."""

from pathlib import Path

import pytest
from canis.training.pfnn_phase_check import closed_loop_row, main

FIXTURES = Path(__file__).parent / "fixtures"


def test_models_that_are_not_files_or_not_pfnn_are_refused(capsys, tmp_path):
    with pytest.raises(SystemExit):
        main(["--no-labels", "--models", f"X={tmp_path / 'missing.onnx'}"])
    assert "--models: 'X=" in capsys.readouterr().err
    with pytest.raises(ValueError, match="tiny_mann4.onnx: is a mann model, not a PFNN"):
        closed_loop_row("M", FIXTURES / "tiny_mann4.onnx", "walk")

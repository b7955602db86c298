"""The issue 17 ablation table is written from the measuring commands' files."""

import json

import pytest
from canis.training import finetune_ablation


def _entry(skating: float) -> dict:
    scenarios = ("walk", "canter", "turn")
    return {
        "skating_cm": dict.fromkeys(scenarios, skating),
        "stiffness_deg": dict.fromkeys(scenarios, 2.0),
        "path_cm": {"circle": 1.0, "square": 3.0},
        "path_deg": {"circle": 2.0, "square": 4.0},
        "gaits": {"0.5": {"verdict": "walk", "share": 0.8, "mean_speed_mps": 0.49}},
    }


def test_table_reads_every_figure_from_the_files(tmp_path, capsys):
    ev = {"GT": _entry(0.1) | {"path_cm": {}, "path_deg": {}}, "A": _entry(0.2)}
    (tmp_path / "ev.json").write_text(json.dumps(ev))
    (tmp_path / "m.txt").write_text(
        "progress line\n"
        + json.dumps({"validation_loss": 0.39812, "validation_closed_loop_loss": 0.77391})
    )
    runs = [{"untracked": {"speed_error": e}} for e in (0.1, 0.3)]
    (tmp_path / "card.json").write_text(json.dumps({"runs": runs}))
    row = f"plain=A:{tmp_path / 'm.txt'}:{tmp_path / 'card.json'}"
    assert (
        finetune_ablation.main(
            ["--ev", str(tmp_path / "ev.json"), "--row", row, "--row", "x=A:-:-"]
        )
        == 0
    )
    lines = capsys.readouterr().out.splitlines()
    assert lines[2].startswith("| mocap (GT) |") and "0.100 / 0.100 / 0.100" in lines[2]
    plain = lines[3]
    assert plain.startswith(
        "| plain | 0.3981 | 0.7739 | 0.200 / 0.200 / 0.200 | 2.00 / 2.00 / 2.00"
    )
    assert "| 2.0 | 3.0 | walk 80% 0.49 | 30% / 20% |" in plain
    assert lines[4].count("not measured") == 3


def test_bad_rows_are_named(tmp_path):
    with pytest.raises(
        ValueError, match="--row 'plain': expected LABEL=MODEL:MEASURE_JSON:CARD_JSON"
    ):
        finetune_ablation.parse_row("plain")
    (tmp_path / "ev.json").write_text(json.dumps({"GT": _entry(0.1)}))
    with pytest.raises(ValueError, match="--row p: model 'B' is not in the evaluation JSON"):
        finetune_ablation.main(["--ev", str(tmp_path / "ev.json"), "--row", "p=B:-:-"])

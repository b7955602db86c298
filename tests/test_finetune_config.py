"""`canis finetune --config`: a bad file is refused in one line naming the key before any work;
a run from a file records it, its card reproduces it with the file, and the same file from the
same start gives the same weights; the recipe's [finetune] table is such a file's settings."""

import json
import re
import tomllib
from pathlib import Path

import pytest
import torch
from canis.training import moving_skating

ROOT = Path(__file__).resolve().parent.parent


def test_the_recipes_finetune_table_is_a_config_of_the_kept_terms(tmp_path):
    """training/configs/mann8.toml's [finetune] table holds `canis finetune --config`'s keys,
    in range, reads the same written as a config file, and turns each term on."""
    from canis.training.finetune_config import (
        RUN_FIELDS,
        ClosedLoopConfig,
        FineTuneSettings,
        check_config_values,
        read_config,
    )
    from canis.training.finetune_stretches import TERMS

    path = ROOT / "training" / "configs" / "mann8.toml"
    table = tomllib.loads(path.read_text())["finetune"]
    values = check_config_values(dict(table), f"{path}: ", "finetune.")
    config = tmp_path / "mann8.json"
    config.write_text(json.dumps(table))
    assert read_config(config) == values
    loop = ClosedLoopConfig(**{k: v for k, v in values.items() if k not in RUN_FIELDS})
    assert all(getattr(loop, f"{term}_weight") > 0 for term in TERMS), loop
    run = {k: v for k, v in values.items() if k in RUN_FIELDS}
    assert FineTuneSettings(start="s", dataset="d", **run).epochs == table["epochs"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ({"epochs": 1, "moving_skating_wieght": 2}, r"unknown key moving_skating_wieght"),
        # A setting of a deleted term (finetune_config.DELETED_FIELDS) says it was deleted.
        ({"placed_speed_weight": 1.0}, r"placed_speed_weight: a setting this version no longer"),
        ({"moving_skating_weight": "2"}, r'moving_skating_weight "2": must be a number$'),
        ({"epochs": 1.5}, r"epochs 1.5: must be an integer$"),
        ({"moving_paws_swing": 1}, r"moving_paws_swing 1: must be true or false$"),
        ({"moving_skating_scale": 0}, r"moving_skating_scale 0.0: must be a finite number > 0$"),
        ({"moving_paws_down": 1.0}, r"moving_paws_down: needs moving_skating_weight$"),
        ({"epochs": 0}, r"epochs 0: must be at least 1$"),
        ({"dropout": 1.0}, r"dropout 1.0: must be at least 0 and below 1$"),
        ({"precision": "fp16"}, r"precision 'fp16': one of auto, bf16, fp32$"),
        ([1, 2], r"must hold a JSON object of settings$"),
    ],
)
def test_a_bad_config_is_refused_in_one_line_before_any_work(tmp_path, capsys, content, message):
    from canis.cli import main

    config = tmp_path / "bad.json"
    config.write_text(json.dumps(content))
    out = tmp_path / "run"
    # The start and the dataset do not exist: the file is refused before either is read.
    run = ["finetune", "--config", str(config), "--start", "no.onnx", "--out", str(out)]
    assert main([*run, "--dataset", str(tmp_path / "none.npz")]) == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert re.search(rf"{re.escape(str(config))}: .*{message}", error), error
    assert not out.exists()


def test_a_run_from_a_config_records_it_and_runs_again_the_same(
    tiny_dataset, tmp_path, monkeypatch
):
    from canis.export.finetune_card import fine_tuning_reproduce
    from canis.training.checkpoint import load_checkpoint
    from canis.training.train import LAST, train
    from conftest import finetune_run, tiny_config

    monkeypatch.setattr(moving_skating, "MIN_BIN_ROWS", 10)  # the synthetic clips are short
    train(tiny_config(tiny_dataset), tmp_path / "one_step", progress=False)
    start = tmp_path / "one_step" / LAST
    settings = {
        "epochs": 1, "steps_per_epoch": 2, "batch_size": 4, "seed": 3, "own_frames": 2,
        "contact_weight": 0.05, "moving_skating_weight": 2.0, "moving_paws_both_ways": True,
        "placed_dogs": 4, "precision": "fp32",
    }  # fmt: skip
    assert finetune_run(tiny_dataset, start, tmp_path / "first", **settings) == 0
    assert finetune_run(tiny_dataset, start, tmp_path / "again", **settings) == 0
    first, again = (load_checkpoint(tmp_path / n / LAST) for n in ("first", "again"))
    began = load_checkpoint(start).section("model/")
    for key, weights in first.section("model/").items():
        assert torch.equal(again.tensors[f"model/{key}"], weights), key
    # Alike by the settings, not by doing nothing: the run moved them, its terms all ran.
    assert any(not torch.equal(w, began[k]) for k, w in first.section("model/").items())
    header, row = (tmp_path / "first" / "log.csv").read_text().splitlines()
    logged = dict(zip(header.split(","), row.split(","), strict=True))
    assert float(logged["contact_term"]) > 0 and float(logged["moving_skating_term"]) > 0
    # The run's settings: the file's, in the checkpoint and in config.json beside it.
    loop = first.config["closed_loop"]
    assert {k: loop[k] for k in settings if k != "epochs"} == {
        k: v for k, v in settings.items() if k != "epochs"
    }
    assert first.config["closed_loop_epoch"] == 1 and loop == again.config["closed_loop"]
    used = json.loads((tmp_path / "first" / "config.json").read_text())
    assert {k: used[k] for k in settings} == settings and used["moving_dogs_per_step"] == 8
    config = tmp_path / "first.json"  # conftest.finetune_run's config file
    assert first.config["closed_loop_config"] == {"file": str(config), "values": settings}
    # The card reproduces it from the file; a checkpoint of an earlier epoch says so.
    line = fine_tuning_reproduce(first.config, Path("m.onnx"), LAST)
    assert f"`./run canis finetune --config {config} --start {start} --out runs/NAME` then" in line
    earlier = first.config | {"closed_loop_config": {"file": "x.json", "values": {"epochs": 3}}}
    line = fine_tuning_reproduce(earlier, Path("m.onnx"), LAST)
    assert "--config x.json" in line and "--out runs/NAME` (its first 1 epochs) then" in line
    unrecorded = {k: v for k, v in first.config.items() if k != "closed_loop_config"}
    line = fine_tuning_reproduce(unrecorded, Path("m.onnx"), LAST)
    assert line == "- **Reproduce**: not recorded (fine-tuned without a config file)."

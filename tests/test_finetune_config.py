"""`canis finetune --config`: the shipped recipes are config files holding exactly their cards'
Reproduce settings; a bad file is refused in one line naming the key before any work; a run
from a file is the run from the same flags, a flag given beside it overrides its key, and the
card reproduces it with the file."""

import json
import re
import shlex
from pathlib import Path

import pytest
import torch
from canis.training import finetune_moving

ROOT = Path(__file__).resolve().parent.parent


def _reproduce_values(card: Path) -> dict:
    """The settings `canis finetune`'s own parser reads from a card's Reproduce line."""
    from canis.training.finetune_config import config_fields

    from canis.cli import build_parser

    line = next(x for x in card.read_text().splitlines() if x.startswith("- **Reproduce**"))
    command = re.search(r"`\./run canis (finetune [^`]*)`", line).group(1)
    args = build_parser().parse_args(shlex.split(command))
    return {k: getattr(args, k) for k in config_fields() if getattr(args, k) is not None}


@pytest.mark.parametrize("name", ["mann8", "pfnn"])
def test_the_shipped_configs_are_the_cards_reproduce_lines(name):
    """Every flag of the Reproduce line is the file's key, every other key is its default."""
    from canis.training.finetune_config import ClosedLoopConfig, read_config

    path = ROOT / "training" / "configs" / f"{name}.json"
    values = read_config(path)
    given = _reproduce_values(ROOT / "assets" / "models" / f"{name}.md")
    assert {k: values[k] for k in given} == given
    defaults = ClosedLoopConfig().identity() | {"precision": "auto", "dropout": None}
    rest = {k: v for k, v in values.items() if k not in given}
    assert all(defaults.get(k, v) == v for k, v in rest.items()), rest


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ({"epochs": 1, "moving_skating_wieght": 2}, r"unknown key moving_skating_wieght"),
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


def test_a_run_from_a_config_is_the_run_from_its_flags(tiny_dataset, tmp_path, monkeypatch):
    from canis.export.finetune_card import fine_tuning_reproduce
    from canis.training.checkpoint import load_checkpoint
    from canis.training.train import LAST, train
    from conftest import tiny_config

    from canis.cli import main

    monkeypatch.setattr(finetune_moving, "MIN_BIN_ROWS", 10)  # the synthetic clips are short
    train(tiny_config(tiny_dataset), tmp_path / "one_step", progress=False)
    start = ["--start", str(tmp_path / "one_step" / LAST), "--dataset", str(tiny_dataset)]
    settings = {
        "epochs": 1, "steps_per_epoch": 2, "batch_size": 4, "seed": 3, "own_frames": 2,
        "contact_weight": 0.05, "placed_speed_weight": 1.0, "moving_skating_weight": 2.0,
        "moving_paws_both_ways": True, "placed_dogs": 4, "precision": "fp32",
    }  # fmt: skip
    config = tmp_path / "recipe.json"
    config.write_text(json.dumps(settings))
    flags = []
    for key, value in settings.items():
        flags += [f"--{key.replace('_', '-')}"] + ([] if value is True else [str(value)])
    assert main(["finetune", *start, "--out", str(tmp_path / "flags"), *flags]) == 0
    assert main(["finetune", *start, "--out", str(tmp_path / "file"), "--config", str(config)]) == 0
    by_flags, by_file = (load_checkpoint(tmp_path / n / LAST) for n in ("flags", "file"))
    for key, weights in by_flags.section("model/").items():
        assert torch.equal(by_file.tensors[f"model/{key}"], weights), key
    unlike = ("start",)  # each run's converted start lies in its own folder
    assert {k: v for k, v in by_file.config["closed_loop"].items() if k not in unlike} == {
        k: v for k, v in by_flags.config["closed_loop"].items() if k not in unlike
    }
    assert json.loads((tmp_path / "file" / "config.json").read_text())["seed"] == 3
    # The card reproduces it from the file; a flag given beside it overrides its key.
    line = fine_tuning_reproduce(by_file.config, Path("m.onnx"), LAST)
    assert f"canis finetune --config {config} --start {start[1]} --out runs/NAME`" in line
    other = ["--out", str(tmp_path / "other"), "--config", str(config), "--seed", "4"]
    assert main(["finetune", *start, *other]) == 0
    tuned = load_checkpoint(tmp_path / "other" / LAST).config
    assert tuned["closed_loop"]["seed"] == 4
    line = fine_tuning_reproduce(tuned, Path("m.onnx"), LAST)
    assert f"--config {config} --start {start[1]} --out runs/NAME --seed 4`" in line
    # A run from flags alone lists every setting.
    line = fine_tuning_reproduce(by_flags.config, Path("m.onnx"), LAST)
    assert "--config" not in line and "--moving-skating-weight 2.0 --moving-paws-both-ways" in line

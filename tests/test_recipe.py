"""`canis train --config RECIPE.toml`: one command from the raw BVH to the exported ONNX files,
resumable, refusing a bad recipe or a changed one before any work (export/recipe.py)."""

from pathlib import Path

import pytest
from canis.export.recipe_config import read_recipe

from canis.cli import main

ROOT = Path(__file__).resolve().parents[1]

TINY = """
name = "tiny"
[data]
bvh = "{clips}"
[train]
model = "mann"
experts = 2
hidden = 16
epochs = 1
batch_size = 64
seed = {seed}
precision = "fp32"
[export]
precisions = ["fp32", "int8"]
card_seconds = 0.5
"""


@pytest.fixture(scope="module")
def clips(tmp_path_factory) -> Path:
    from synthetic_dog import standard_clips

    folder = tmp_path_factory.mktemp("recipe") / "clips"
    standard_clips(folder)
    return folder


def _recipe(folder: Path, clips: Path, seed: int = 3, name: str = "tiny.toml") -> Path:
    path = folder / name
    path.write_text(TINY.format(clips=clips, seed=seed))
    return path


def test_one_command_from_bvh_to_onnx_then_resume_and_refusals(clips, tmp_path, capsys):
    recipe, run = _recipe(tmp_path, clips), tmp_path / "run"
    assert main(["train", "--config", str(recipe), "--out", str(run)]) == 0
    for name in ("recipe.toml", "dog_dataset.npz", "train/last.safetensors", "tiny.onnx",
                 "tiny.md", "tiny.int8.onnx", "tiny.int8.md"):  # fmt: skip
        assert (run / name).exists(), name
    command = f"`./run canis train --config {recipe} --out runs/NAME`"
    assert f"**Reproduce**: {command}" in (run / "tiny.md").read_text()
    assert f"**Reproduce**: {command}" in (run / "tiny.int8.md").read_text()

    # The same command again is refused: the run is never overwritten unasked.
    capsys.readouterr()
    assert main(["train", "--config", str(recipe), "--out", str(run)]) == 2
    assert "already holds a run" in capsys.readouterr().err

    # --resume: every finished stage is skipped (training is not run again).
    weights = (run / "train/last.safetensors").read_bytes()
    assert main(["train", "--config", str(recipe), "--out", str(run), "--resume"]) == 0
    out = capsys.readouterr().out
    assert "train: " in out and "done)" in out and "dataset: " in out and "(built)" in out
    assert (run / "train/last.safetensors").read_bytes() == weights

    # A resume with another recipe is refused naming the setting, and changes nothing.
    other = _recipe(tmp_path, clips, seed=4, name="other.toml")
    before = {p: p.stat().st_mtime_ns for p in run.rglob("*")}
    assert main(["train", "--config", str(other), "--out", str(run), "--resume"]) == 2
    assert "train.seed" in capsys.readouterr().err
    assert {p: p.stat().st_mtime_ns for p in run.rglob("*")} == before


BAD = [
    ("name = ", "not a readable TOML recipe"),
    ('name = "x"\n[train]\nmodel = "mann"\nseed = 1\n[trian]\n', "unknown table [trian]"),
    ('name = "x"\n[train]\nmodel = "mann"\nseed = 1\nsead = 2\n', "unknown key train.sead"),
    ('name = "x"\n[train]\nmodel = "mann"\nseed = "1"\n', "train.seed = '1': must be an integer"),
    ('name = "x"\n[train]\nmodel = "mann"\n', "missing train.seed"),
    ('[train]\nmodel = "mann"\nseed = 1\n', "missing name"),
    ('name = "x"\n[train]\nmodel = "mlp"\nseed = 1\n', "train.model = 'mlp'"),
    ('name = "x"\n[train]\nmodel = "mann"\nseed = 1\ndropout = 1.5\n', "train.dropout"),
    ('name = "x"\n[train]\nmodel = "mann"\nseed = 1\n[finetune]\nlrr = 1\n', "finetune.lrr"),
    ('name = "x"\n[train]\nmodel = "mann"\nseed = 1\n[export]\nprecisions = ["int4"]\n',
     "export.precisions"),
]  # fmt: skip


@pytest.mark.parametrize("text, message", BAD)
def test_a_bad_recipe_is_refused_in_one_line_naming_the_key(tmp_path, capsys, text, message):
    recipe, run = tmp_path / "bad.toml", tmp_path / "run"
    recipe.write_text(text)
    assert main(["train", "--config", str(recipe), "--out", str(run)]) == 2
    err = capsys.readouterr().err
    assert message in err and str(recipe) in err and err.count("\n") == 1
    assert not run.exists()  # refused before any work


def test_training_flags_beside_a_recipe_are_refused(tmp_path, capsys):
    recipe = ROOT / "training/configs/mann8.toml"
    args = ["train", "--config", str(recipe), "--out", str(tmp_path / "run"), "--seed", "4"]
    assert main(args) == 2
    assert "--seed belong in the recipe file" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("name", ["mann8", "pfnn"])
def test_the_shipped_recipes_read(name):
    recipe = read_recipe(ROOT / f"training/configs/{name}.toml")
    assert recipe["name"] == name and recipe["train"]["model"] == name[:4]


def test_a_recipe_with_fine_tuning_exports_the_fine_tuned_network(clips, tmp_path, capsys):
    recipe, run = _recipe(tmp_path, clips), tmp_path / "run"
    recipe.write_text(
        recipe.read_text().replace('precisions = ["fp32", "int8"]', 'precisions = ["fp32"]')
        + "[finetune]\nepochs = 1\nsteps_per_epoch = 2\nbatch_size = 4\nown_frames = 4\n"
        "ground_truth_frames = 2\n"
    )
    assert main(["train", "--config", str(recipe), "--out", str(run)]) == 0
    assert "finetune/last.safetensors" in capsys.readouterr().out
    assert (run / "finetune/last.safetensors").exists() and (run / "tiny.onnx").exists()
    assert not (run / "tiny.int8.onnx").exists()
    assert main(["train", "--config", str(recipe), "--out", str(run), "--resume"]) == 0
    assert "finetune: " in capsys.readouterr().out

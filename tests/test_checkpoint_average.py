"""`canis average` (training/checkpoint_average.py): the mean of one network's checkpoints, the
sources named in the config, the model card and its Reproduce line; checkpoints that cannot be
averaged refused, naming why."""

import numpy as np
import pytest
import torch


@pytest.fixture(scope="module")
def kept_epochs(tiny_dataset, tmp_path_factory):
    """A two-epoch fine-tune of a tiny MANN-4 with each epoch's checkpoint kept (the first
    epoch's copied out before the run is resumed for the second)."""
    import shutil

    from canis.training.train import LAST, train
    from conftest import tiny_config

    from canis.cli import main

    folder = tmp_path_factory.mktemp("average")
    train(tiny_config(tiny_dataset), folder / "one_step", progress=False)
    run = folder / "run"
    finetune = "finetune --steps-per-epoch 2 --batch-size 4 --own-frames 2 --seed 3".split()
    start = ["--start", str(folder / "one_step" / LAST), "--dataset", str(tiny_dataset)]
    for epochs, resume in (("1", []), ("2", ["--resume"])):
        assert main([*finetune, *start, "--out", str(run), "--epochs", epochs, *resume]) == 0
        shutil.copyfile(run / LAST, run / f"e{epochs}.safetensors")
    return folder, run


def test_a_runs_kept_epochs_average_to_their_mean(kept_epochs, tiny_dataset, capsys):
    from canis.training.checkpoint import load_checkpoint

    from canis.cli import main

    folder, run = kept_epochs
    first, second = (load_checkpoint(run / f"e{n}.safetensors") for n in (1, 2))
    assert first.config["closed_loop_epoch"] == 1 and second.config["closed_loop_epoch"] == 2
    # the last epoch's file is last.safetensors's
    assert (run / "e2.safetensors").read_bytes() == (run / "last.safetensors").read_bytes()
    out = run / "average.safetensors"
    epochs = [str(run / "e1.safetensors"), str(run / "e2.safetensors")]
    assert main(["average", *epochs, "--out", str(out)]) == 0
    assert "the mean of e1.safetensors, e2.safetensors" in capsys.readouterr().out
    mean = load_checkpoint(out)
    weights = first.section("model/")
    assert weights  # the averaged tensors are the model's, each the mean
    moved = 0
    for key, value in weights.items():
        other = second.tensors[f"model/{key}"]
        np.testing.assert_allclose(
            mean.tensors[f"model/{key}"].double(), (value.double() + other.double()) / 2, atol=1e-7
        )
        moved += not torch.equal(value, other)
    assert moved  # the epochs differ: the mean is neither
    assert not any(k.startswith("optim/") for k in mean.tensors)
    for key, value in first.section("norm/").items():
        assert torch.equal(mean.tensors[f"norm/{key}"], value)
    sources = mean.config["averaged_from"]
    assert [s["closed_loop_epoch"] for s in sources] == [1, 2] and sources[0]["seed"] == 3
    assert mean.config["closed_loop_epoch"] == 2  # the last source's run
    # The card names the sources and reproduces the mean from them.
    model = folder / "average.onnx"
    export = ["export", str(out), "--out", str(model), "--dataset", str(tiny_dataset)]
    assert main([*export, "--card", "--card-seconds", "1"]) == 0
    card = model.with_suffix(".md").read_text()
    assert "- **Averaged** (`canis average`" in card
    assert "`e1.safetensors`, epoch 1, seed 3" in card and "`e2.safetensors`, epoch 2" in card
    assert (
        f"` then `./run canis average {run}/e1.safetensors "
        f"{run}/e2.safetensors --out runs/NAME/average.safetensors` then `./run canis "
        "export runs/NAME/average.safetensors" in card
    )
    # A mean written over a run's last checkpoint is reproduced beside it, not over it.
    over_last = folder / "over_last"
    over_last.mkdir()
    (over_last / "log.csv").write_bytes((run / "log.csv").read_bytes())
    assert main(["average", *epochs, "--out", str(over_last / "last.safetensors")]) == 0
    export = ["export", str(over_last / "last.safetensors"), "--out", str(folder / "o.onnx")]
    assert main([*export, "--dataset", str(tiny_dataset), "--card", "--card-seconds", "1"]) == 0
    card = (folder / "o.md").read_text()
    assert "--out runs/NAME/average.safetensors` then `./run canis export runs/NAME/average" in card
    # A fine-tune starts from it.
    one_epoch = "finetune --epochs 1 --steps-per-epoch 1 --batch-size 4 --own-frames 2".split()
    start = ["--start", str(out), "--dataset", str(tiny_dataset)]
    assert main([*one_epoch, *start, "--out", str(folder / "from_mean")]) == 0
    # ... and what it writes is that run's, not a mean: its card says so and reproduces the
    # fine-tune from the mean, with no averaging step after it.
    tuned = load_checkpoint(folder / "from_mean" / "last.safetensors")
    assert "averaged_from" not in tuned.config
    model = folder / "from_mean.onnx"
    export = ["export", str(folder / "from_mean" / "last.safetensors"), "--out", str(model)]
    assert main([*export, "--dataset", str(tiny_dataset), "--card", "--card-seconds", "1"]) == 0
    card = model.with_suffix(".md").read_text()
    assert "**Averaged**" not in card and "canis average" not in card
    assert f"--start {out} " in card


def test_checkpoints_that_cannot_be_averaged_are_refused(kept_epochs, tiny_dataset, tmp_path):
    from canis.training.checkpoint import load_checkpoint, write_checkpoint
    from canis.training.checkpoint_average import average_checkpoints
    from canis.training.train import train
    from conftest import tiny_config

    _, run = kept_epochs
    e1, e2 = run / "e1.safetensors", run / "e2.safetensors"
    with pytest.raises(ValueError, match="1 checkpoint given: needs two or more to average"):
        average_checkpoints([e1], tmp_path / "mean.safetensors")
    with pytest.raises(ValueError, match="is one of the checkpoints averaged"):
        average_checkpoints([e1, e2], e1)
    pfnn = tmp_path / "pfnn"
    train(tiny_config(tiny_dataset, kind="pfnn"), pfnn, progress=False)
    with pytest.raises(ValueError, match="kind 'pfnn', but .* has 'mann'"):
        average_checkpoints([e1, pfnn / "last.safetensors"], tmp_path / "mean.safetensors")
    checkpoint = load_checkpoint(e2)
    restandardised = dict(checkpoint.tensors)
    key = next(k for k in restandardised if k.startswith("norm/"))
    restandardised[key] = restandardised[key] * 1.01
    other_data = tmp_path / "other_data.safetensors"
    write_checkpoint(other_data, restandardised, checkpoint.config)
    with pytest.raises(ValueError, match=f"standardised otherwise .*\\({key} differs\\)"):
        average_checkpoints([e1, other_data], tmp_path / "mean.safetensors")
    cut = dict(checkpoint.tensors)
    dropped = next(k for k in cut if k.startswith("model/"))
    del cut[dropped]
    smaller = tmp_path / "smaller.safetensors"
    write_checkpoint(smaller, cut, checkpoint.config)
    with pytest.raises(ValueError, match=f"does not fit .* missing {dropped}"):
        average_checkpoints([e1, smaller], tmp_path / "mean.safetensors")
    assert not (tmp_path / "mean.safetensors").exists()  # nothing written by a refusal

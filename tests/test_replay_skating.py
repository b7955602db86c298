"""The replay-skating term (training/replay_skating.py), on the paws as the runtime draws them:
nothing for a dog that skates no more than its clip did on the same frames and stands no
higher, and one dog's margin does not pay for another's excess; in a fine-tuning run it is
logged and named on the card, and data too short to replay is refused by name."""

import numpy as np
import pytest
import torch
from canis.runtime.features import FPS, INPUT, OUTPUT, PAW_ROWS
from canis.training.replay_skating import replay_skating_loss
from canis.training.shown_pose import shown_positions_m

X_HIPS = INPUT.field(np.arange(INPUT.size), "joints", "position")[0]
Y_HIPS = OUTPUT.field(np.arange(OUTPUT.size), "joints", "position")[0]
Y_HIPS_VELOCITY = OUTPUT.field(np.arange(OUTPUT.size), "joints", "velocity")[0]


def _steps(
    slide_cm_per_frame: np.ndarray, lowered_m: float = 0.002
) -> tuple[torch.Tensor, torch.Tensor]:
    """x, y rows of a dog in its axes' rest pose, its paws under the ground by `lowered_m` or
    more (the clip's at 0: the dogs' lowest paws below the clip's), sliding forward (+z) with
    its hips by the given distances (rows,) in one frame, the root still."""
    rows = len(slide_cm_per_frame)
    x, y = torch.zeros(rows, INPUT.size), torch.zeros(rows, OUTPUT.size)
    for layout, values in ((INPUT, x), (OUTPUT, y)):
        for field, axis in (("forward", 2), ("up", 1)):
            values[:, layout.field(np.arange(layout.size), "joints", field)[:, axis]] = 1.0
    rest = shown_positions_m(OUTPUT, y, torch.zeros(rows, 3))[:, list(PAW_ROWS), 1]
    x[:, X_HIPS[1]] = y[:, Y_HIPS[1]] = -rest.max() - lowered_m  # the highest paw down
    slide_m = torch.as_tensor(slide_cm_per_frame / 100.0, dtype=torch.float32)
    y[:, Y_HIPS[2]] = slide_m  # predicted there, and advanced there by its velocity
    y[:, Y_HIPS_VELOCITY[2]] = slide_m * FPS
    return x, y


def test_each_dog_pays_its_own_excess_over_its_clip():
    mocap_x, mocap_y = _steps(np.full(8, 0.1), 0.0)  # 2 dogs of 4 rows; the clip slides 0.1 cm
    # As the clip, and less than it: nothing.
    for slide in (0.1, 0.02):
        x, y = _steps(np.full(8, slide))
        assert replay_skating_loss(x, y, mocap_x, mocap_y, 2).item() < 1e-7
    # The first dog slides 0.4 cm a frame, the second none: the first's 0.3 over, halved.
    x, y = _steps(np.array([0.4] * 4 + [0.0] * 4))
    y.requires_grad_()
    loss = replay_skating_loss(x, y, mocap_x, mocap_y, 2)
    np.testing.assert_allclose(loss.item(), 0.3 / 2, rtol=1e-4)
    loss.backward()  # it slows the first dog's paws and leaves the second's alone
    assert (y.grad[:4, Y_HIPS[2]] > 0).all() and (y.grad[4:] == 0).all()
    # Paws lifted 2.5 cm or more do not skate, however they move, but pay for the height:
    # every paw's lowest 29.8 cm above the clip's.
    y_lifted = y.detach().clone()
    y_lifted[:, Y_HIPS[1]] += 0.6  # shown 0.3 higher: the blend takes half
    np.testing.assert_allclose(
        replay_skating_loss(x, y_lifted, mocap_x, mocap_y, 2).item(), 29.8, rtol=1e-4
    )
    # A dog standing lower than its clip costs nothing for it.
    x_still, y_still = _steps(np.full(8, 0.1), 0.2)
    assert replay_skating_loss(x_still, y_still, mocap_x, mocap_y, 2).item() < 1e-6
    assert replay_skating_loss(x[:0], y[:0], mocap_x[:0], mocap_y[:0], 0).item() == 0.0
    assert FPS == 60  # the distances above are per frame at the contract's rate


def _finetune(tiny_dataset, tmp_path, out, *extra) -> int:
    from canis.training.train import LAST, train
    from conftest import tiny_config

    from canis.cli import main

    start = tmp_path / "one_step"
    if not (start / LAST).exists():
        train(tiny_config(tiny_dataset), start, progress=False)
    run = [
        "finetune", "--start", str(start / LAST), "--dataset", str(tiny_dataset),
        "--out", str(out), "--epochs", "1", "--steps-per-epoch", "2", "--batch-size", "4",
        "--own-frames", "3", "--placed-dogs", "4", "--replay-skating-weight", "2",
        "--contact-weight", "0.1", "--contact-paws", "drawn", *extra,
    ]  # fmt: skip
    return main(run)


def test_finetune_logs_the_term_and_the_card_names_it(tiny_dataset, tmp_path, monkeypatch, capsys):
    from canis.training import replay_skating
    from canis.training.train import LAST

    from canis.cli import main

    # The synthetic clips are 3-4 s: 2 s of replay and a second of history each side is more.
    assert _finetune(tiny_dataset, tmp_path, tmp_path / "short") == 2
    error = capsys.readouterr().err
    assert "--replay-skating-weight: no training clip is long enough to replay 120" in error
    monkeypatch.setattr(replay_skating, "REPLAY_FRAMES", replay_skating.SKIPPED_FRAMES + 10)
    out = tmp_path / "replay"
    assert _finetune(tiny_dataset, tmp_path, out) == 0
    header, row = (out / "log.csv").read_text().splitlines()
    logged = dict(zip(header.split(","), row.split(","), strict=True))
    assert float(logged["replay_skating_term"]) > 0  # an untrained dog skates
    assert float(logged["rollout_seconds"]) > 0
    tuned = tmp_path / "replay.onnx"
    export = ["export", str(out / LAST), "--out", str(tuned), "--dataset", str(tiny_dataset)]
    assert main([*export, "--card", "--card-seconds", "1"]) == 0
    card = tuned.with_suffix(".md").read_text()
    assert "--replay-skating-weight 2.0 --placed-dogs 4" in card
    assert "replay-skating weight 2.0 on 4 replaying dogs" in card
    assert "--contact-paws drawn" in card and "contact weight 0.1 on the drawn paws" in card
    assert float(logged["contact_term"]) > 0


@pytest.mark.parametrize("weight", ["-1", "nan"])
def test_a_bad_weight_is_refused(tiny_dataset, tmp_path, capsys, weight):
    from canis.cli import main

    run = [
        "finetune", "--start", str(tmp_path / "none.safetensors"), "--dataset",
        str(tiny_dataset), "--out", str(tmp_path / "out"), "--replay-skating-weight", weight,
    ]  # fmt: skip
    assert main(run) == 2
    assert f"--replay-skating-weight {float(weight)}: must be finite and >= 0" in (
        capsys.readouterr().err
    )


def test_the_measure_reads_the_replaying_dogs(tiny_dataset, tiny_model, monkeypatch):
    """`python -m canis.training.replay_skating`: the term's dogs measured for a model, the
    drawn and predicted paws and the mocap's on the same frames."""
    from canis.training import replay_skating

    monkeypatch.setattr(replay_skating, "REPLAY_FRAMES", replay_skating.SKIPPED_FRAMES + 10)
    figures = replay_skating.measure([tiny_model], tiny_dataset, dogs=3)[str(tiny_model)]
    assert set(figures) == {"predicted", "drawn", "mocap", "paws_down", "mocap_paws_down"}
    assert all(np.isfinite(v) and v >= 0 for v in figures.values())
    assert figures["paws_down"] <= 1 and figures["mocap_paws_down"] > 0

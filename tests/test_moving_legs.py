"""The moving-legs term (training/finetune_moving.py): the mocap's leg motion by speed from its
locomotion frames; nothing for a dog whose legs turn as much as that (or more, or within the
allowance), a gradient that swings them further where they fall short; the fine-tuning logs it
and the card names it."""

import numpy as np
import pytest
import torch
from canis.runtime.features import OUTPUT
from canis.training import finetune_moving
from canis.training.finetune_losses import leg_turn_deg
from canis.training.finetune_moving import (
    LEG_ALLOWANCE,
    MOVE,
    leg_turn_by_speed,
    moving_legs_loss,
    reference_at,
)
from test_leg_motion_loss import _damped, _trot_pairs

VELOCITY = OUTPUT.field(np.arange(OUTPUT.size), "root_update", "velocity")[0]


def test_the_reference_is_the_mocaps_legs_by_speed():
    _, x, y, _ = _trot_pairs()
    # Two speeds' worth of the same trot: every row once at 1.5 m/s as captured, and once at
    # 0.5 m/s with its legs moved only half as far.
    x_t = torch.as_tensor(np.concatenate([x, x]))
    y_t = torch.as_tensor(np.concatenate([y, y]))
    half = len(x)
    y_t[:, VELOCITY] = torch.tensor([0.0, 1.5])
    y_t[:half, VELOCITY[1]] = 0.5
    y_t[:half] = _damped(x_t[:half], y_t[:half], 0.5)
    action = np.full(len(x_t), MOVE)
    with pytest.raises(ValueError, match="too few locomotion frames"):
        leg_turn_by_speed(x_t, y_t, action)  # fewer than MIN_BIN_ROWS in each bin
    x_t, y_t = x_t.repeat(30, 1), y_t.repeat(30, 1)
    action = np.tile(action, 30)
    # Rows not asked to move are left out of the reference: one copy's, moved to 2.5 m/s,
    # would make a third bin if they counted.
    action[: 2 * half] = MOVE + 1
    y_t[: 2 * half, VELOCITY[1]] = 2.5
    centres, turn = leg_turn_by_speed(x_t, y_t, action)
    assert len(centres) == 2 and turn.shape == (2, leg_turn_deg(x_t[:1], y_t[:1]).shape[1])
    slow, fast = (abs(centres - 0.5) < 0.1), (abs(centres - 1.5) < 0.1)
    np.testing.assert_allclose(turn[slow].mean(), 0.5 * turn[fast].mean(), rtol=0.1)
    between = reference_at(centres, turn, np.array([0.3, centres.mean(), 3.0]))
    np.testing.assert_allclose(between[0], turn[slow][0])  # the end bins' beyond them
    np.testing.assert_allclose(between[1], turn.mean(0), rtol=1e-6)
    np.testing.assert_allclose(between[2], turn[fast][0])


def test_only_the_shortfall_beyond_the_allowance_counts():
    _, x, y, _ = _trot_pairs()
    x_t, y_t = torch.as_tensor(x[10:58]), torch.as_tensor(y[10:58])  # 3 dogs of 16 steps
    truth = leg_turn_deg(x_t, y_t).reshape(3, 16, -1).mean(1)
    assert moving_legs_loss(x_t, y_t, truth).item() == 0.0
    assert moving_legs_loss(x_t, y_t, truth * (1 + 0.9 * LEG_ALLOWANCE)).item() == 0.0
    assert moving_legs_loss(x_t, y_t, 0.5 * truth).item() == 0.0  # more motion is free
    # ... unless both ways count: then the excess beyond the allowance does.
    expected = ((truth - 0.5 * truth) - 0.5 * truth * LEG_ALLOWANCE).square().mean()
    both = moving_legs_loss(x_t, y_t, 0.5 * truth, both_ways=True)
    np.testing.assert_allclose(both.item(), expected.item(), rtol=1e-5)
    assert moving_legs_loss(x_t, y_t, truth, both_ways=True).item() == 0.0
    damped = _damped(x_t, y_t, 0.3).requires_grad_(True)
    loss = moving_legs_loss(x_t, damped, truth)
    turned = leg_turn_deg(x_t, damped).reshape(3, 16, -1).mean(1).detach()
    expected = (truth * (1 - LEG_ALLOWANCE) - turned).clamp(min=0).square().mean()
    np.testing.assert_allclose(loss.item(), expected.item(), rtol=1e-5)
    assert loss.item() > 0.1
    loss.backward()  # a gradient that swings the legs further
    stepped = damped.detach() - 1e-3 * damped.grad
    assert moving_legs_loss(x_t, stepped, truth).item() < loss.item()
    assert moving_legs_loss(x_t[:0], y_t[:0], truth[:0]).item() == 0.0


def test_only_the_counted_dogs_pay_and_the_mean_stays_over_all():
    """--moving-legs-below-mps: a dog not counted (asked too fast) pays nothing, and the
    counted dogs' cost is divided over all the dogs as before."""
    _, x, y, _ = _trot_pairs()
    x_t, y_t = torch.as_tensor(x[10:58]), torch.as_tensor(y[10:58])  # 3 dogs of 16 steps
    damped = _damped(x_t, y_t, 0.3)
    truth = leg_turn_deg(x_t, y_t).reshape(3, 16, -1).mean(1)
    every = moving_legs_loss(x_t, damped, truth)
    assert every.item() > 0.1
    all_counted = moving_legs_loss(x_t, damped, truth, counted=torch.tensor([True] * 3))
    np.testing.assert_allclose(all_counted.item(), every.item(), rtol=1e-6)
    assert moving_legs_loss(x_t, damped, truth, counted=torch.tensor([False] * 3)).item() == 0
    per_dog = [
        moving_legs_loss(x_t[16 * d : 16 * d + 16], damped[16 * d : 16 * d + 16], truth[d : d + 1])
        for d in range(3)
    ]
    first_only = moving_legs_loss(x_t, damped, truth, counted=torch.tensor([True, False, False]))
    np.testing.assert_allclose(first_only.item(), per_dog[0].item() / 3, rtol=1e-5)


def _finetune_args(tiny_dataset, tmp_path, monkeypatch, out, weight: str) -> list[str]:
    """`canis finetune` arguments for one short epoch of the moving-legs term at `weight`, from
    a one-step network trained on the synthetic dogs (whose clips are short: the reference's
    bins may hold fewer rows)."""
    from canis.training.train import LAST, train
    from conftest import tiny_config

    monkeypatch.setattr(finetune_moving, "MIN_BIN_ROWS", 10)
    start = tmp_path / "one_step"
    train(tiny_config(tiny_dataset), start, progress=False)
    return [
        "finetune", "--start", str(start / LAST), "--dataset", str(tiny_dataset),
        "--out", str(out), "--epochs", "1", "--steps-per-epoch", "2", "--batch-size", "4",
        "--own-frames", "3", "--placed-dogs", "4", "--moving-legs-weight", weight,
    ]  # fmt: skip


def test_finetune_logs_the_term_and_the_card_names_it(tiny_dataset, tmp_path, monkeypatch, capsys):
    from canis.training.placed_speed import MovingDogs
    from canis.training.train import LAST

    from canis.cli import main

    refreshed = []
    refresh = MovingDogs.refresh

    def counted(dogs, generator):
        refreshed.append(dogs.dogs)
        return refresh(dogs, generator)

    monkeypatch.setattr(MovingDogs, "refresh", counted)
    out = tmp_path / "legs"
    run = [
        *_finetune_args(tiny_dataset, tmp_path, monkeypatch, out, "3"),
        "--placed-refresh-steps", "1",
    ]  # fmt: skip
    assert main(run) == 0
    assert len(refreshed) == 2  # at the epoch's start and after its first step
    header, row = (out / "log.csv").read_text().splitlines()
    logged = dict(zip(header.split(","), row.split(","), strict=True))
    assert float(logged["moving_legs_term"]) > 0  # an untrained dog's legs hardly move
    assert float(logged["placed_speed_term"]) > 0  # measured on the same dogs, weight 0
    tuned = tmp_path / "legs.onnx"
    export = ["export", str(out / LAST), "--out", str(tuned), "--dataset", str(tiny_dataset)]
    assert main([*export, "--card", "--card-seconds", "1"]) == 0
    card = tuned.with_suffix(".md").read_text()
    assert "--moving-legs-weight 3.0 --placed-dogs 4" in card
    assert "moving-legs weight 3.0 on 4 moving dogs" in card
    assert "--placed-refresh-steps 1" in card
    # A resume with the dogs refreshed otherwise is another loss configuration.
    assert main([*run[:-2], "--epochs", "2", "--resume"]) == 2
    assert "placed_refresh_steps 1 (now 0)" in capsys.readouterr().err
    assert main([*run[:-1], "-1"]) == 2
    assert "--placed-refresh-steps -1: must be 0 (each epoch) or more" in capsys.readouterr().err
    # Over stretches of 4 steps, the pose fed back with its gradient.
    unrolled = tmp_path / "unrolled"
    assert main([*run[:6], str(unrolled), *run[7:], "--moving-unroll-frames", "4"]) == 0
    header, row = (unrolled / "log.csv").read_text().splitlines()
    logged = dict(zip(header.split(","), row.split(","), strict=True))
    assert np.isfinite(float(logged["moving_legs_term"]))
    export = ["export", str(unrolled / LAST), "--out", str(tmp_path / "unrolled.onnx")]
    assert main([*export, "--dataset", str(tiny_dataset), "--card", "--card-seconds", "1"]) == 0
    assert "--moving-unroll-frames 4" in (tmp_path / "unrolled.md").read_text()
    assert main([*run[:-4], "--moving-legs-both-ways"]) == 2
    assert "--moving-legs-both-ways: needs --moving-legs-weight" in capsys.readouterr().err
    assert main([*run[:-4], "--moving-legs-below-mps", "1.2"]) == 2
    assert "--moving-legs-below-mps: needs --moving-legs-weight" in capsys.readouterr().err
    assert main([*run, "--moving-legs-below-mps", "nan"]) == 2
    assert "--moving-legs-below-mps nan: must be a finite speed" in capsys.readouterr().err
    walking = tmp_path / "walking"
    assert main([*run[:6], str(walking), *run[7:], "--moving-legs-below-mps", "1.2"]) == 0
    export = ["export", str(walking / LAST), "--out", str(tmp_path / "walking.onnx")]
    assert main([*export, "--dataset", str(tiny_dataset), "--card", "--card-seconds", "1"]) == 0
    card = (tmp_path / "walking.md").read_text()
    assert "--moving-legs-weight 3.0 --moving-legs-below-mps 1.2" in card
    assert "moving-legs weight 3.0 on 4 moving dogs, those asked under 1.2 m/s" in card
    assert main([*run, "--moving-unroll-frames", "17"]) == 2
    assert "--moving-unroll-frames 17: must be between 1 and 16" in capsys.readouterr().err


def test_a_non_finite_step_stops_the_run_and_keeps_the_checkpoint(
    tiny_dataset, tmp_path, monkeypatch, capsys
):
    """A loss or gradient that is not finite stops the fine-tuning before the optimiser steps,
    naming the epoch, the step and the terms; the run's checkpoint stays as the last finished
    epoch wrote it."""
    from canis.training.placed_speed import MovingDogs
    from canis.training.train import LAST

    from canis.cli import main

    out = tmp_path / "run"
    run = _finetune_args(tiny_dataset, tmp_path, monkeypatch, out, "1")
    assert main(run) == 0
    saved = (out / LAST).read_bytes()
    measured = MovingDogs.loss

    def poisoned(dogs, predict, count, generator):
        speed, legs, skating, course = measured(dogs, predict, count, generator)
        return speed, legs * float("nan"), skating, course

    monkeypatch.setattr(MovingDogs, "loss", poisoned)
    assert main([*run[:8], "2", *run[9:], "--resume"]) == 2
    error = capsys.readouterr().err
    assert "fine-tuning epoch 2, step 1: the loss (nan) or its gradient is not finite" in error
    assert "moving_legs nan" in error
    assert (out / LAST).read_bytes() == saved

"""The moving-skating term (training/moving_skating.py): the mocap's shown paws by speed from its
locomotion frames; nothing for a dog that skates no more than that and carries its paws no
higher (beyond the allowance), each dog paying its own excess; the fine-tuning logs it, refreshes
its dogs as told, stops on a step that is not finite, and the card names it."""

import numpy as np
import pytest
import torch
from canis.runtime.features import OUTPUT
from canis.training import moving_skating
from canis.training.moving_skating import (
    DOWN_SHARE_ALLOWANCE,
    DOWN_SHARE_COST_CM,
    HEIGHT_ALLOWANCE_CM,
    MOVE,
    lift_cm,
    moving_skating_loss,
    reference_at,
    shown_paw_steps,
    skating_by_speed,
    soft_down,
)
from paw_steps import Y_HIPS, Y_HIPS_VELOCITY, _steps

Y_ROOT_VELOCITY = OUTPUT.field(np.arange(OUTPUT.size), "root_update", "velocity")[0]


def _at_speed(slide_cm: float, speed_mps: float, rows: int):
    """_steps' dog sliding slide_cm a frame, its root moving forward at speed_mps."""
    x, y = _steps(np.full(rows, slide_cm), 0.0)
    y[:, Y_ROOT_VELOCITY[1]] = speed_mps
    return x, y


def test_the_reference_is_the_mocaps_paws_by_speed(monkeypatch):

    slow, fast = _at_speed(0.1, 0.5, 40), _at_speed(0.6, 1.5, 40)
    x, y = torch.cat([slow[0], fast[0]]), torch.cat([slow[1], fast[1]])
    skating_cm, height_cm = shown_paw_steps(x, y)[:2]
    expected = [skating_cm[:40].mean().item(), skating_cm[40:].mean().item()]
    assert expected[1] > expected[0] + 0.1
    action = np.full(len(x), MOVE)
    monkeypatch.setattr(moving_skating, "MIN_BIN_ROWS", 41)
    with pytest.raises(ValueError, match="moving_skating_weight: the training clips"):
        skating_by_speed(x, y, action)
    monkeypatch.setattr(moving_skating, "MIN_BIN_ROWS", 40)
    centres, paws = skating_by_speed(x, y, action)
    assert paws.shape == (2, 13)
    np.testing.assert_allclose(paws[:, 0], expected, rtol=1e-5)
    np.testing.assert_allclose(paws[0, 1:5], height_cm[:40].mean(0), rtol=1e-5)
    np.testing.assert_allclose(paws[0, 5:9], soft_down(height_cm[:40]).mean(0), rtol=1e-5)
    lift = lift_cm(height_cm[:40])
    np.testing.assert_allclose(paws[0, 9:13], lift.square().mean(0), rtol=1e-5, atol=1e-6)
    # Rows not asked to move are left out: counted, the slow bin would move.
    action[:10] = MOVE + 1
    monkeypatch.setattr(moving_skating, "MIN_BIN_ROWS", 30)
    y_moved = y.clone()
    y_moved[:10, Y_HIPS[2]] += 0.05
    np.testing.assert_allclose(skating_by_speed(x, y_moved, action)[1][:, 0], expected, rtol=1e-5)
    between = reference_at(centres, paws, np.array([1.0]))
    np.testing.assert_allclose(between[0, 0], np.mean(expected), rtol=1e-5)


def test_each_dog_pays_its_own_excess():
    x, y = _steps(np.full(8, 0.1), 0.0)  # 2 dogs of 4 rows
    skating_cm, height_cm = shown_paw_steps(x, y)[:2]
    reference = torch.cat([skating_cm.mean(1, keepdim=True), height_cm], 1)[::4]  # (2, 5)
    assert moving_skating_loss(x, y, reference).item() < 1e-6
    # The first dog slides 0.4 cm a frame, the second none: the first's 0.3 over, halved.
    x, y = _steps(np.array([0.4] * 4 + [0.0] * 4), 0.0)
    y.requires_grad_()
    loss = moving_skating_loss(x, y, reference)
    np.testing.assert_allclose(loss.item(), 0.3 / 2, rtol=1e-3)
    loss.backward()  # it slows the first dog's paws and leaves the second's alone
    assert (y.grad[:4, Y_HIPS[2]] > 0).all() and (y.grad[4:] == 0).all()
    # Paws lifted 30 cm do not skate, but pay for the height beyond the allowance.
    lifted = y.detach().clone()
    lifted[:, Y_HIPS[1]] += 0.6  # shown 0.3 higher: the blend takes half
    np.testing.assert_allclose(
        moving_skating_loss(x, lifted, reference).item(), 30.0 - HEIGHT_ALLOWANCE_CM, rtol=1e-3
    )
    # Within the allowance, or lower than the mocap's: free.
    for change_m in (0.8 * HEIGHT_ALLOWANCE_CM / 100 * 2, -0.1):
        moved = y.detach().clone()
        moved[:, Y_HIPS[1]] += change_m
        moved[:4, Y_HIPS[2]] = moved[:4, Y_HIPS_VELOCITY[2]] = 0.0  # the first dog not sliding
        assert moving_skating_loss(x, moved, reference).item() < 1e-5
    # Held both ways, the paws carried 5 cm lower pay for it beyond the allowance.
    np.testing.assert_allclose(
        moving_skating_loss(x, moved, reference, heights_both_ways=True).item(),
        5.0 - HEIGHT_ALLOWANCE_CM,
        rtol=1e-3,
    )
    assert moving_skating_loss(x[:0], y[:0], reference[:0]).item() == 0.0
    # Counted relative to the reference's skating (0.1 cm/frame): the first dog's 0.3 over
    # is 3 of the mocap's, halved over the dogs.
    x, y = _steps(np.array([0.4] * 4 + [0.0] * 4), 0.0)
    np.testing.assert_allclose(
        moving_skating_loss(x, y, reference, skating_relative=True).item(),
        0.3 / reference[0, 0].item() / 2,
        rtol=1e-3,
    )
    # With the bar at 0.8 of the mocap's, a dog skating 0.9 of it pays the 0.1 over the bar,
    # still counted in the mocap's (halved over the dogs); at the mocap's own bar it is free.
    skating = 0.9 * reference[0, 0].item()
    x, y = _steps(np.array([skating] * 4 + [0.0] * 4), 0.0)
    assert moving_skating_loss(x, y, reference, skating_relative=True).item() < 1e-5
    np.testing.assert_allclose(
        moving_skating_loss(x, y, reference, skating_relative=True, skating_scale=0.8).item(),
        0.1 / 2,
        rtol=1e-2,
    )


def test_paws_held_down_as_often_as_the_mocaps():
    """--moving-paws-down: a dog whose paws hover at the mocap's mean height meets the heights
    held both ways and pays for the steps its paws are not down; the mocap's own dog does not."""
    x, y = _steps(np.zeros(8), 0.0)  # 2 dogs of 4 rows, their paws at the ground, still
    stepping = y.clone()  # half of each dog's steps with its paws lifted 10 cm
    stepping[[2, 3, 6, 7], Y_HIPS[1]] += 0.2  # shown 0.1 higher: the blend takes half
    skating, height = shown_paw_steps(x, stepping)[:2]
    columns = torch.cat([skating.mean(1, keepdim=True), height, soft_down(height)], 1)
    reference = columns.reshape(2, 4, 9).mean(1)  # the swing's columns left out: not asked
    # The rest pose's front paws are its highest (its hind paws stay under the ground).
    assert 0.45 < reference[0, 5:7].min() <= reference[0, 5:7].max() < 0.55
    assert moving_skating_loss(x, stepping, reference, True, paws_down=True).item() < 1e-6
    hovering = y.clone()
    hovering[:, Y_HIPS[1]] += 0.1  # every step 5 cm up: the mean height the stepping dog's
    hovering.requires_grad_()
    assert moving_skating_loss(x, hovering, reference, heights_both_ways=True).item() < 1e-5
    loss = moving_skating_loss(x, hovering, reference, True, paws_down=True)
    _, hover_cm = shown_paw_steps(x, hovering.detach())[:2]
    short = reference[:, 5:] - soft_down(hover_cm).reshape(2, 4, 4).mean(1) - DOWN_SHARE_ALLOWANCE
    expected = DOWN_SHARE_COST_CM * short.clamp(min=0).mean()
    assert expected > 2.0
    np.testing.assert_allclose(loss.item(), expected.item(), rtol=1e-5)
    weighed = moving_skating_loss(x, hovering.detach(), reference, True, paws_down=3.0)
    np.testing.assert_allclose(weighed.item(), 3 * expected.item(), rtol=1e-5)  # a weight
    loss.backward()  # it brings the paws down
    assert (hovering.grad[:, Y_HIPS[1]] > 0).all()


def _reference(skating_cm: torch.Tensor, height_cm: torch.Tensor) -> torch.Tensor:
    """(2, 13) skating_by_speed's columns over each of two dogs of 4 rows, as its bins take
    them."""
    columns = [skating_cm.mean(1, keepdim=True), height_cm, soft_down(height_cm)]
    return torch.cat([*columns, lift_cm(height_cm) ** 2], 1).reshape(2, 4, 13).mean(1)


def _stepping_and_flattened():
    """x, a stepping dog's y, a flattened stride's y and the stepping dog's reference: two dogs
    of 4 rows; the stepping one's paws lifted 20 cm in a quarter of its steps, the flattened
    one's the same mean lift in two steps of four (shown 11.25 cm, half the lift above 2.5)."""
    x, y = _steps(np.zeros(8), 0.0)  # 2 dogs of 4 rows, their paws at the ground, still
    stepping = y.clone()
    stepping[[3, 7], Y_HIPS[1]] += 0.4  # shown 0.2 higher: the blend takes half
    flattened = y.clone()
    flattened[[2, 3, 6, 7], Y_HIPS[1]] += 2 * 0.01 * (2.5 + 17.5 / 2)
    return x, stepping, flattened, _reference(*shown_paw_steps(x, stepping)[:2])


def test_paws_held_up_to_the_mocaps_swing():
    """--moving-paws-swing: a dog whose paws swing half as high twice as often (a flattened
    stride) meets the mean lift of a stepping dog's, and pays for the swing it lacks; the
    stepping dog does not."""
    x, stepping, flattened, reference = _stepping_and_flattened()
    swing = {"heights_both_ways": True, "paws_swing": True}
    assert moving_skating_loss(x, stepping, reference, **swing).item() < 1e-6
    flattened.requires_grad_()
    _, flat_cm = shown_paw_steps(x, flattened.detach())[:2]
    lift = lift_cm(flat_cm).reshape(2, 4, 4)
    # Its mean heights nearly met: the front paws 0.625 cm higher (the lift counts from 2.5 cm).
    means_only = {"heights_both_ways": True}
    unswung = moving_skating_loss(x, flattened, reference, **means_only).item()
    assert unswung < 0.2
    loss = moving_skating_loss(x, flattened, reference, **swing)
    rms = lift.square().mean(1).clamp(min=1e-6).sqrt()
    short = reference[:, 9:13].sqrt() - rms - HEIGHT_ALLOWANCE_CM
    np.testing.assert_allclose(loss.item() - unswung, short.clamp(min=0).mean().item(), rtol=1e-4)
    # The front paws' root mean square lift 6.19 cm against the stepping dog's 8.75: 2.06 cm
    # short after the allowance, averaged over the four paws.
    assert loss.item() - unswung > 0.9
    # The swing's part lifts the paws that swing, and only those.
    (loss - moving_skating_loss(x, flattened, reference, **means_only)).backward()
    swinging = torch.zeros(8, dtype=torch.bool)
    swinging[[2, 3, 6, 7]] = True
    assert (flattened.grad[swinging, Y_HIPS[1]] < 0).all()
    assert (flattened.grad[~swinging, Y_HIPS[1]] == 0).all()


def test_the_swing_held_only_under_its_speed():
    """--moving-paws-swing-below-mps: a dog asked under the bound pays for the swing it lacks,
    one asked at or over it does not; without the dogs' speeds the bound is refused."""
    x, _, flattened, reference = _stepping_and_flattened()
    swing = {"heights_both_ways": True, "paws_swing": True}
    everywhere = moving_skating_loss(x, flattened, reference, **swing).item()
    means_only = {k: v for k, v in swing.items() if k != "paws_swing"}
    unswung = moving_skating_loss(x, flattened, reference, **means_only).item()
    assert everywhere - unswung > 0.9  # both dogs pay for their swing
    asked = torch.tensor([0.8, 2.0])  # a walking dog and a cantering one
    below = moving_skating_loss(
        x, flattened, reference, swing_below_mps=1.2, asked_mps=asked, **swing
    ).item()
    # The mean over the two dogs: only the walking one's swing counts.
    np.testing.assert_allclose(below - unswung, (everywhere - unswung) / 2, rtol=1e-4)
    with pytest.raises(ValueError, match="swing_below_mps: needs each dog's asked speed"):
        moving_skating_loss(x, flattened, reference, swing_below_mps=1.2, **swing)


# One short epoch of 4 moving dogs (conftest.finetune_run's settings).
SHORT = {"epochs": 1, "steps_per_epoch": 2, "batch_size": 4, "own_frames": 3, "placed_dogs": 4}


def _start(tiny_dataset, tmp_path, monkeypatch):
    """A one-step network trained on the synthetic dogs, whose clips are short: the reference's
    bins may hold fewer rows."""
    from canis.training.train import LAST, train
    from conftest import tiny_config

    monkeypatch.setattr(moving_skating, "MIN_BIN_ROWS", 10)
    train(tiny_config(tiny_dataset), tmp_path / "one_step", progress=False)
    return tmp_path / "one_step" / LAST


def test_finetune_logs_the_term_and_the_card_names_it(tiny_dataset, tmp_path, monkeypatch, capsys):
    from canis.training.moving_skating import MovingDogs
    from canis.training.train import LAST
    from conftest import finetune_run

    from canis.cli import main

    refreshed = []
    refresh = MovingDogs.refresh

    def counted(dogs, generator):
        refreshed.append(dogs.dogs)
        return refresh(dogs, generator)

    monkeypatch.setattr(MovingDogs, "refresh", counted)
    start = _start(tiny_dataset, tmp_path, monkeypatch)
    out = tmp_path / "paws"
    paws = SHORT | {
        "moving_max_turn_degps": 90.0, "moving_skating_weight": 2.0, "moving_unroll_frames": 4,
        "placed_refresh_steps": 1,
    }  # fmt: skip
    assert finetune_run(tiny_dataset, start, out, **paws) == 0
    assert refreshed == [4, 4]  # at the epoch's start and after its first step
    header, row = (out / "log.csv").read_text().splitlines()
    logged = dict(zip(header.split(","), row.split(","), strict=True))
    assert float(logged["moving_skating_term"]) > 0  # an untrained dog's paws slide
    assert float(logged["rollout_seconds"]) > 0
    tuned = tmp_path / "paws.onnx"
    export = ["export", str(out / LAST), "--out", str(tuned), "--dataset", str(tiny_dataset)]
    assert main([*export, "--card", "--card-seconds", "1"]) == 0
    card = tuned.with_suffix(".md").read_text()
    assert (
        "settings: own_frames 3, placed_dogs 4, placed_refresh_steps 1, moving_unroll_frames 4, "
        "moving_skating_weight 2, moving_max_turn_degps 90;" in card
    )
    # A resume with another weight, or the dogs refreshed otherwise, is another configuration.
    again = paws | {"epochs": 2}
    assert finetune_run(tiny_dataset, start, out, True, **again | {"moving_skating_weight": 1}) == 2
    assert "moving_skating_weight 2.0 (now 1.0)" in capsys.readouterr().err
    unrefreshed = {k: v for k, v in again.items() if k != "placed_refresh_steps"}
    assert finetune_run(tiny_dataset, start, out, True, **unrefreshed) == 2
    assert "placed_refresh_steps 1 (now 0)" in capsys.readouterr().err
    # Out of range: refused by the config file's key.
    refused = {
        "moving_skating_weight": (float("nan"), "nan: must be finite and >= 0"),
        "moving_max_turn_degps": (200, "200.0: must be between 0 and 180"),
        "placed_refresh_steps": (-1, "-1: must be 0 (each epoch) or more"),
        "moving_unroll_frames": (17, "17: must be between 1 and 16"),
    }
    for key, (value, message) in refused.items():
        assert finetune_run(tiny_dataset, start, out, **paws | {key: value}) == 2
        assert f"{key} {message}" in capsys.readouterr().err
    assert finetune_run(tiny_dataset, start, out, **paws | {"moving_max_turn_degps": np.nan}) == 2
    assert "moving_max_turn_degps nan: must be between 0 and 180" in capsys.readouterr().err

    # The paws held both ways: one epoch runs, and a resume without it is refused by name.
    both_ways = tmp_path / "both_ways"
    held = SHORT | {"moving_skating_weight": 2.0, "moving_paws_both_ways": True}
    unweighed = {k: v for k, v in held.items() if k != "moving_skating_weight"}
    assert finetune_run(tiny_dataset, start, both_ways, **unweighed) == 2
    assert "moving_paws_both_ways: needs moving_skating_weight" in capsys.readouterr().err
    assert finetune_run(tiny_dataset, start, both_ways, **held) == 0
    unheld = {k: v for k, v in held.items() if k != "moving_paws_both_ways"} | {"epochs": 2}
    assert finetune_run(tiny_dataset, start, both_ways, True, **unheld) == 2
    assert "moving_paws_both_ways True (now False)" in capsys.readouterr().err
    assert finetune_run(tiny_dataset, start, both_ways, **SHORT | {"moving_paws_down": 1.0}) == 2
    assert "moving_paws_down: needs moving_skating_weight" in capsys.readouterr().err
    assert finetune_run(tiny_dataset, start, both_ways, **held | {"moving_paws_down": -1}) == 2
    assert "moving_paws_down -1.0: must be finite and >= 0" in capsys.readouterr().err


def test_a_non_finite_step_stops_the_run_and_keeps_the_checkpoint(
    tiny_dataset, tmp_path, monkeypatch, capsys
):
    """A loss or gradient that is not finite stops the fine-tuning before the optimiser steps,
    naming the epoch, the step and the terms; the run's checkpoint stays as the last finished
    epoch wrote it."""
    from canis.training.moving_skating import MovingDogs
    from canis.training.train import LAST
    from conftest import finetune_run

    start = _start(tiny_dataset, tmp_path, monkeypatch)
    out = tmp_path / "run"
    settings = SHORT | {"moving_skating_weight": 1.0}
    assert finetune_run(tiny_dataset, start, out, **settings) == 0
    saved = (out / LAST).read_bytes()
    measured = MovingDogs.loss

    def poisoned(dogs, predict, count, generator):
        return measured(dogs, predict, count, generator) * float("nan")

    monkeypatch.setattr(MovingDogs, "loss", poisoned)
    assert finetune_run(tiny_dataset, start, out, True, **settings | {"epochs": 2}) == 2
    error = capsys.readouterr().err
    assert "fine-tuning epoch 2, step 1: the loss (nan) or its gradient is not finite" in error
    assert "moving_skating nan" in error
    assert (out / LAST).read_bytes() == saved

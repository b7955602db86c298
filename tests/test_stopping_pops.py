"""The stopping-pops term: each shown joint's move in the frame, beyond the mocap's at the dog's
speed; the stopping dogs' inputs are the runtime's for a dog asked to stop; the option is
checked and named."""

import numpy as np
import pytest
import torch
from canis.runtime.features import JOINT_COUNT
from canis.runtime.pose import JOINT_POSITION_BLEND
from canis.runtime.transition_requests import SLOW_DOWN_S, slow_down_left
from canis.training import finetune_moving
from canis.training.stopping_pops import ALLOWED_OVER_MOCAP, joint_steps_cm, stopping_pops_loss
from test_placed_speed import _reproduce_line
from test_shown_pose import _still_and_moved_rows


def _reference(cm: float):
    """A mocap reference (joint_steps_by_speed's) allowing every joint `cm` at any speed."""
    return np.array([0.5, 3.0]), np.full((2, JOINT_COUNT), cm / ALLOWED_OVER_MOCAP)


def test_each_shown_joint_pays_its_move_beyond_the_mocaps():
    x, y, y_moved = _still_and_moved_rows()  # the predicted hips 1 cm forward
    # The shown hips (and so every joint) move as next_local_pose keeps them: part of the way.
    move_cm = 1.0 - JOINT_POSITION_BLEND
    assert joint_steps_cm(x, y).max().item() == pytest.approx(0.0, abs=1e-3)
    np.testing.assert_allclose(joint_steps_cm(x, y_moved).numpy(), move_cm, atol=1e-3)
    assert stopping_pops_loss(x, y, _reference(0.25)).item() == pytest.approx(0.0, abs=1e-6)
    assert stopping_pops_loss(x, y_moved, _reference(2.0)).item() == 0.0
    beyond = stopping_pops_loss(x, y_moved, _reference(move_cm - 0.25)).item()
    assert beyond == pytest.approx(0.25**2, abs=1e-3)
    moved = y_moved.clone().requires_grad_()
    stopping_pops_loss(x, moved, _reference(0.1)).backward()
    assert torch.isfinite(moved.grad).all() and moved.grad.abs().sum() > 0


def test_the_stop_is_asked_as_a_player_letting_go():
    assert slow_down_left(0) == 1.0
    assert slow_down_left(np.array([SLOW_DOWN_S * 60, 100])).tolist() == [0.0, 0.0]


def test_stopping_dogs_inputs_are_the_runtimes(tiny_model):
    """A stopping dog's kept inputs are what a Controller builds for a dog asked its speed and,
    from its stop frame on, a speed falling to zero and then the idle action."""
    from canis.runtime.controller import DT_S, Controller
    from canis.runtime.features import ACTIONS
    from canis.runtime.inference import MotionModel
    from canis.runtime.root import yaw_direction_xz
    from canis.runtime.trajectory import ControlState
    from canis.training.placed_speed import (
        LEAD_IN_FRAMES,
        SETTLE_FRAMES,
        asked_commands,
        moving_inputs,
    )

    kept, stop_from = 30, np.array([0, 5])
    xs, asked = moving_inputs(
        tiny_model, 2, np.random.default_rng(1), kept_frames=kept, stop_from_frames=stop_from
    )
    _, turn_radps, lead_in = asked_commands(2, np.random.default_rng(1))
    dog, first_kept = 1, LEAD_IN_FRAMES + SETTLE_FRAMES
    controller = Controller(MotionModel(tiny_model, threads=1), speed_tracking=False)
    facing, expected, actions = 0.0, [], []
    for frame in range(first_kept + kept):
        speed = lead_in[dog] if frame < LEAD_IN_FRAMES else asked[dog]
        if frame >= LEAD_IN_FRAMES:
            facing += turn_radps[dog] * DT_S
        left = float(slow_down_left(max(frame - first_kept - stop_from[dog], 0)))
        action = ACTIONS.index("move" if left > 0 else "idle")
        velocity = speed * left * yaw_direction_xz(np.array([facing]))
        x = controller.step(ControlState(velocity, np.array([facing]), np.array([action])))
        expected.append(x[0].copy())
        actions.append(action)
    np.testing.assert_allclose(xs[dog], np.array(expected[-kept:]), atol=1e-4)
    assert ACTIONS.index("idle") in actions[-kept:]  # the stop happened within the kept steps


def test_the_stopping_pops_weight_is_checked_and_named():
    from canis.training.finetune_config import ClosedLoopConfig

    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="--stopping-pops-weight .*: must be a finite"):
            ClosedLoopConfig(stopping_pops_weight=bad)
    loop = ClosedLoopConfig(stopping_pops_weight=2.0)
    assert loop.identity()["stopping_pops_weight"] == 2.0
    assert "--stopping-pops-weight 2" in _reproduce_line(loop)
    assert "--stopping-pops-weight" not in _reproduce_line(ClosedLoopConfig())


def test_finetune_logs_the_stopping_and_getting_up_terms_and_the_card_names_them(
    tiny_dataset, tmp_path, monkeypatch
):
    from canis.training.train import LAST, train
    from conftest import tiny_config

    from canis.cli import main

    monkeypatch.setattr(finetune_moving, "MIN_BIN_ROWS", 10)  # the synthetic dogs' clips are short
    start = tmp_path / "one_step"
    train(tiny_config(tiny_dataset), start, progress=False)
    out = tmp_path / "stopping"
    run = [
        "finetune", "--start", str(start / LAST), "--dataset", str(tiny_dataset),
        "--out", str(out), "--epochs", "1", "--steps-per-epoch", "2", "--batch-size", "4",
        "--own-frames", "3", "--placed-dogs", "4", "--moving-unroll-frames", "2",
        "--stopping-pops-weight", "2", "--getting-up-pops-weight", "1",
    ]  # fmt: skip
    assert main(run) == 0
    header, row = (out / "log.csv").read_text().splitlines()
    logged = dict(zip(header.split(","), row.split(","), strict=True))
    assert np.isfinite(float(logged["stopping_pops_term"]))
    assert (out / "stopping.onnx").exists()  # the stopping dogs' own export
    assert np.isfinite(float(logged["getting_up_pops_term"]))
    assert (out / "getting_up.onnx").exists()  # and the getting-up dogs' own
    tuned = tmp_path / "stopping.onnx"
    assert (
        main(["export", str(out / LAST), "--out", str(tuned), "--card", "--card-seconds", "1"]) == 0
    )
    card = tuned.with_suffix(".md").read_text()
    assert (
        "--stopping-pops-weight 2" in card and "stopping-pops weight 2.0 on 4 stopping dogs" in card
    )
    assert "--getting-up-pops-weight 1" in card and "getting-up-pops weight 1.0 on 4 dogs" in card

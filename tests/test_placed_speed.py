"""The placed-speed term (training/placed_speed.py): nothing for a dog whose mean speed is within
the allowance of the asked, however its speed rises and falls within the stride; growing
beyond, with a gradient toward the asked speed; the moving dogs' inputs are the runtime's own."""

from dataclasses import replace

import numpy as np
import torch
from canis.runtime.features import INPUT, OUTPUT
from canis.training import finetune_moving
from canis.training.placed_speed import (
    SPEED_ALLOWANCE,
    placed_speed_loss,
    root_speed_mps,
)

VELOCITY = OUTPUT.field(np.arange(OUTPUT.size), "root_update", "velocity")[0]


def _moving(speeds_mps: np.ndarray) -> torch.Tensor:
    """y rows (dogs * frames) whose root moves forward (+z) at the given speeds (dogs, frames)."""
    y = torch.zeros(speeds_mps.size, OUTPUT.size)
    y[:, VELOCITY[1]] = torch.as_tensor(speeds_mps.reshape(-1), dtype=torch.float32)
    return y


def test_the_mean_speed_counts_beyond_the_allowance_and_the_stride_is_free():
    asked = torch.tensor([0.5, 2.0])
    stride = 1 + 0.3 * np.sin(np.linspace(0, 2 * np.pi, 16, endpoint=False))  # mean 1
    on_speed = _moving(asked.numpy()[:, None] * stride[None])
    assert placed_speed_loss(on_speed, asked).item() < 1e-9
    within = _moving(asked.numpy()[:, None] * (1 - 0.8 * SPEED_ALLOWANCE) * np.ones((2, 16)))
    assert placed_speed_loss(within, asked).item() < 1e-9
    # The first dog at 60% of its speed, the second on it: (0.4 - allowance)^2 / 2.
    slow = _moving(np.array([[0.3] * 16, [2.0] * 16])).requires_grad_()
    loss = placed_speed_loss(slow, asked)
    np.testing.assert_allclose(loss.item(), (0.4 - SPEED_ALLOWANCE) ** 2 / 2, rtol=1e-5)
    loss.backward()  # its gradient speeds the slow dog up and leaves the other alone
    assert (slow.grad[:16, VELOCITY[1]] < 0).all() and (slow.grad[16:] == 0).all()
    fast = _moving(np.array([[0.5] * 16, [3.0] * 16]))
    np.testing.assert_allclose(
        placed_speed_loss(fast, asked).item(), (0.5 - SPEED_ALLOWANCE) ** 2 / 2, rtol=1e-5
    )
    # The speed is the velocity's length, whichever way the root goes.
    sideways = torch.zeros(1, OUTPUT.size)
    sideways[0, VELOCITY[0]], sideways[0, VELOCITY[1]] = 0.6, -0.8
    np.testing.assert_allclose(root_speed_mps(sideways).item(), 1.0, rtol=1e-6)
    assert placed_speed_loss(on_speed[:0], asked[:0]).item() == 0.0


def test_moving_dogs_inputs_are_the_runtimes(tiny_model):
    """Each dog's kept inputs are what a Controller from the standing keyframe, its speed
    tracking off, builds when given that dog's commands."""
    from canis.runtime.controller import DT_S, Controller
    from canis.runtime.inference import MotionModel
    from canis.runtime.root import yaw_direction_xz
    from canis.runtime.trajectory import ControlState
    from canis.training.placed_speed import (
        LEAD_IN_FRAMES,
        MOVE,
        SETTLE_FRAMES,
        asked_commands,
        moving_inputs,
    )

    xs, asked = moving_inputs(tiny_model, 3, np.random.default_rng(1), kept_frames=4)
    assert xs.shape == (3, 4, INPUT.size) and np.isfinite(xs).all()
    again, turn_radps, lead_in = asked_commands(3, np.random.default_rng(1))
    np.testing.assert_array_equal(asked, again)
    assert ((0.4 <= asked) & (asked <= 3.6)).all()
    dog = 2
    controller = Controller(MotionModel(tiny_model, threads=1), speed_tracking=False)
    facing, expected = 0.0, []
    for frame in range(LEAD_IN_FRAMES + SETTLE_FRAMES + 4):
        speed = lead_in[dog] if frame < LEAD_IN_FRAMES else asked[dog]
        if frame >= LEAD_IN_FRAMES:
            facing += turn_radps[dog] * DT_S
        velocity = speed * yaw_direction_xz(np.array([facing]))
        x = controller.step(ControlState(velocity, np.array([facing]), np.array([MOVE])))
        expected.append(x[0].copy())
    np.testing.assert_allclose(xs[dog], np.array(expected[-4:]), atol=1e-4)  # batch rounding


def _unrolled_steps(checkpoint_path, dataset_path, run_dir, advance_phase=True):
    """(x the unroll fed, the runtime's recorded x at the same kept steps, the recorded
    phases): a MovingDogs' refresh (3 dogs through the runtime) and a 6-step unroll of each
    from random kept steps, the network in eval mode. advance_phase False holds PFNN's phase at
    its first value, as the unrolls did before it was fed back."""
    import torch
    from canis.runtime.features import OUTPUT
    from canis.training.checkpoint import load_checkpoint
    from canis.training.finetune_stretches import Standardiser
    from canis.training.models import restored_model
    from canis.training.placed_speed import MovingDogs
    from canis.training.train import TrainingData, _predict

    checkpoint = load_checkpoint(checkpoint_path)
    kind = checkpoint.config["kind"]
    data = TrainingData(str(dataset_path), kind, torch.device("cpu"))
    model = restored_model(checkpoint, checkpoint_path).eval()
    standard = Standardiser(data.normalisation, OUTPUT.size)
    if not advance_phase:
        standard.next_phase_rad = lambda phase_rad, prediction: phase_rad
    run_dir.mkdir()
    dogs = MovingDogs(model, checkpoint.config, data, standard, run_dir, 3)
    dogs.refresh(np.random.default_rng(0))
    chosen, unroll = np.arange(3), 6
    with torch.no_grad():
        x_raw, _, frames = dogs._steps(
            lambda x, phase: _predict(model, kind, x, phase),
            chosen,
            np.random.default_rng(1),
            unroll,
        )
    stretches = max(1, 16 // unroll)
    recorded = dogs.xs[np.repeat(chosen, stretches * unroll), frames]
    recorded = standard.x_raw(standard.x_standard(recorded)).numpy()  # the graph's clamp
    return x_raw.numpy(), recorded, dogs.phases


def test_pfnn_is_unrolled_as_the_runtime_runs_it(tiny_dataset, tmp_path):
    """PFNN's phase is its own state: the moving dogs record the phase the runtime fed each
    kept step, and an unroll advances it by the predicted increment as Controller.step does,
    so each unrolled step's input is the runtime's own (with the phase held, it is not)."""
    from canis.training.train import LAST, train
    from conftest import tiny_config

    train(tiny_config(tiny_dataset, kind="pfnn"), tmp_path / "pfnn", progress=False)
    start = tmp_path / "pfnn" / LAST
    fed, recorded, phases = _unrolled_steps(start, tiny_dataset, tmp_path / "a")
    assert ((phases >= 0) & (phases < 2 * np.pi)).all() and np.ptp(phases) > 1.0
    np.testing.assert_allclose(fed, recorded, atol=1e-4)
    held, recorded, _ = _unrolled_steps(start, tiny_dataset, tmp_path / "b", False)
    assert np.abs(held - recorded).max() > 1e-2


def test_the_turning_dogs_turn_up_to_the_asked_rate():
    from canis.training.finetune_config import ClosedLoopConfig
    from canis.training.placed_speed import MAX_TURN_DEGPS, asked_commands

    from canis.cli import build_parser

    parsed = build_parser().parse_args(["finetune", "--start", "s", "--out", "o"])
    assert parsed.moving_max_turn_degps is None  # left to ClosedLoopConfig's default
    assert ClosedLoopConfig().moving_max_turn_degps == MAX_TURN_DEGPS

    for max_degps in (MAX_TURN_DEGPS, 90.0):
        _, turn_radps, _ = asked_commands(400, np.random.default_rng(0), max_degps)
        turning = np.degrees(np.abs(turn_radps[turn_radps != 0]))
        assert 150 < len(turning) < 250  # about half of them
        assert turning.max() <= max_degps and turning.max() > 0.9 * max_degps


def _reproduce_line(loop) -> str:
    """The card's reproduce line for a one-epoch fine-tune with this loss configuration."""
    from pathlib import Path

    from canis.export.finetune_card import fine_tuning_reproduce

    settings = {"steps_per_epoch": 1, "batch_size": 4, "lr": 1e-5, "seed": 0}
    config = {
        "closed_loop": loop.identity() | settings,
        "closed_loop_start": "mann8.onnx",
        "closed_loop_epoch": 1,
    }
    return fine_tuning_reproduce(config, Path("m.onnx"), "last.safetensors")


def test_the_jump_share_and_weight_are_checked_and_named():
    """--jump-share: a share of the batch under 1, of the mocap's stretches; --jump-weight: 1
    or more; on the card's reproduce line and in the loss configuration (a resume with another
    value is refused)."""
    import pytest
    from canis.training.finetune_config import ClosedLoopConfig

    for bad in (-0.1, 1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="--jump-share .*: must be a share of the batch"):
            ClosedLoopConfig(jump_share=bad)
    loop = ClosedLoopConfig(contact_weight=0.05, jump_share=0.25)
    assert loop.identity()["jump_share"] == 0.25
    assert "--jump-share 0.25" in _reproduce_line(loop)
    assert "--jump-share" not in _reproduce_line(ClosedLoopConfig(contact_weight=0.05))
    for bad in (0.5, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="--jump-weight .*: must be a finite weight >= 1"):
            ClosedLoopConfig(jump_weight=bad)
    assert "--jump-weight 10" in _reproduce_line(ClosedLoopConfig(jump_weight=10))
    assert "--jump-weight" not in _reproduce_line(ClosedLoopConfig())


def test_the_turn_swaps_and_the_paw_options_are_checked_and_named():
    """--moving-turn-switch-s: refused when negative, not finite, or without moving dogs; the
    card's reproduce line names it; a resume with another value is refused (the loss
    configuration holds it)."""

    import pytest
    from canis.training.finetune_config import ClosedLoopConfig

    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="--moving-turn-switch-s .*: must be 0 .*or a"):
            ClosedLoopConfig(placed_speed_weight=1, moving_turn_switch_s=bad)
    with pytest.raises(ValueError, match="--moving-turn-switch-s: needs a moving dogs' term"):
        ClosedLoopConfig(moving_turn_switch_s=5)
    loop = ClosedLoopConfig(placed_speed_weight=1, moving_turn_switch_s=5)
    assert loop.identity()["moving_turn_switch_s"] == 5
    reproduce = _reproduce_line(loop)
    assert "--placed-speed-weight 1 --moving-turn-switch-s 5" in reproduce
    loop = ClosedLoopConfig(
        moving_skating_weight=1,
        moving_paws_both_ways=True,
        moving_paws_down=True,
        moving_skating_relative=True,
    )
    reproduce = _reproduce_line(loop)
    assert (
        "--moving-skating-weight 1 --moving-paws-both-ways --moving-paws-down "
        "--moving-skating-relative" in reproduce
    )
    weighed = ClosedLoopConfig(moving_skating_weight=1, moving_paws_down=4.0)
    assert "--moving-paws-down 4 " in _reproduce_line(weighed) + " "
    for bad in (0, -8):
        with pytest.raises(ValueError, match="--moving-dogs-per-step .*: must be at least 1"):
            ClosedLoopConfig(placed_speed_weight=1, moving_dogs_per_step=bad)
    with pytest.raises(ValueError, match="--moving-dogs-per-step: needs a moving dogs' term"):
        ClosedLoopConfig(moving_dogs_per_step=32)
    loop = ClosedLoopConfig(placed_speed_weight=1, moving_dogs_per_step=32)
    assert "--placed-speed-weight 1 --moving-dogs-per-step 32" in _reproduce_line(loop)
    assert "--moving-dogs-per-step" not in _reproduce_line(ClosedLoopConfig(placed_speed_weight=1))
    swing = ClosedLoopConfig(moving_skating_weight=1, moving_paws_swing=True)
    assert "--moving-skating-weight 1 --moving-paws-swing" in _reproduce_line(swing)
    assert "--moving-paws-swing-below-mps" not in _reproduce_line(swing)
    walk_swing = replace(swing, moving_paws_swing_below_mps=1.2)
    assert "--moving-paws-swing --moving-paws-swing-below-mps 1.2" in _reproduce_line(walk_swing)
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="--moving-paws-swing-below-mps .*: must be a finite"):
            replace(swing, moving_paws_swing_below_mps=bad)
    with pytest.raises(ValueError, match="--moving-paws-swing-below-mps: needs --moving-paws-sw"):
        ClosedLoopConfig(moving_skating_weight=1, moving_paws_swing_below_mps=1.2)
    scaled = ClosedLoopConfig(moving_skating_weight=2, moving_skating_scale=0.8)
    assert "--moving-skating-weight 2 --moving-skating-scale 0.8" in _reproduce_line(scaled)
    assert "--moving-skating-scale" not in _reproduce_line(replace(scaled, moving_skating_scale=1))
    for bad in (0.0, -0.5, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="--moving-skating-scale .*: must be a finite number"):
            replace(scaled, moving_skating_scale=bad)
    with pytest.raises(ValueError, match="--moving-skating-scale: needs --moving-skating-weight"):
        ClosedLoopConfig(placed_speed_weight=1, moving_skating_scale=0.8)
    options = ("moving_paws_down", "moving_skating_relative", "moving_paws_both_ways")
    for option in (*options, "moving_paws_swing"):
        with pytest.raises(ValueError, match="needs --moving-skating-weight"):
            ClosedLoopConfig(placed_speed_weight=1, **{option: True})


def test_pfnn_is_fine_tuned_with_every_placed_term(tiny_dataset, tmp_path, monkeypatch):
    """One step of PFNN with each term that drives the runtime's dogs: every one is computed
    (logged finite and above 0: a term skipped would log 0) on dogs that carry PFNN's
    phase."""
    from canis.training.train import LAST, train
    from conftest import tiny_config

    from canis.cli import main

    monkeypatch.setattr(finetune_moving, "MIN_BIN_ROWS", 10)  # the synthetic clips are short
    train(tiny_config(tiny_dataset, kind="pfnn"), tmp_path / "pfnn", progress=False)
    terms = {
        "--placed-stillness-weight": "placed_stillness",
        "--placed-speed-weight": "placed_speed",
        "--moving-legs-weight": "moving_legs",
        "--moving-skating-weight": "moving_skating",
        "--moving-gait-weight": "moving_gait",
        "--stopping-pops-weight": "stopping_pops",
        "--getting-up-pops-weight": "getting_up_pops",
        "--posture-stillness-weight": "posture_stillness",
    }
    out = tmp_path / "tuned"
    run = [
        "finetune", "--start", str(tmp_path / "pfnn" / LAST), "--dataset", str(tiny_dataset),
        "--out", str(out), "--epochs", "1", "--steps-per-epoch", "1", "--batch-size", "4",
        "--own-frames", "2", "--placed-dogs", "4", "--moving-unroll-frames", "2",
        *(part for option in terms for part in (option, "1")),
        "--getting-up-settling", "0.5",  # half the getting-up dogs kept lying, sitting or begging
    ]  # fmt: skip
    assert main(run) == 0
    header, row = (out / "log.csv").read_text().splitlines()
    logged = dict(zip(header.split(","), row.split(","), strict=True))
    for term in terms.values():  # an untrained dog costs something under every term
        value = float(logged[f"{term}_term"])
        assert np.isfinite(value) and value > 0, term

"""The moving dogs (training/moving_skating.py): their inputs are the runtime's own, their unrolls
feed back what the runtime would (PFNN's phase too), the turning dogs turn as asked; the moving
dogs' options are checked and named on the card; a PFNN fine-tunes with every kept term."""

from dataclasses import replace

import numpy as np
import torch
from canis.runtime.features import INPUT, OUTPUT
from canis.training import moving_skating
from canis.training.moving_skating import root_speed_mps

VELOCITY = OUTPUT.field(np.arange(OUTPUT.size), "root_update", "velocity")[0]


def test_the_root_speed_is_the_velocitys_length_whichever_way_it_goes():
    """The speed the moving-skating term bins the mocap by (moving_skating.by_speed)."""
    y = torch.zeros(3, OUTPUT.size)
    y[0, VELOCITY[0]], y[0, VELOCITY[1]] = 0.6, -0.8  # sideways and back
    y[1, VELOCITY[1]] = 2.0  # straight ahead
    np.testing.assert_allclose(root_speed_mps(y).numpy(), [1.0, 2.0, 0.0], atol=1e-5)
    still = y[2:].clone().requires_grad_()
    root_speed_mps(still).backward()  # a root that does not move: a finite gradient
    assert torch.isfinite(still.grad).all()


def test_moving_dogs_inputs_are_the_runtimes(tiny_model):
    """Each dog's kept inputs are what a Controller from the standing keyframe, its speed
    tracking off, builds when given that dog's commands."""
    from canis.runtime.controller import DT_S, Controller
    from canis.runtime.inference import MotionModel
    from canis.runtime.root import yaw_direction_xz
    from canis.runtime.trajectory import ControlState
    from canis.training.moving_skating import (
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
    from canis.training.moving_skating import MovingDogs
    from canis.training.train import TrainingData, _predict

    checkpoint = load_checkpoint(checkpoint_path)
    kind = checkpoint.config["kind"]
    data = TrainingData(str(dataset_path), kind, torch.device("cpu"))
    model = restored_model(checkpoint, checkpoint_path).eval()
    standard = Standardiser(data.normalisation, OUTPUT.size)
    if not advance_phase:
        standard.next_phase_rad = lambda phase_rad, prediction: phase_rad
    run_dir.mkdir()
    dogs = MovingDogs(model, checkpoint.config, data, standard, run_dir, 3, skating=None)
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
    from canis.training.moving_skating import MAX_TURN_DEGPS, asked_commands

    assert ClosedLoopConfig().moving_max_turn_degps == MAX_TURN_DEGPS  # unless told
    for max_degps in (MAX_TURN_DEGPS, 90.0):
        _, turn_radps, _ = asked_commands(400, np.random.default_rng(0), max_degps)
        turning = np.degrees(np.abs(turn_radps[turn_radps != 0]))
        assert 150 < len(turning) < 250  # about half of them
        assert turning.max() <= max_degps and turning.max() > 0.9 * max_degps


def _settings_line(loop) -> str:
    """The card's Fine-tuning line for a one-epoch fine-tune with this loss configuration."""
    from canis.export.finetune_card import fine_tuning_lines

    settings = {"steps_per_epoch": 1, "batch_size": 4, "lr": 1e-5, "seed": 0}
    config = {
        "closed_loop": loop.identity() | settings,
        "closed_loop_start": "mann8.onnx",
        "closed_loop_epoch": 1,
    }
    (line,) = fine_tuning_lines(config, [])
    return line


def test_a_recipes_card_names_its_start_within_any_run_folder():
    """A recipe's fine-tuning starts from its own training stage: the card names it as RUN/...,
    not by the folder that one run happened to use."""
    from canis.export.finetune_card import fine_tuning_lines
    from canis.training.finetune_config import ClosedLoopConfig

    settings = {"steps_per_epoch": 1, "batch_size": 4, "lr": 1e-5, "seed": 0}
    config = {
        "closed_loop": ClosedLoopConfig().identity() | settings,
        "closed_loop_start": "runs/ship3/train/last.safetensors",
        "closed_loop_epoch": 1,
        "closed_loop_config": {"file": "training/configs/mann8.toml", "values": {}},
    }
    (line,) = fine_tuning_lines(config, [])
    assert "from `RUN/train/last.safetensors`" in line and "ship3" not in line
    config["closed_loop_config"]["file"] = "tune.json"  # canis finetune --config: as given
    (line,) = fine_tuning_lines(config, [])
    assert "from `runs/ship3/train/last.safetensors`" in line


def test_the_jump_share_and_weight_are_checked_and_named():
    """jump_share: a share of the batch under 1, of the mocap's stretches; jump_weight: 1 or
    more; on the card's Fine-tuning line and in the loss configuration (a resume with another
    value is refused)."""
    import pytest
    from canis.training.finetune_config import ClosedLoopConfig

    for bad in (-0.1, 1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="--jump-share .*: must be a share of the batch"):
            ClosedLoopConfig(jump_share=bad)
    loop = ClosedLoopConfig(contact_weight=0.05, jump_share=0.25)
    assert loop.identity()["jump_share"] == 0.25
    assert "settings: contact_weight 0.05, jump_share 0.25." in _settings_line(loop)
    assert "jump_share" not in _settings_line(ClosedLoopConfig(contact_weight=0.05))
    for bad in (0.5, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="--jump-weight .*: must be a finite weight >= 1"):
            ClosedLoopConfig(jump_weight=bad)
    assert "settings: jump_weight 10." in _settings_line(ClosedLoopConfig(jump_weight=10.0))
    assert "settings: defaults." in _settings_line(ClosedLoopConfig())


def test_the_turn_swaps_and_the_paw_options_are_checked_and_named():
    """The moving dogs' and the moving-skating term's options: refused out of range or without
    the moving-skating term (the only one on the moving dogs); the card's Fine-tuning line
    names those a run set; a resume with another value is refused (the loss configuration
    holds them)."""

    import pytest
    from canis.training.finetune_config import ClosedLoopConfig

    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="--moving-turn-switch-s .*: must be 0 .*or a"):
            ClosedLoopConfig(moving_skating_weight=1.0, moving_turn_switch_s=bad)
    with pytest.raises(ValueError, match="--moving-turn-switch-s: needs --moving-skating-weight"):
        ClosedLoopConfig(moving_turn_switch_s=5.0)
    loop = ClosedLoopConfig(moving_skating_weight=1.0, moving_turn_switch_s=5.0)
    assert loop.identity()["moving_turn_switch_s"] == 5
    assert "moving_skating_weight 1, moving_turn_switch_s 5." in _settings_line(loop)
    loop = ClosedLoopConfig(
        moving_skating_weight=1.0,
        moving_paws_both_ways=True,
        moving_paws_down=1.0,
        moving_skating_relative=True,
    )
    assert (
        "settings: moving_skating_weight 1, moving_paws_both_ways True, moving_paws_down 1, "
        "moving_skating_relative True." in _settings_line(loop)
    )
    weighed = ClosedLoopConfig(moving_skating_weight=1.0, moving_paws_down=4.0)
    assert "moving_paws_down 4." in _settings_line(weighed)
    for bad in (0, -8):
        with pytest.raises(ValueError, match="--moving-dogs-per-step .*: must be at least 1"):
            ClosedLoopConfig(moving_skating_weight=1.0, moving_dogs_per_step=bad)
    with pytest.raises(ValueError, match="--moving-dogs-per-step: needs --moving-skating-weight"):
        ClosedLoopConfig(moving_dogs_per_step=32)
    loop = ClosedLoopConfig(moving_skating_weight=1.0, moving_dogs_per_step=32)
    assert "moving_skating_weight 1, moving_dogs_per_step 32." in _settings_line(loop)
    plain = ClosedLoopConfig(moving_skating_weight=1.0)
    assert "moving_dogs_per_step" not in _settings_line(plain)
    swing = ClosedLoopConfig(moving_skating_weight=1.0, moving_paws_swing=True)
    assert "moving_skating_weight 1, moving_paws_swing True." in _settings_line(swing)
    walk_swing = replace(swing, moving_paws_swing_below_mps=1.2)
    line = _settings_line(walk_swing)
    assert "moving_paws_swing True, moving_paws_swing_below_mps 1.2." in line
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="--moving-paws-swing-below-mps .*: must be a finite"):
            replace(swing, moving_paws_swing_below_mps=bad)
    with pytest.raises(ValueError, match="--moving-paws-swing-below-mps: needs --moving-paws-sw"):
        ClosedLoopConfig(moving_skating_weight=1.0, moving_paws_swing_below_mps=1.2)
    scaled = ClosedLoopConfig(moving_skating_weight=2.0, moving_skating_scale=0.8)
    assert "moving_skating_weight 2, moving_skating_scale 0.8." in _settings_line(scaled)
    unscaled = replace(scaled, moving_skating_scale=1.0)
    assert "moving_skating_scale" not in _settings_line(unscaled)
    for bad in (0.0, -0.5, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="--moving-skating-scale .*: must be a finite number"):
            replace(scaled, moving_skating_scale=bad)
    # Another term's weight is not the moving-skating term's: its options are refused beside it.
    with pytest.raises(ValueError, match="--moving-skating-scale: needs --moving-skating-weight"):
        ClosedLoopConfig(placed_stillness_weight=1.0, moving_skating_scale=0.8)
    options = ("moving_paws_down", "moving_skating_relative", "moving_paws_both_ways")
    for option in (*options, "moving_paws_swing"):
        with pytest.raises(ValueError, match="needs --moving-skating-weight"):
            ClosedLoopConfig(placed_stillness_weight=1.0, **{option: True})


def test_pfnn_is_fine_tuned_with_every_term(tiny_dataset, tmp_path, monkeypatch):
    """One step of PFNN with each term, the moving dogs unrolled over two steps: every one is
    computed (logged finite and above 0: a term skipped would log 0), the placed and moving
    ones on dogs that carry PFNN's phase."""
    from canis.training.finetune_stretches import TERMS
    from canis.training.train import LAST, train
    from conftest import finetune_run, tiny_config

    monkeypatch.setattr(moving_skating, "MIN_BIN_ROWS", 10)  # the synthetic clips are short
    train(tiny_config(tiny_dataset, kind="pfnn"), tmp_path / "pfnn", progress=False)
    settings = {
        "epochs": 1, "steps_per_epoch": 1, "batch_size": 4, "own_frames": 2, "placed_dogs": 4,
        "moving_unroll_frames": 2, **{f"{term}_weight": 1.0 for term in TERMS},
    }  # fmt: skip
    out = tmp_path / "tuned"
    assert finetune_run(tiny_dataset, tmp_path / "pfnn" / LAST, out, **settings) == 0
    header, row = (out / "log.csv").read_text().splitlines()
    logged = dict(zip(header.split(","), row.split(","), strict=True))
    for term in TERMS:  # an untrained dog costs something under every term
        value = float(logged[f"{term}_term"])
        assert np.isfinite(value) and value > 0, term

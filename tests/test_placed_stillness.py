"""The placed-stillness term (training/placed_stillness.py): zero for a dog that does not move,
growing with its joints' turn and its root's slide beyond the allowances; the placed dogs'
inputs are the runtime's own; a fine-tune logs the term and names it in its card."""

import numpy as np
import torch
from canis.runtime.features import FPS, INPUT, OUTPUT
from canis.training.finetune_losses import ROTATING_ROWS
from canis.training.placed_stillness import (
    JOINT_ALLOWANCE_DEG,
    ROOT_ALLOWANCE_MM,
    placed_stillness_loss,
)


def _trot():
    from canis.training.clips import clip_pairs, process_clip
    from synthetic_dog import gait, to_motion

    roots, rotations, _ = gait("trot", 1.5, 3.0)
    x, y, _ = clip_pairs(process_clip(to_motion(roots, rotations, "trot")))
    return torch.as_tensor(x[10:60]), torch.as_tensor(y[10:60])


def _moved(x_t, y_t, share: float, root_velocity_mps=(0.0, 0.0)) -> torch.Tensor:
    """y with every rotating joint's axes moved `share` of the way from x's to the trot's, no
    turn of the root and the root's velocity as given."""
    moved = y_t.clone()
    for field in ("forward", "up"):
        to = OUTPUT.field(np.arange(OUTPUT.size), "joints", field)[list(ROTATING_ROWS)]
        start = INPUT.field(np.arange(INPUT.size), "joints", field)[list(ROTATING_ROWS)]
        to, start = to.reshape(-1), start.reshape(-1)
        moved[:, to] = x_t[:, start] + share * (y_t[:, to] - x_t[:, start])
    moved[:, OUTPUT.field(np.arange(OUTPUT.size), "root_update", "yaw_velocity")[0]] = 0.0
    velocity = OUTPUT.field(np.arange(OUTPUT.size), "root_update", "velocity")[0]
    moved[:, velocity] = torch.tensor(root_velocity_mps, dtype=moved.dtype)
    return moved


def test_a_still_dog_costs_nothing_and_a_stirring_one_more_the_more_it_moves():
    x_t, y_t = _trot()
    assert placed_stillness_loss(x_t, _moved(x_t, y_t, 0.0)).item() < 1e-9
    half = placed_stillness_loss(x_t, _moved(x_t, y_t, 0.5)).item()
    whole = placed_stillness_loss(x_t, _moved(x_t, y_t, 1.0)).item()
    assert 0 < half < whole
    # Joints turning less than the allowance cost nothing.
    from canis.training.finetune_losses import leg_turn_deg

    slight = _moved(x_t, y_t, 0.005)
    assert leg_turn_deg(x_t, slight, ROTATING_ROWS).max().item() < JOINT_ALLOWANCE_DEG
    assert placed_stillness_loss(x_t, slight).item() == 0.0
    assert placed_stillness_loss(x_t[:0], y_t[:0]).item() == 0.0


def test_the_root_slide_counts_beyond_its_allowance_in_mm_per_frame():
    x_t, y_t = _trot()
    # 0.06 m/s is 1 mm a frame at 60 fps: 0.8 mm over the allowance.
    step_mm = 0.06 * 1000 / FPS
    sliding = _moved(x_t, y_t, 0.0, (0.06, 0.0)).requires_grad_()
    loss = placed_stillness_loss(x_t, sliding)
    np.testing.assert_allclose(loss.item(), (step_mm - ROOT_ALLOWANCE_MM) ** 2, rtol=1e-5)
    loss.backward()  # its gradient slows the root
    velocity = OUTPUT.field(np.arange(OUTPUT.size), "root_update", "velocity")[0][0]
    assert (sliding.grad[:, velocity] > 0).all()
    creeping = _moved(x_t, y_t, 0.0, (0.5 * ROOT_ALLOWANCE_MM * FPS / 1000, 0.0))
    assert placed_stillness_loss(x_t, creeping).item() < 1e-9


def _training_rows(dataset_path):
    from canis.training.dataset import load
    from canis.training.finetune_stretches import successors

    arrays = load(dataset_path)
    rows = ~arrays["validation"]
    after = successors(arrays["clip"][rows], arrays["frame"][rows])
    return arrays, rows, after


def test_placed_dogs_inputs_are_the_runtimes(tiny_dataset, tiny_model):
    """The keyframe's dogs see what a Controller reset in the standing keyframe and asked
    nothing builds; the mocap's dogs start from the mocap's standing frames."""
    from canis.runtime.controller import Controller
    from canis.runtime.inference import MotionModel
    from canis.runtime.trajectory import ControlState
    from canis.training.placed_stillness import placed_inputs, standing_starts

    arrays, rows, after = _training_rows(tiny_dataset)
    x_raw, y_raw = arrays["X"][rows], arrays["Y"][rows]
    starts = standing_starts(after, arrays["action"][rows], arrays["gait"][rows])
    assert len(starts) > 0
    xs, phases = placed_inputs(
        tiny_model, x_raw, y_raw, after, starts, 8, 5, np.random.default_rng(0)
    )
    assert (phases == 0).all()  # MANN has no phase
    assert xs.shape == (8, 5, INPUT.size) and np.isfinite(xs).all()
    controller = Controller(MotionModel(tiny_model, threads=1), speed_tracking=False)
    expected = [controller.step(ControlState.single()).copy() for _ in range(5)]
    np.testing.assert_allclose(xs[0], np.concatenate(expected), atol=1e-4)  # batch rounding
    np.testing.assert_array_equal(xs[0], xs[1])  # 2 of 8 from the keyframe: alike
    joints = INPUT.block_slice("joints")
    # Each mocap dog's first pose is a standing frame's pose.
    first = xs[2:, 0, joints]
    distance = np.abs(first[:, None] - x_raw[starts][None, :, joints]).max(-1).min(-1)
    assert (distance < 1e-4).all()


def test_finetune_logs_the_placed_stillness_term_and_names_it(tiny_dataset, tmp_path):
    from canis.training.train import LAST, train
    from conftest import finetune_run, tiny_config

    from canis.cli import main

    train(tiny_config(tiny_dataset), tmp_path / "one_step", progress=False)
    out = tmp_path / "placed"
    settings = {
        "epochs": 1, "steps_per_epoch": 2, "batch_size": 4, "own_frames": 3,
        "placed_stillness_weight": 2.0, "placed_dogs": 4,
    }  # fmt: skip
    assert finetune_run(tiny_dataset, tmp_path / "one_step" / LAST, out, **settings) == 0
    header, row = (out / "log.csv").read_text().splitlines()
    logged = dict(zip(header.split(","), row.split(","), strict=True))
    assert float(logged["placed_stillness_term"]) > 0  # an untrained dog stirs
    assert float(logged["rollout_seconds"]) > 0
    assert float(logged["moving_skating_term"]) == 0  # not asked
    tuned = tmp_path / "placed.onnx"
    export = ["export", str(out / LAST), "--out", str(tuned), "--dataset", str(tiny_dataset)]
    assert main([*export, "--card", "--card-seconds", "1"]) == 0
    card = tuned.with_suffix(".md").read_text()
    assert "settings: own_frames 3, placed_stillness_weight 2, placed_dogs 4;" in card

"""The leg-motion term (training/finetune_losses.py): each leg joint's turn in a step is the
evaluation's angular update of the joint's rotation; the term is 0 for the mocap, grows for
legs that move less on average, and counts only frames fed the network's own outputs."""

from types import SimpleNamespace

import numpy as np
import torch
from canis.evaluation.controller_metrics import angular_update_deg
from canis.runtime.features import INPUT, OUTPUT
from canis.training import finetune_config
from canis.training import finetune_stretches as stretches
from canis.training.finetune_losses import (
    LEG_ROWS,
    leg_motion_loss,
    leg_turn_deg,
)


def _trot_pairs():
    from canis.training.clips import clip_pairs, process_clip
    from synthetic_dog import gait, to_motion

    roots, rotations, _ = gait("trot", 1.5, 3.0)
    clip = process_clip(to_motion(roots, rotations, "trot"))
    x, y, frames = clip_pairs(clip)
    return clip, x, y, frames


def test_leg_turn_is_the_angular_update_of_the_joints_rotation():
    """On a turning-free clip's true (x, y) the turn of each leg joint's frame is the angle
    between its world rotations in the two frames (the root's yaw step taken back out)."""
    clip, x, y, frames = _trot_pairs()
    rows = np.arange(10, 60)
    f = frames[rows]
    world = np.stack(
        [clip.rotations[f][:, list(LEG_ROWS)], clip.rotations[f + 1][:, list(LEG_ROWS)]]
    )
    expected = angular_update_deg(world)[0]
    measured = leg_turn_deg(torch.as_tensor(x[rows]), torch.as_tensor(y[rows])).numpy()
    np.testing.assert_allclose(measured, expected, atol=0.05)
    assert expected.mean() > 1.0  # the legs swing: the test can fail


def _damped(x_t: torch.Tensor, y_t: torch.Tensor, share: float) -> torch.Tensor:
    """y with every leg joint's axes moved only `share` of the way from x's: legs that swing
    less (the clip walks straight, so the root's turn does not enter)."""
    damped = y_t.clone()
    for field in ("forward", "up"):
        to = OUTPUT.field(np.arange(OUTPUT.size), "joints", field)[list(LEG_ROWS)].reshape(-1)
        start = INPUT.field(np.arange(INPUT.size), "joints", field)[list(LEG_ROWS)].reshape(-1)
        damped[:, to] = x_t[:, start] + share * (y_t[:, to] - x_t[:, start])
    return damped


def test_term_is_zero_for_the_mocap_and_grows_for_still_legs():
    _, x, y, _ = _trot_pairs()
    x_t, y_t = torch.as_tensor(x[10:60]), torch.as_tensor(y[10:60])
    assert leg_motion_loss(x_t, y_t, x_t, y_t).item() < 1e-6
    # Legs moving as much as the mocap's, at other moments (the rows in another order), cost
    # nothing: only the amount of motion is asked for, not its phase.
    assert leg_motion_loss(x_t, y_t, x_t.flip(0), y_t.flip(0)).item() < 1e-6
    assert (leg_turn_deg(x_t, y_t) - leg_turn_deg(x_t.flip(0), y_t.flip(0))).abs().max() > 1.0
    truth = leg_turn_deg(x_t, y_t)
    damped = _damped(x_t, y_t, 0.2).requires_grad_(True)
    turned = leg_turn_deg(x_t, damped)
    # Axes moved a fifth of the way in a straight line turn about a fifth of the angle.
    np.testing.assert_allclose(turned.mean().item(), 0.2 * truth.mean().item(), rtol=0.1)
    loss = leg_motion_loss(x_t, damped, x_t, y_t)
    assert loss.item() > 0.5 * (0.8 * truth.mean(0)).square().mean().item()
    loss.backward()  # a gradient that swings the legs further
    stepped = damped.detach() - 1e-3 * damped.grad
    assert leg_motion_loss(x_t, stepped, x_t, y_t).item() < loss.item()


def test_grouped_term_keeps_still_legs_from_paying_for_short_swings():
    """Over the batch, legs that swing half as far as the mocap's plus legs that stir where the
    mocap's stand still can average out to the mocap's motion; held group by group (an action
    and gait each) they cannot."""
    _, x, y, _ = _trot_pairs()
    x_t, y_t = torch.as_tensor(x[10:40]), torch.as_tensor(y[10:40])
    half = _damped(x_t, y_t, 0.5)
    still = _damped(x_t, y_t, 0.0)
    x_both = torch.cat([x_t, x_t])
    predicted = torch.cat([half, half])  # the walking legs swing short, the standing ones stir
    mocap = torch.cat([y_t, still])
    groups = torch.tensor([3] * len(x_t) + [7] * len(x_t))
    over_batch = leg_motion_loss(x_both, predicted, x_both, mocap)
    by_group = leg_motion_loss(x_both, predicted, x_both, mocap, groups)
    assert by_group.item() > 20 * over_batch.item()
    # Each group's shortfall, weighed by its rows: here both groups miss by half the swing.
    truth = leg_turn_deg(x_t, y_t).mean(0)
    np.testing.assert_allclose(by_group.item(), (0.5 * truth).square().mean().item(), rtol=0.25)
    assert leg_motion_loss(x_both, mocap, x_both, mocap, groups).item() < 1e-6


def _raw_units() -> stretches.Standardiser:
    """A standardiser that leaves values as they are (mean 0, std 1, no clamp in reach)."""
    size_x, size_y = INPUT.size, OUTPUT.size
    normalisation = {
        "x_mean": torch.zeros(size_x), "x_std": torch.ones(size_x),
        "y_mean": torch.zeros(size_y), "y_std": torch.ones(size_y),
        "x_min": torch.full((size_x,), -1e3), "x_max": torch.full((size_x,), 1e3),
    }  # fmt: skip
    return stretches.Standardiser(normalisation, size_y)


def _trot_split():
    _, x, y, _ = _trot_pairs()
    after = np.append(np.arange(1, len(x)), -1)
    return SimpleNamespace(
        x=torch.as_tensor(x),
        y=torch.as_tensor(y),
        after=after,
        phase=torch.zeros(len(x)),
    )


def _still_legs(split):
    """predict(x, phase) that returns one pose whatever the input: the legs stop in the own
    frames."""
    constant = split.y[:1]
    return lambda x_in, phase: constant.repeat(len(x_in), 1)


def test_leg_motion_counts_only_the_networks_own_frames():
    """From the mocap's x the turn mostly measures where the prediction lands against the
    mocap's pose, so the term leaves those frames out (they count as the stretch's frames)."""
    split, standard, model = _trot_split(), _raw_units(), torch.nn.Dropout(0.3)
    starts = np.arange(10, 14)
    loop = finetune_config.ClosedLoopConfig(ground_truth_frames=3, leg_motion_weight=2.0)
    args = (model, _still_legs(split), split, starts, standard, loop)
    term, values = stretches.leg_motion_stretch(*args, 0)
    assert term.item() == 0.0 and values["leg_motion"] == 0.0
    term, values = stretches.leg_motion_stretch(*args, 2)
    assert values["leg_motion"] > 0.1
    np.testing.assert_allclose(term.item(), 2.0 * values["leg_motion"], rtol=1e-6)


def test_the_means_are_each_frames_rows():
    """Each own frame's batch mean against the mocap's, averaged over the stretch's frames."""
    split, standard, model = _trot_split(), _raw_units(), torch.nn.Dropout(0.3)
    starts, predict = np.arange(10, 16), _still_legs(split)
    loop = finetune_config.ClosedLoopConfig(ground_truth_frames=1, leg_motion_weight=1.0)
    _, values = stretches.leg_motion_stretch(model, predict, split, starts, standard, loop, 2)
    x0 = split.y[:1].repeat(len(starts), 1)  # the own frames' inputs: rebuilt from the pose
    x_own = torch.as_tensor(
        stretches.next_input(split.x[starts].numpy(), x0.numpy(), split.x[starts + 1].numpy())
    )
    # The second own frame starts from the same pose again (the prediction does not change).
    by_frame = [
        leg_motion_loss(x_own, x0, split.x[starts + k], split.y[starts + k]) for k in (1, 2)
    ]
    expected = (by_frame[0] + by_frame[1]).item() / 3  # two own frames of three
    np.testing.assert_allclose(values["leg_motion"], expected, rtol=1e-4)


def test_finetune_logs_the_leg_motion_term(tiny_dataset, tmp_path):
    from canis.training.train import LAST, train
    from conftest import tiny_config

    from canis.cli import main

    train(tiny_config(tiny_dataset), tmp_path / "one_step", progress=False)
    out = tmp_path / "run"
    options = ["--epochs", "1", "--steps-per-epoch", "2", "--batch-size", "4", "--own-frames", "3"]
    start = ["--start", str(tmp_path / "one_step" / LAST), "--dataset", str(tiny_dataset)]
    term = ["--leg-motion-weight", "0.1"]
    assert main(["finetune", *start, "--out", str(out), *options, *term]) == 0
    header, row = (out / "log.csv").read_text().splitlines()
    logged = dict(zip(header.split(","), row.split(","), strict=True))
    assert float(logged["leg_motion_term"]) > 0
    tuned = tmp_path / "legs.onnx"
    export = ["export", str(out / LAST), "--out", str(tuned)]
    assert main([*export, "--dataset", str(tiny_dataset), "--card", "--card-seconds", "1"]) == 0
    card = tuned.with_suffix(".md").read_text()
    assert "--leg-motion-weight 0.1" in card and "leg-motion weight 0.1 over each batch" in card


def test_a_log_begun_before_a_new_column_keeps_its_columns(tmp_path):
    """Resuming a run logged by an older version: the new column is left out of its log rather
    than shifting the columns after it."""
    from canis.training.train import _append_log

    log = tmp_path / "log.csv"
    log.write_text("epoch,train_loss,validation_loss\n1,0.5,0.6\n")
    _append_log(
        log, {"epoch": 2, "train_loss": 0.4, "leg_motion_term": 3.0, "validation_loss": 0.55}
    )
    assert log.read_text().splitlines()[1:] == ["1,0.5,0.6", "2,0.4,0.55"]


def test_leg_motion_is_measured_without_dropout():
    """The term sees the network as the game runs it (eval mode: no dropout jitter) and leaves
    it in training mode; the MSE is not counted twice."""
    _, x, y, _ = _trot_pairs()
    standard = _raw_units()
    after = np.append(np.arange(1, len(x)), -1)
    split = SimpleNamespace(
        x=torch.as_tensor(x), y=torch.as_tensor(y), after=after, phase=torch.zeros(len(x))
    )
    model, modes = torch.nn.Dropout(0.3), []
    constant = torch.as_tensor(y[:1])

    def predict(x_in, phase):  # one pose whatever the input: the legs stop in the own frames
        modes.append(model.training)
        return constant.repeat(len(x_in), 1)

    model.train()
    loop = finetune_config.ClosedLoopConfig(leg_motion_weight=1.0, contact_weight=1.0)
    term, values = stretches.leg_motion_stretch(
        model, predict, split, np.arange(10, 14), standard, loop, 2
    )
    assert modes and not any(modes) and model.training
    assert values["contact"] == 0.0 and values["leg_motion"] > 0.1
    # The term alone (weight 1): the stretch's MSE, far from 0 for this pose, is not in it.
    np.testing.assert_allclose(term.item(), values["leg_motion"], rtol=1e-6)


def test_a_half_turn_has_a_finite_gradient():
    """A joint turned half a circle in a step (its chord rounds to 8, or past it) reads about
    180 degrees with a finite gradient: at the arcsine's end its slope is infinite, and a NaN
    gradient from one such joint once made a fine-tune's weights NaN."""
    _, x, y, _ = _trot_pairs()
    x_t = torch.as_tensor(x[10:12])
    y_t = torch.as_tensor(y[10:12]).clone()
    forward = OUTPUT.field(np.arange(OUTPUT.size), "joints", "forward")[list(LEG_ROWS)]
    x_forward = INPUT.field(np.arange(INPUT.size), "joints", "forward")[list(LEG_ROWS)]
    y_t[:, forward.reshape(-1)] = -x_t[:, x_forward.reshape(-1)]  # turned about the up axis
    up = OUTPUT.field(np.arange(OUTPUT.size), "joints", "up")[list(LEG_ROWS)]
    x_up = INPUT.field(np.arange(INPUT.size), "joints", "up")[list(LEG_ROWS)]
    y_t[:, up.reshape(-1)] = x_t[:, x_up.reshape(-1)]
    y_t[:, OUTPUT.field(np.arange(OUTPUT.size), "root_update", "yaw_velocity")] = 0.0
    y_t.requires_grad_(True)
    turned = leg_turn_deg(x_t, y_t)
    assert (turned > 179.0).all()
    turned.sum().backward()
    assert torch.isfinite(y_t.grad).all()

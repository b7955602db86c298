"""leg_turn_deg (training/finetune_losses.py), how far each leg joint turns in a predicted step
(the placed-stillness term holds a standing dog's joints still by it): the evaluation's angular
update of the joint's rotation, with a finite gradient at a half turn; and the fine-tuning's log
across versions that log other terms."""

import numpy as np
import torch
from canis.evaluation.controller_metrics import angular_update_deg
from canis.runtime.features import INPUT, OUTPUT
from canis.training.finetune_losses import LEG_ROWS, leg_turn_deg


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


def test_a_log_begun_by_another_version_keeps_its_columns(tmp_path):
    """Resuming a run logged by an older version: a column added since is left out of its log
    rather than shifting the columns after it; one deleted since (the leg-motion term's) is
    left empty."""
    from canis.training.train import _append_log

    log = tmp_path / "log.csv"
    log.write_text("epoch,train_loss,validation_loss\n1,0.5,0.6\n")
    _append_log(
        log, {"epoch": 2, "train_loss": 0.4, "moving_skating_term": 3.0, "validation_loss": 0.55}
    )
    assert log.read_text().splitlines()[1:] == ["1,0.5,0.6", "2,0.4,0.55"]
    older = tmp_path / "older.csv"
    older.write_text("epoch,train_loss,leg_motion_term,validation_loss\n1,0.5,0.0,0.6\n")
    _append_log(older, {"epoch": 2, "train_loss": 0.4, "validation_loss": 0.55})
    assert older.read_text().splitlines()[1:] == ["1,0.5,0.0,0.6", "2,0.4,,0.55"]


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

"""The moving-gait term (training/finetune_moving.py): soft footfalls counted as the gait table's
detector counts them, the lateral and diagonal pairs' correlation as runtime/readouts.py pairs them,
the mocap's windows by speed as the reference, each dog paying its own miss beyond the
allowance; the fine-tuning logs it and the card names it."""

import numpy as np
import pytest
import torch
from canis.runtime.features import PAW_ROWS
from canis.runtime.readouts import GAITS, _correlation, classify_gaits
from canis.training import finetune_moving
from canis.training.finetune_moving import (
    GAIT_ALLOWANCE,
    MOVE,
    gait_by_speed,
    moving_gait_loss,
    pair_correlations,
    soft_contacts,
    window_rows,
)
from canis.training.finetune_stretches import successors
from canis.training.shown_pose import shown_step_m
from paw_steps import Y_HIPS, _steps
from test_moving_skating import Y_ROOT_VELOCITY

FPS = 60


def _footfalls(gait: str, frames: int = 61, stride_frames: int = 30) -> np.ndarray:
    """(frames, 4) hard footfalls (left front, right front, left hind, right hind): each paw
    down the first 60% of its stride, the paws' offsets (share of a stride) as the gait's."""
    offsets = {
        "pace": (0.0, 0.5, 0.0, 0.5),
        "trot": (0.0, 0.5, 0.5, 0.0),
        "walk": (0.0, 0.5, 0.75, 0.25),  # the lateral sequence: each paw a quarter apart
    }[gait]
    phase = np.arange(frames)[:, None] / stride_frames - np.array(offsets)
    return (phase % 1.0 < 0.6).astype(np.float64)


@pytest.mark.parametrize("gait", ["pace", "trot", "walk"])
def test_the_pairs_are_the_gait_classifiers(gait):
    footfalls = _footfalls(gait)
    lateral, diagonal = pair_correlations(torch.as_tensor(footfalls)[None])[0].numpy()
    f = footfalls.T
    np.testing.assert_allclose(
        lateral, 0.5 * (_correlation(f[0], f[2]) + _correlation(f[1], f[3])), atol=1e-5
    )
    np.testing.assert_allclose(
        diagonal, 0.5 * (_correlation(f[0], f[3]) + _correlation(f[1], f[2])), atol=1e-5
    )
    verdict = classify_gaits(footfalls > 0.5, np.full(61, 1.0), np.ones(61, dtype=bool))
    assert GAITS[np.bincount(verdict).argmax()] == gait
    if gait == "pace":
        assert lateral > 0.9 and diagonal < -0.5  # the pairs overlap: 60% down
    if gait == "trot":
        assert diagonal > 0.9 and lateral < -0.5


def test_a_paw_that_never_moves_has_no_correlation_and_a_finite_gradient():
    footfalls = torch.as_tensor(_footfalls("pace"))
    footfalls[:, 0] = 1.0  # the left front always down
    footfalls.requires_grad_()
    pairs = pair_correlations(footfalls[None])
    assert abs(pairs[0, 0].item() - 0.5) < 1e-3  # the right pair's 1 and the left's 0, halved
    pairs.sum().backward()
    assert torch.isfinite(footfalls.grad).all()


def _moving(paw_world_mps: float, body_mps: float, lifted_m: float = 0.0):
    """_steps' dog (4 rows), its root going forward at body_mps, its hips (and the shown paws
    with them) moving so that the paws go paw_world_mps in the world, lifted by lifted_m."""
    x, y = _steps(np.full(4, (paw_world_mps - body_mps) * 100.0 / FPS), 0.0)
    y[:, Y_ROOT_VELOCITY[1]] = body_mps
    y[:, Y_HIPS[1]] += 2 * lifted_m  # the shown pose takes half of the hips' lift
    return x, y


def test_soft_contacts_count_a_paw_down_as_the_stride_detector_does():
    # Planted: still in the world, on the ground.
    assert (soft_contacts(*_moving(0.0, 0.0)) > 0.95).all()
    # Lifted: the paws shown above 6 cm are up, however still; those still low are down.
    lifted = _moving(0.0, 0.0, lifted_m=0.1)
    height_m = shown_step_m(*lifted, PAW_ROWS)[1][..., 1]
    down = soft_contacts(*lifted)
    assert (height_m > 0.06).any() and (down[height_m > 0.06] < 0.05).all()
    assert (down[height_m < 0.03] > 0.95).all()
    # Low but moving 1 m/s: a swinging paw while the dog walks at 0.5 m/s...
    assert (soft_contacts(*_moving(1.0, 0.5)) < 0.05).all()
    # ...and a stance paw sliding under a canter at 3 m/s (the stride detector's limits are
    # raised with the body's speed: the mocap's galloping stance paws slide 1-2 m/s).
    assert (soft_contacts(*_moving(1.0, 3.0)) > 0.95).all()


def test_the_reference_is_the_mocaps_most_used_gaits_windows_by_speed(monkeypatch):

    # Three clips: one pacing at 1.1 m/s (20 frames), one walking at 1.1 (15 frames), one
    # trotting at 1.9 (20 frames); footfalls given through soft_contacts, windows of 9 frames,
    # stride 8 frames.
    monkeypatch.setattr(finetune_moving, "GAIT_WINDOW_FRAMES", 9)
    monkeypatch.setattr(finetune_moving, "MIN_BIN_ROWS", 5)
    footfalls = np.concatenate(
        [
            _footfalls("pace", 20, stride_frames=8),
            _footfalls("walk", 15, stride_frames=8),
            _footfalls("trot", 20, stride_frames=8),
        ]
    )
    monkeypatch.setattr(
        finetune_moving,
        "soft_contacts",
        lambda x, y: torch.as_tensor(footfalls, dtype=torch.float32),
    )
    lengths = [20, 15, 20]
    clip = np.repeat([0, 1, 2], lengths)
    frame = np.concatenate([np.arange(n) for n in lengths])
    gait = np.repeat([GAITS.index("pace"), GAITS.index("walk"), GAITS.index("trot")], lengths)
    after = successors(clip, frame)
    windows = window_rows(after)
    assert windows.shape == (12 + 7 + 12, 9) and (clip[windows] == clip[windows[:, :1]]).all()
    x = torch.zeros(len(clip), 480)
    y = torch.zeros(len(clip), 363)
    y[:, Y_ROOT_VELOCITY[1]] = torch.as_tensor(np.repeat([1.1, 1.1, 1.9], lengths))
    action = np.full(len(clip), MOVE)
    centres, pairs = gait_by_speed(x, y, action, after, gait)
    pacing, trotting = pairs[np.argmin(abs(centres - 1.1))], pairs[np.argmin(abs(centres - 1.9))]
    # At 1.1 m/s the pace's 12 windows outnumber the walk's 7: the reference is the pace's
    # alone, where the mean of all 19 would be half a pace.
    walking = pair_correlations(torch.as_tensor(footfalls[windows[12:19]], dtype=torch.float32))
    assert walking[:, 0].mean() < 0.0
    assert pacing[0] > 0.9 and pacing[1] < -0.5
    assert trotting[1] > 0.9 and trotting[0] < -0.5
    # Without the labels (--moving-gait-reference all): the mean of all 19, half a pace.
    centres, pairs = gait_by_speed(x, y, action, after)
    mixed = pair_correlations(torch.as_tensor(footfalls[windows[:19]], dtype=torch.float32))
    np.testing.assert_allclose(pairs[np.argmin(abs(centres - 1.1))], mixed.mean(0), atol=1e-6)
    # With the walk the more used, it is the walk's.
    gait[clip == 0] = GAITS.index("walk")
    gait[clip == 1] = GAITS.index("pace")
    centres, pairs = gait_by_speed(x, y, action, after, gait)
    np.testing.assert_allclose(
        pairs[np.argmin(abs(centres - 1.1))],
        pair_correlations(torch.as_tensor(footfalls[windows[:12]], dtype=torch.float32)).mean(0),
        atol=1e-6,
    )
    # Windows centred on frames not asked to move are left out.
    action[:] = MOVE + 1
    with pytest.raises(ValueError, match="--moving-gait-weight: the training clips"):
        gait_by_speed(x, y, action, after, gait)


def test_each_dog_pays_its_own_miss_beyond_the_allowance():
    pacing = torch.as_tensor(
        np.stack([_footfalls("pace"), _footfalls("pace")]), dtype=torch.float32
    )
    own = pair_correlations(pacing).detach()
    # As the reference, or within the allowance of it: nothing.
    assert moving_gait_loss(pacing, own).item() == 0.0
    assert moving_gait_loss(pacing, own + 0.9 * GAIT_ALLOWANCE).item() == 0.0
    # The first dog asked to walk (both pairs near 0), the second to pace as it does.
    reference = own.clone()
    reference[0] = 0.0
    pacing.requires_grad_()
    loss = moving_gait_loss(pacing, reference)
    expected = ((own[0].abs() - GAIT_ALLOWANCE) ** 2).sum() / 4
    np.testing.assert_allclose(loss.item(), expected.item(), rtol=1e-5)
    loss.backward()
    assert pacing.grad[0].abs().sum() > 0 and (pacing.grad[1] == 0).all()
    # A step down the gradient takes the first dog's lateral pairs apart.
    stepped = (pacing - 0.05 * pacing.grad).detach()
    assert pair_correlations(stepped)[0, 0] < own[0, 0]


def test_the_moving_gait_weight_is_checked_and_named():
    from canis.training.finetune_config import ClosedLoopConfig
    from test_moving_course import _reproduce_line

    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="--moving-gait-weight .*: must be a finite"):
            ClosedLoopConfig(moving_gait_weight=bad)
    loop = ClosedLoopConfig(moving_gait_weight=2.0)
    assert loop.moves_dogs() and loop.identity()["moving_gait_weight"] == 2.0
    assert "--moving-gait-weight 2" in _reproduce_line(loop)
    assert "--moving-gait-weight" not in _reproduce_line(ClosedLoopConfig())
    with pytest.raises(ValueError, match="--moving-gait-reference most-used: needs --moving-ga"):
        ClosedLoopConfig(moving_gait_reference="most-used")
    with pytest.raises(ValueError, match="--moving-gait-reference mode: one of all, most-used"):
        ClosedLoopConfig(moving_gait_weight=2.0, moving_gait_reference="mode")
    held = ClosedLoopConfig(moving_gait_weight=2.0, moving_gait_reference="most-used")
    line = _reproduce_line(held)
    assert "--moving-gait-weight 2 --moving-gait-reference most-used" in line
    assert "--moving-gait-reference" not in _reproduce_line(loop)


def test_finetune_logs_the_moving_gait_term_and_the_card_names_it(
    tiny_dataset, tmp_path, monkeypatch
):
    from canis.training.train import LAST, train
    from conftest import tiny_config

    from canis.cli import main

    monkeypatch.setattr(finetune_moving, "MIN_BIN_ROWS", 10)  # the synthetic dogs' clips are short
    monkeypatch.setattr(finetune_moving, "GAIT_WINDOW_FRAMES", 15)
    start = tmp_path / "one_step"
    train(tiny_config(tiny_dataset), start, progress=False)
    out = tmp_path / "gait"
    run = [
        "finetune", "--start", str(start / LAST), "--dataset", str(tiny_dataset),
        "--out", str(out), "--epochs", "1", "--steps-per-epoch", "2", "--batch-size", "4",
        "--own-frames", "3", "--placed-dogs", "4", "--moving-gait-weight", "3",
    ]  # fmt: skip
    assert main(run) == 0
    header, row = (out / "log.csv").read_text().splitlines()
    logged = dict(zip(header.split(","), row.split(","), strict=True))
    assert float(logged["moving_gait_term"]) > 0  # the synthetic dogs' gaits are not the clips'
    tuned = tmp_path / "gait.onnx"
    assert (
        main(["export", str(out / LAST), "--out", str(tuned), "--card", "--card-seconds", "1"]) == 0
    )
    card = tuned.with_suffix(".md").read_text()
    assert "--moving-gait-weight 3" in card
    assert "moving-gait weight 3.0 on 4 moving dogs, straight ones" in card


def test_the_term_draws_only_the_dogs_asked_straight_ahead(monkeypatch):
    from canis.training.placed_speed import KEPT_FRAMES, MovingDogs

    class Model(torch.nn.Module):
        pass

    dogs = MovingDogs.__new__(MovingDogs)
    dogs.model, dogs.gait = Model(), (np.array([0.5, 1.5]), np.zeros((2, 2)))
    dogs.xs, dogs.asked_mps = np.zeros((4, KEPT_FRAMES, 480)), np.full(4, 1.0)
    dogs.headings = np.zeros((4, KEPT_FRAMES, 2))
    dogs.headings[[1, 3], :, 1] = 0.5  # turning
    dogs.gait_generator = np.random.default_rng(0)
    drawn = []

    def steps(predict, chosen, generator, unroll):
        drawn.extend(chosen)
        return torch.zeros(len(chosen) * unroll, 480), torch.zeros(len(chosen) * unroll, 363), None

    monkeypatch.setattr(dogs, "_steps", steps)
    monkeypatch.setattr(finetune_moving, "GAIT_WINDOW_FRAMES", 8)
    monkeypatch.setattr(
        finetune_moving,
        "soft_contacts",
        lambda x, y: torch.as_tensor(_footfalls("pace", len(x), 4), dtype=torch.float32),
    )
    assert dogs.gait_loss(None, 16).item() > 0  # pacing where the reference has no pattern
    assert set(drawn) == {0, 2}
    dogs.headings[[0, 2], :, 1] = -0.5
    assert dogs.gait_loss(None, 16).item() == 0.0


def test_the_terms_draws_leave_the_epochs_generator_as_it_was(monkeypatch):
    from canis.training import onnx_graph
    from canis.training.placed_speed import KEPT_FRAMES, MovingDogs

    monkeypatch.setattr(onnx_graph, "ExportedModel", lambda *args: None)
    monkeypatch.setattr(onnx_graph, "write_wrapped", lambda *args: None)
    monkeypatch.setattr(
        MovingDogs,
        "_driven",
        lambda self, generator: (np.zeros((4, KEPT_FRAMES, 480)), generator.uniform(0.4, 3.6, 4)),
    )

    def after_refreshes(gait, refreshes=2):
        data = type("Data", (), {"normalisation": None})
        dogs = MovingDogs(None, {}, data, None, "unused", 4, gait=gait)
        generator = np.random.default_rng(8)
        draws = []
        for _ in range(refreshes):
            dogs.refresh(generator)
            if gait is not None:
                draws.append(dogs.gait_generator.random())
        return generator.random(), draws

    gait = (np.array([0.5, 1.5]), np.zeros((2, 2)))
    without, _ = after_refreshes(None)
    with_term, draws = after_refreshes(gait)
    assert with_term == without  # the epoch's generator drew the same either way
    assert draws[0] != draws[1]  # each refresh has draws of its own
    assert after_refreshes(gait, 1)[1] == draws[:1]  # and a resumed epoch the same

"""Closed-loop training's rollout rebuilds x as the runtime does; the contact term measures
world-frame paw motion; the skating the moving-skating term counts is the evaluation's
measure."""

import json
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from canis.runtime.controller import Controller
from canis.runtime.features import FPS, INPUT, PAW_ROWS
from canis.runtime.inference import MotionModel
from canis.runtime.root import rotate_xz, vectors_to_root_frame
from canis.runtime.trajectory import ControlState
from canis.training import finetune_config
from canis.training import finetune_stretches as stretches
from canis.training.finetune_losses import paw_world_velocity_mps, step_skating_cm
from canis.training.finetune_losses import rotate_xz as rotate_xz_torch


def test_next_input_is_the_runtimes_next_x(tiny_model):
    """The x the rollout builds from (x, y) is the x Controller.step writes on the next frame,
    given the same trajectory block: the pose block comes only from x and y."""
    model = MotionModel(tiny_model)
    controller = Controller(model, speed_tracking=False)
    control = ControlState(np.array([[0.3, 1.2]]), np.array([0.4]), np.array([1]))
    for _ in range(5):  # leave the standing start
        controller.step(control)
    x0 = controller.step(control).copy()
    y0 = model.run(x0)["y"]
    x1 = controller.step(control).copy()
    mocap = x1.copy()
    mocap[:, INPUT.block_slice("joints")] = 0.0  # the joint block must come from x0 and y0
    rebuilt = stretches.next_input(x0, y0, mocap)
    assert np.abs(x1[:, INPUT.block_slice("joints")]).max() > 0.01
    np.testing.assert_allclose(rebuilt, x1, atol=2e-5)


def test_fine_tuning_clamps_inputs_as_the_exported_graph_does():
    """Standardiser.x_standard and the exported graph clamp x to one range (the training range
    widened by INPUT_RANGE_MARGIN): an input beyond the training range but within the margin
    reaches the network in both, one beyond the margin is clamped in both. (It once clamped
    to the bare range: fine-tuned networks whose dogs left it trained on other inputs than
    the game gave them.)"""
    from canis.export.onnx_export import INPUT_RANGE_MARGIN, ExportedModel
    from canis.training.models import create_model

    torch.manual_seed(0)
    size = INPUT.size
    normalisation = {
        "x_mean": torch.zeros(size),
        "x_std": torch.full((size,), 2.0),
        "y_mean": torch.zeros(363),
        "y_std": torch.ones(363),
        "x_min": torch.full((size,), -1.0),
        "x_max": torch.full((size,), 1.0),
    }
    model = create_model("vnn", hidden=32).eval()
    standard = stretches.Standardiser(normalisation, 363)
    exported = ExportedModel(model, normalisation)
    within_margin = 1.0 + 0.5 * INPUT_RANGE_MARGIN * 2.0  # beyond x_max by half the margin
    beyond = 1.0 + 3.0 * INPUT_RANGE_MARGIN * 2.0
    for value in (0.5, within_margin, -within_margin, beyond, -beyond):
        x_raw = torch.full((1, size), value)
        with torch.no_grad():
            trained = standard.y_raw(model(standard.x_standard(x_raw)))
            np.testing.assert_allclose(trained, exported(x_raw), atol=1e-5)
    inside = standard.x_standard(torch.full((1, size), within_margin))
    np.testing.assert_allclose(inside, within_margin / 2.0, rtol=1e-6)  # not clamped


def _raw_normalisation() -> dict:
    """A standardisation that leaves values as they are (and clamps nothing near them)."""
    size = INPUT.size
    return {
        "x_mean": torch.zeros(size),
        "x_std": torch.ones(size),
        "y_mean": torch.zeros(363),
        "y_std": torch.ones(363),
        "x_min": torch.full((size,), -100.0),
        "x_max": torch.full((size,), 100.0),
    }


def test_stretch_feeds_back_the_rebuilt_input():
    torch.manual_seed(0)
    rows, size = 6, INPUT.size
    x_raw = torch.randn(rows, size)
    y_train = torch.randn(rows, 363)
    after = np.array([1, 2, 3, 4, 5, -1])
    standard = stretches.Standardiser(_raw_normalisation(), 363)
    seen = []
    outputs = torch.randn(rows, 363) * 0.1

    def predict(x, phase):
        seen.append(x.clone())
        return outputs[phase.long()] + 0 * x.sum()

    split = SimpleNamespace(x=x_raw, y=y_train, after=after, phase=torch.arange(rows), planted=None)
    stretches.stretch_loss(predict, split, np.array([0]), standard, 1, 2, None)
    assert len(seen) == 3
    expected = stretches.next_input(seen[0].numpy(), outputs[[0]].numpy(), x_raw[[1]].numpy())
    np.testing.assert_allclose(seen[1].numpy(), expected, atol=1e-6)
    assert not np.allclose(seen[1].numpy(), x_raw[[1]].numpy())  # not the mocap's


def test_stretch_feeds_back_pfnns_phase_as_the_runtime_advances_it():
    """PFNN's own-output frames read the phase the runtime would feed: the last one plus the
    predicted increment (de-standardised), wrapped to [0, 2pi) as Controller.step wraps it;
    the mocap's frames read the mocap's."""
    rows, size = 6, INPUT.size
    phase_delta = {"phase_delta_mean": torch.tensor([0.1]), "phase_delta_std": torch.tensor([0.5])}
    standard = stretches.Standardiser(_raw_normalisation() | phase_delta, 363)
    seen = []
    increment = 4.0  # standardised: 0.1 + 0.5 * 4 = 2.1 rad a frame

    def predict(x, phase):
        seen.append(phase.clone())
        out = torch.zeros(len(x), 364) + 0 * x.sum()
        out[:, 363] = increment
        return out

    mocap_phase = torch.tensor([5.0, 0.5, 1.0, 1.5, 2.0, 2.5])
    split = SimpleNamespace(
        x=torch.zeros(rows, size),
        y=torch.zeros(rows, 364),
        after=np.array([1, 2, 3, 4, 5, -1]),
        phase=mocap_phase,
        planted=None,
    )
    stretches.stretch_loss(predict, split, np.array([0]), standard, 2, 2, None)
    expected = [5.0, 0.5, (0.5 + 2.1) % (2 * np.pi), (0.5 + 4.2) % (2 * np.pi)]
    np.testing.assert_allclose(torch.cat(seen).numpy(), expected, atol=1e-6)
    # Controller.step's update (phase + increment, modulo 2pi) written out, over three steps
    # that wrap (tests/test_moving_dogs.py holds the unrolls to the runtime itself).
    runtime_phase = (np.float64(5.0) + 2.1 * 3) % (2 * np.pi)
    ours = standard.next_phase_rad(torch.tensor([5.0]), torch.full((1, 364), increment))
    ours = standard.next_phase_rad(ours, torch.full((1, 364), increment))
    ours = standard.next_phase_rad(ours, torch.full((1, 364), increment))
    np.testing.assert_allclose(ours.numpy(), [runtime_phase], atol=1e-5)


def test_stretch_starts_need_consecutive_frames():
    after = stretches.successors(np.array([0, 0, 0, 1, 1]), np.array([0, 1, 2, 0, 1]))
    assert after.tolist() == [1, 2, -1, 4, -1]
    assert stretches.stretch_starts(after, 3).tolist() == [0]
    assert stretches.stretch_starts(after, 2).tolist() == [0, 1, 3]


def test_jump_stretches_are_those_that_pass_a_jump_frame():
    after = stretches.successors(np.zeros(6, dtype=int), np.arange(6))
    starts = stretches.stretch_starts(after, 3)  # 0-3
    jump = np.zeros(6, dtype=bool)
    jump[4] = True
    assert stretches.stretches_through(starts, after, 3, jump).tolist() == [2, 3]
    assert stretches.stretches_through(starts, after, 1, jump).tolist() == []


def test_no_stretch_and_no_placed_dog_uses_the_rows_training_left_out(tiny_dataset, tmp_path):
    """A network trained with `sniffing = false` is fine-tuned likewise: no stretch passes a
    sniffing row and no placed dog starts on one; with sniffing drawn, every row is used."""
    from canis.training.dataset import load
    from canis.training.placed_stillness import standing_starts

    data = load(tiny_dataset)
    arrays = dict(data.arrays)
    marked = np.zeros(len(arrays["X"]), dtype=bool)
    marked[::5] = True  # as if every fifth row sniffed
    arrays["sniffing"] = marked
    path = tmp_path / "marked.npz"
    np.savez(path, metadata=np.array(json.dumps(data.metadata)), **arrays)
    training = SimpleNamespace(x_train=None, y_train=None, phase_train=None)
    kept = stretches.StretchData(str(path), training, validation=False)
    left = stretches.StretchData(str(path), training, validation=False, sniffing=False)
    assert not kept.left_out.any()
    assert np.array_equal(left.left_out, marked[~arrays["validation"]])
    every = stretches.drawable_starts(kept, 4)
    assert np.array_equal(every, stretches.stretch_starts(kept.after, 4))
    starts = stretches.drawable_starts(left, 4)
    assert 0 < len(starts) < len(every)
    frames = [starts]
    for _ in range(3):
        frames.append(left.after[frames[-1]])
    assert not left.left_out[np.concatenate(frames)].any()
    standing = standing_starts(left.after, left.action, left.gait)
    placed = standing_starts(left.after, left.action, left.gait, left.left_out)
    assert left.left_out[standing].any() and not left.left_out[placed].any()
    assert np.array_equal(placed, standing[~left.left_out[standing]])
    # sniffing_walks = false leaves out the marked slow walks too, beside the idle sniffs.
    walks = np.zeros(len(arrays["X"]), dtype=bool)
    walks[1::7] = True
    arrays["sniffing_walk"] = walks
    np.savez(path, metadata=np.array(json.dumps(data.metadata)), **arrays)
    both = stretches.StretchData(
        str(path), training, validation=False, sniffing=False, sniffing_walks=False
    )
    assert np.array_equal(both.left_out, (marked | walks)[~arrays["validation"]])
    only_walks = stretches.StretchData(str(path), training, validation=False, sniffing_walks=False)
    assert np.array_equal(only_walks.left_out, walks[~arrays["validation"]])
    # A dataset built before the slow walks were marked cannot leave them out: refused.
    del arrays["sniffing_walk"]
    np.savez(path, metadata=np.array(json.dumps(data.metadata)), **arrays)
    with pytest.raises(ValueError, match="has no sniffing_walk column.* build it again"):
        stretches.StretchData(str(path), training, validation=False, sniffing_walks=False)


def test_a_jump_share_draws_that_share_from_the_jump_stretches():
    starts, jumps = np.arange(100), np.array([500, 501])
    batch = stretches.draw_stretches(np.random.default_rng(3), starts, 32, 0.25, jumps)
    assert len(batch) == 32 and np.isin(batch, jumps).sum() == 8
    # Share 0 is the draw of the runs before the option, so their seeds give the same stretches.
    plain = stretches.draw_stretches(np.random.default_rng(3), starts, 32, 0.0, None)
    np.testing.assert_array_equal(plain, np.random.default_rng(3).choice(starts, 32))


def test_a_jump_weight_weighs_the_jump_frames_in_the_mse():
    from canis.runtime.features import ACTIONS

    generator = torch.Generator().manual_seed(0)
    y = torch.randn(4, 5, generator=generator)
    prediction = torch.randn(4, 5, generator=generator)
    action = np.array([ACTIONS.index(a) for a in ("move", "jump", "idle", "jump")])
    split = SimpleNamespace(y=y, action=action)
    standard = SimpleNamespace(x_raw=lambda x: x, y_raw=lambda y: y)  # no other term reads them
    per_row = (prediction - y).square().mean(1)
    weighed = finetune_config.ClosedLoopConfig(jump_weight=10.0)
    loss, _ = stretches.frame_loss(prediction, None, np.arange(4), split, standard, weighed)
    expected = (per_row * torch.tensor([1.0, 10.0, 1.0, 10.0])).mean()
    assert loss.item() == pytest.approx(expected.item(), rel=1e-6)
    plain, _ = stretches.frame_loss(
        prediction, None, np.arange(4), split, standard, finetune_config.ClosedLoopConfig()
    )
    assert plain.item() == pytest.approx(per_row.mean().item(), rel=1e-6)


def test_curriculum_grows_to_the_full_stretch():
    config = finetune_config.ClosedLoopConfig(own_frames=8, curriculum_epochs=4)
    assert [config.own_frames_at(e) for e in range(6)] == [2, 4, 6, 8, 8, 8]
    assert finetune_config.ClosedLoopConfig(own_frames=0).own_frames_at(3) == 0


def test_torch_rotation_matches_the_runtime():
    vectors, yaw = np.random.default_rng(0).normal(size=(5, 3, 2)), np.linspace(-3, 3, 5)
    np.testing.assert_allclose(
        rotate_xz_torch(torch.as_tensor(vectors), torch.as_tensor(yaw)).numpy(),
        rotate_xz(vectors, yaw),
        atol=1e-12,
    )


def test_paw_velocity_is_the_world_motion_of_the_paws():
    """On a clip's true (x, y), the contact term's paw velocity is the paws' world velocity
    between the two frames, seen in the first frame's root frame."""
    from canis.training.clips import clip_pairs, process_clip
    from synthetic_dog import gait, to_motion

    roots, rotations, _ = gait("trot", 1.5, 3.0)
    clip = process_clip(to_motion(roots, rotations, "trot"))
    x, y, frames = clip_pairs(clip)
    row = 60
    f = frames[row]
    world = [clip.pose(np.array([g])).positions_m[0, list(PAW_ROWS)] for g in (f, f + 1)]
    expected = vectors_to_root_frame((world[1] - world[0])[None] * FPS, clip.root_rotations[[f]])
    measured = paw_world_velocity_mps(torch.as_tensor(x[[row]]), torch.as_tensor(y[[row]]))
    np.testing.assert_allclose(measured.numpy(), expected, atol=1e-3)
    assert np.abs(expected).max() > 0.1  # some paw moves: the test can fail


def test_step_skating_is_the_evaluations_measure():
    """On a clip's true (x, y), the torch skating of each paw equals
    runtime/motion_metrics.foot_skating_cm of its world positions (flat ground)."""
    from canis.runtime.features import OUTPUT
    from canis.runtime.motion_metrics import foot_skating_cm
    from canis.training.clips import clip_pairs, process_clip
    from synthetic_dog import gait, to_motion

    roots, rotations, _ = gait("trot", 1.5, 3.0)
    clip = process_clip(to_motion(roots, rotations, "trot"))
    x, y, frames = clip_pairs(clip)
    rows = np.arange(10, 60)
    world = clip.pose(np.concatenate([frames[rows], frames[rows] + 1])).positions_m
    before, after = world[: len(rows), list(PAW_ROWS)], world[len(rows) :, list(PAW_ROWS)]
    # Heights above the ground under the root, as the evaluation measures the mocap's.
    before[..., 1] -= clip.labels.ground_m[frames[rows], None]
    after[..., 1] -= clip.labels.ground_m[frames[rows] + 1, None]
    expected = np.stack(
        [foot_skating_cm(np.stack([b, a])[..., [0, 2]], np.stack([b, a])[..., 1])[0]
         for b, a in zip(before, after, strict=True)]
    )  # fmt: skip
    x_t, y_t = torch.as_tensor(x[rows]), torch.as_tensor(y[rows])
    paws = OUTPUT.field(np.arange(OUTPUT.size), "joints", "position")[list(PAW_ROWS)]
    measured = step_skating_cm(paw_world_velocity_mps(x_t, y_t), y_t[:, paws]).numpy()
    np.testing.assert_allclose(measured, expected, atol=2e-3)
    assert expected.max() > 0.05  # some paw moves low: the test can fail


@pytest.fixture(scope="module")
def started(tiny_dataset, tmp_path_factory):
    from canis.training.train import LAST, train
    from conftest import tiny_config

    folder = tmp_path_factory.mktemp("one_step")
    train(tiny_config(tiny_dataset), folder, progress=False)
    return folder / LAST


# Two short epochs, the curriculum growing over both.
SHORT = {
    "epochs": 2, "steps_per_epoch": 2, "batch_size": 4, "own_frames": 3, "curriculum_epochs": 2,
}  # fmt: skip


def finetune(dataset, start, out, resume=False, **settings):
    """`canis finetune` from a config file of SHORT and `settings` (conftest.finetune_run)."""
    from conftest import finetune_run

    return finetune_run(dataset, start, out, resume, **(SHORT | settings))


def test_a_jump_share_without_jumps_in_the_data_is_refused(tiny_dataset, started, tmp_path, capsys):
    from canis.runtime.features import ACTIONS
    from canis.training.dataset import load as load_dataset

    assert not (load_dataset(str(tiny_dataset))["action"] == ACTIONS.index("jump")).any()
    assert finetune(tiny_dataset, started, tmp_path / "run", jump_share=0.25) == 2
    error = capsys.readouterr().err
    assert f"{tiny_dataset} has no training stretch through a jump" in error


def test_finetune_runs_resumes_and_refuses_another_loss(tiny_dataset, started, tmp_path, capsys):
    out = tmp_path / "run"
    assert finetune(tiny_dataset, started, out, contact_weight=0.01) == 0
    log = (out / "log.csv").read_text().splitlines()
    assert len(log) == 3 and "validation_closed_loop_loss" in log[0]
    rows = [dict(zip(log[0].split(","), line.split(","), strict=True)) for line in log[1:]]
    assert [r["own_frames"] for r in rows] == ["2", "3"]  # the curriculum
    assert float(rows[0]["contact_term"]) > 0
    # Resuming with the same settings continues (nothing left to do at 2 epochs).
    assert finetune(tiny_dataset, started, out, resume=True, contact_weight=0.01) == 0
    capsys.readouterr()
    assert finetune(tiny_dataset, started, out, resume=True) == 2
    error = capsys.readouterr().err
    assert "canis finetune: error:" in error and "last.safetensors" in error
    assert "another loss configuration: contact_weight 0.01 (now 0.0)" in error
    # A bad value is refused by its key in the config file (written beside the run: run.json).
    assert finetune(tiny_dataset, started, out, contact_weight=-1) == 2
    error = capsys.readouterr().err
    assert f"{tmp_path / 'run.json'}: contact_weight -1.0: must be finite and >= 0" in error
    # And the placed-stillness term (training/placed_stillness.py).
    resumed = {"resume": True, "contact_weight": 0.01}
    assert finetune(tiny_dataset, started, out, **resumed, placed_stillness_weight=1) == 2
    assert "placed_stillness_weight 0.0 (now 1.0)" in capsys.readouterr().err
    assert finetune(tiny_dataset, started, out, placed_stillness_weight=float("inf")) == 2
    assert "placed_stillness_weight inf: must be finite and >= 0" in capsys.readouterr().err
    assert finetune(tiny_dataset, started, out, placed_stillness_weight=1, placed_dogs=1) == 2
    assert "placed_dogs 1: needs 2 or more" in capsys.readouterr().err
    # And the moving-skating term (training/moving_skating.py), on the moving dogs.
    assert finetune(tiny_dataset, started, out, **resumed, moving_skating_weight=1) == 2
    assert "moving_skating_weight 0.0 (now 1.0)" in capsys.readouterr().err
    assert finetune(tiny_dataset, started, out, moving_skating_weight=-2) == 2
    assert "moving_skating_weight -2.0: must be finite and >= 0" in capsys.readouterr().err
    assert finetune(tiny_dataset, started, out, moving_skating_weight=1, placed_dogs=0) == 2
    assert "placed_dogs 0: needs 1 or more" in capsys.readouterr().err
    # An option of a term, without the term's weight, is refused, not ignored.
    assert finetune(tiny_dataset, started, out, moving_paws_down=1.0) == 2
    assert "moving_paws_down: needs moving_skating_weight" in capsys.readouterr().err
    assert len((out / "log.csv").read_text().splitlines()) == 3  # the run is untouched


def test_finetune_starts_from_an_exported_model(tiny_dataset, started, tmp_path):
    """Issue 17: the shipped networks have no checkpoint; fine-tuning starts from the ONNX
    model a game runs. Its weights come back exactly, and a model of another dataset or of
    another precision is refused by name; the card of a run from it names it."""
    import onnx
    from canis.export.onnx_export import export_onnx
    from canis.training.checkpoint import load_checkpoint
    from canis.training.checkpoint_from_onnx import checkpoint_from_onnx
    from onnx import numpy_helper

    model = tmp_path / "m.onnx"
    export_onnx(started, model, tiny_dataset)
    # A bad weight is refused before the start is converted into the run folder.
    assert finetune(tiny_dataset, model, tmp_path / "refused", contact_weight=float("nan")) == 2
    assert not (tmp_path / "refused").exists()
    converted = checkpoint_from_onnx(model, tiny_dataset, tmp_path / "c.safetensors")
    assert converted["kind"] == "mann"
    original = load_checkpoint(started).section("model/")
    back = load_checkpoint(tmp_path / "c.safetensors").section("model/")
    assert back.keys() == original.keys()
    for name, weights in original.items():
        assert torch.equal(back[name], weights), name
    graph = onnx.load(str(model))
    mean = next(i for i in graph.graph.initializer if i.name == "x_mean")
    mean.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(mean) + 0.5, "x_mean"))
    other = tmp_path / "other.onnx"  # as if trained on an earlier build of the data
    onnx.save(graph, str(other))
    with pytest.raises(ValueError, match=r"other.onnx: was trained on another dataset .*x_mean"):
        checkpoint_from_onnx(other, tiny_dataset, tmp_path / "x.safetensors")
    out = tmp_path / "run"
    assert finetune(tiny_dataset, model, out) == 0
    assert (out / "start.safetensors").is_file() and (out / "last.safetensors").is_file()
    # The fine-tuned network exports with its card, which says how it was fine-tuned.
    from canis.cli import main

    tuned = tmp_path / "tuned.onnx"
    export = ["export", str(out / "last.safetensors"), "--out", str(tuned)]
    assert main([*export, "--dataset", str(tiny_dataset), "--card", "--card-seconds", "1"]) == 0
    card = tuned.with_suffix(".md").read_text()
    config = tmp_path / "run.json"  # conftest.finetune_run's config file
    assert f"- **Fine-tuning** (`canis finetune --config {config}`, " in card
    assert f"from `{model}`, 2 epochs of 2 steps, batch 4 stretches" in card
    assert "dropout 0.3, weight decay 0.0025;" in card  # an export's: the defaults
    assert "settings: own_frames 3, curriculum_epochs 2;" in card  # those not the defaults
    assert "## Fine-tuning log" in card
    assert f"`./run canis finetune --config {config} --start {model} --out runs/NAME` then" in card
    report = json.loads(tuned.with_suffix(".closed_loop.json").read_text())
    assert report["model"] == "tuned.onnx"  # its name: the report travels with the file
    for prop in graph.metadata_props:
        if prop.key == "canis.precision":
            prop.value = "int8"
    onnx.save(graph, str(tmp_path / "int8.onnx"))
    with pytest.raises(ValueError, match=r"int8.onnx: is int8; start fine-tuning from the fp32"):
        checkpoint_from_onnx(tmp_path / "int8.onnx", tiny_dataset, tmp_path / "y.safetensors")
    assert not (tmp_path / "x.safetensors").exists()


def test_a_finetune_keeps_its_starts_dropout_unless_told():
    """A network trained without dropout (the generalisation study's finding) is fine-tuned
    without it, not with the schedule's 0.3; a fine-tune of a fine-tune keeps the latter's;
    an export's converted checkpoint records neither and reads as the training defaults."""
    from canis.training.optimisation import DROPOUT, WEIGHT_DECAY

    unset = finetune_config.FineTuneSettings(start="s", dataset="d")
    trained = {"train": {"config": {"dropout": 0.0, "weight_decay": 0.01}}}
    assert finetune_config.start_regularisation(trained, unset) == {
        "dropout": 0.0,
        "weight_decay": 0.01,
    }
    tuned = trained | {"closed_loop": {"dropout": 0.1, "weight_decay": 0.0}}
    assert finetune_config.start_regularisation(tuned, unset) == {
        "dropout": 0.1,
        "weight_decay": 0.0,
    }
    told = finetune_config.FineTuneSettings(start="s", dataset="d", dropout=0.2)
    assert finetune_config.start_regularisation(trained, told)["dropout"] == 0.2
    assert finetune_config.start_regularisation({}, unset) == {
        "dropout": DROPOUT,
        "weight_decay": WEIGHT_DECAY,
    }
    with pytest.raises(ValueError, match=r"--dropout 1.0: must be at least 0 and below 1"):
        finetune_config.FineTuneSettings(start="s", dataset="d", dropout=1.0)
    with pytest.raises(ValueError, match=r"--weight-decay -1.0: must be 0 or more"):
        finetune_config.FineTuneSettings(start="s", dataset="d", weight_decay=-1.0)


def test_a_cards_reproduce_line_names_the_training_options_a_run_changed():
    from canis.export.model_card import _training_options

    assert _training_options({"dropout": 0.3, "weight_decay": 2.5e-3}) == ""
    changed = {
        "hidden": 256,
        "dropout": 0.0,
        "drop_commands": False,
        "weight_decay": 0.01,
        "input_noise": 0.1,
        "holdout": "within-clips",
        "mirrored": False,
        "oversample": False,
        "sniffing": False,
        "sniffing_walks": False,
    }
    assert _training_options(changed) == (
        " --hidden 256 --dropout 0.0 --no-drop-commands --weight-decay 0.01 --input-noise 0.1 "
        "--holdout within-clips --no-mirrored --no-oversample --no-sniffing --no-sniffing-walks"
    )


def test_finetune_records_its_dropout_and_refuses_another_on_resume(
    tiny_dataset, started, tmp_path, capsys
):
    from canis.training.checkpoint import load_checkpoint

    out = tmp_path / "run"
    assert finetune(tiny_dataset, started, out, dropout=0.0) == 0
    identity = load_checkpoint(out / "last.safetensors").config["closed_loop"]
    assert identity["dropout"] == 0.0 and identity["weight_decay"] == 2.5e-3
    assert finetune(tiny_dataset, started, out, resume=True) == 0  # its own, unset: resumes
    capsys.readouterr()
    assert finetune(tiny_dataset, started, out, resume=True, dropout=0.3) == 2
    assert "dropout 0.0 (now 0.3)" in capsys.readouterr().err


def test_resume_refuses_another_precision_by_name():
    """A fine-tuning checkpoint of one precision resumed in another: refused, named; one
    written before precision was a setting reads as fp32."""
    saved = {"closed_loop": {"own_frames": 8, "lr": 1e-5}}
    finetune_config.check_resumable("x", saved, {"own_frames": 8, "lr": 1e-5, "precision": "fp32"})
    with pytest.raises(ValueError, match=r"x: .* precision 'fp32' \(now 'bf16'\)"):
        finetune_config.check_resumable(
            "x", saved, {"own_frames": 8, "lr": 1e-5, "precision": "bf16"}
        )


def test_resume_reads_the_paws_down_flag_as_its_weight():
    """--moving-paws-down became a weight: a run saved with it on (True) resumes at weight 1 and
    is refused at another, by name."""
    saved = {"closed_loop": {"moving_paws_down": True}}
    finetune_config.check_resumable("x", saved, {"moving_paws_down": 1.0})
    with pytest.raises(ValueError, match=r"x: .* moving_paws_down True \(now 4.0\)"):
        finetune_config.check_resumable("x", saved, {"moving_paws_down": 4.0})


def test_a_run_with_a_deleted_setting_resumes_only_where_it_was_off():
    """The experiments' settings deleted in issue 61: a run that stored one at its off value
    resumes as before; one that turned it on is refused, by name."""
    saved = {"closed_loop": {"own_frames": 8, "skating_weight": 0.0, "keep_epochs": True}}
    finetune_config.check_resumable("x", saved, {"own_frames": 8})
    saved["closed_loop"]["feedback"] = "runtime"
    with pytest.raises(ValueError, match=r"x: .* no longer has: feedback 'runtime'"):
        finetune_config.check_resumable("x", saved, {"own_frames": 8})


def test_a_run_of_another_split_is_not_fine_tuned(tiny_dataset, tmp_path, capsys):
    """Fine-tuning, which trains on the dataset's split, refuses a `--holdout within-clips
    --no-mirrored` run by name."""
    from canis.training import dataset
    from canis.training.train import LAST, train
    from conftest import tiny_config

    config = tiny_config(tiny_dataset)
    config.holdout, config.mirrored = "within-clips", False
    with pytest.MonkeyPatch.context() as patch:  # the synthetic clips are 69-189 frames
        patch.setattr(dataset, "GAP_FRAMES", 5)
        train(config, tmp_path / "run", progress=False)
        checkpoint = tmp_path / "run" / LAST
        assert finetune(tiny_dataset, checkpoint, tmp_path / "f") == 2
        assert (
            "was trained with --holdout within-clips --no-mirrored; fine-tuning trains on"
            in capsys.readouterr().err
        )

"""Training, checkpoints and export on a tiny dataset built from the synthetic dogs."""

import json

import numpy as np
import onnxruntime as ort
import pytest
import torch
from canis.export.onnx_export import export_onnx
from canis.training import checkpoint as checkpoint_module
from canis.training import dataset
from canis.training.checkpoint import load_checkpoint, restore_model
from canis.training.models import create_model
from canis.training.train import LAST, train
from conftest import TINY_HIDDEN, tiny_config


def config(path, kind="mann", epochs=2):
    return tiny_config(path, kind, epochs)


def parameters(run_dir):
    return load_checkpoint(run_dir / LAST).section("model/")


def test_resume_continues_exactly(tiny_dataset, tmp_path):
    straight = tmp_path / "straight"
    rows = train(config(tiny_dataset, epochs=2), straight, progress=False)
    assert len(rows) == 2 and all(np.isfinite(r["validation_loss"]) for r in rows)
    interrupted = tmp_path / "interrupted"
    train(config(tiny_dataset, epochs=1), interrupted, progress=False)
    resumed_rows = train(config(tiny_dataset, epochs=2), interrupted, resume=True, progress=False)
    assert [r["epoch"] for r in resumed_rows] == [1, 2]
    a, b = parameters(straight), parameters(interrupted)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert resumed_rows[1]["train_loss"] == pytest.approx(rows[1]["train_loss"], rel=1e-6)
    log = (interrupted / "log.csv").read_text().splitlines()
    assert len(log) == 3  # header + one row per epoch, none duplicated


def test_resume_refuses_other_settings(tiny_dataset, tmp_path):
    train(config(tiny_dataset, epochs=1), tmp_path, progress=False)
    other = config(tiny_dataset, epochs=2)
    other.batch_size = 16
    with pytest.raises(ValueError, match="resume with the same settings"):
        train(other, tmp_path, resume=True, progress=False)


def test_resume_refuses_another_dataset(tiny_dataset, tmp_path):
    """Resuming on another dataset would continue under its normalisation and save that into
    the checkpoint; the same dataset moved elsewhere still resumes."""
    train(config(tiny_dataset, epochs=1), tmp_path / "run", progress=False)
    data = dataset.load(tiny_dataset)
    moved = tmp_path / "moved.npz"
    dataset.save(dataset.BuildResult(dict(data.arrays), data.metadata), moved)
    other_arrays = dict(data.arrays) | {"x_std": data["x_std"] * 1.5}
    other = tmp_path / "other.npz"
    dataset.save(dataset.BuildResult(other_arrays, data.metadata), other)
    with pytest.raises(ValueError, match="other.npz has other normalisation statistics \\(x_std"):
        train(config(other, epochs=2), tmp_path / "run", resume=True, progress=False)
    rows = train(config(moved, epochs=2), tmp_path / "run", resume=True, progress=False)
    assert [r["epoch"] for r in rows] == [1, 2]


def test_resume_after_a_torn_last_log_line(tiny_dataset, tmp_path):
    """Killed while appending an epoch's row: the checkpoint of that epoch was never written,
    so the torn row is dropped and the run resumes."""
    train(config(tiny_dataset, epochs=1), tmp_path, progress=False)
    log = tmp_path / "log.csv"
    log.write_text(log.read_text() + "2,0.51,0.4")  # half of epoch 2's row
    rows = train(config(tiny_dataset, epochs=2), tmp_path, resume=True, progress=False)
    assert [r["epoch"] for r in rows] == [1, 2]
    assert len(log.read_text().splitlines()) == 3
    lines = log.read_text().splitlines()
    log.write_text("\n".join([lines[0], "1,0.5,x", lines[2]]) + "\n")
    with pytest.raises(ValueError, match="log.csv: line 2 is not a log row \\(1,0.5,x"):
        train(config(tiny_dataset, epochs=3), tmp_path, resume=True, progress=False)


def test_bad_checkpoints_fail_clearly(tiny_dataset, tmp_path, monkeypatch):
    train(config(tiny_dataset, epochs=1), tmp_path, progress=False)
    path = tmp_path / LAST
    truncated = tmp_path / "truncated.safetensors"
    truncated.write_bytes(path.read_bytes()[:5000])
    with pytest.raises(ValueError, match="truncated.safetensors: not a readable"):
        load_checkpoint(truncated)
    with pytest.raises(ValueError, match="does not fit a mann model .*motion.layers.0.weight"):
        restore_model(load_checkpoint(path), create_model("mann", experts=8), path)
    monkeypatch.setattr(checkpoint_module, "layout_hash", lambda: "0000000000000000")
    with pytest.raises(ValueError, match="trained for feature layout"):
        load_checkpoint(path)


@pytest.mark.parametrize("kind", ["mann", "pfnn", "vnn"])
def test_export_parity_metadata_and_dynamic_batch(tiny_dataset, tmp_path, kind):
    train(config(tiny_dataset, kind=kind, epochs=1), tmp_path, progress=False)
    out = tmp_path / f"{kind}.onnx"
    report = export_onnx(tmp_path / LAST, out, tiny_dataset)
    assert set(report["parity_max_abs_error"]) == {"random", "real"}
    assert max(report["parity_max_abs_error"].values()) < 1e-4
    session = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    meta = session.get_modelmeta().custom_metadata_map
    assert meta["canis.kind"] == kind and meta["canis.layout_hash"] == dataset.layout_hash()
    assert len(json.loads(meta["canis.joint_names"])) == 27 and "CC BY-NC" in meta["canis.licence"]
    for batch in (1, 5):
        feeds = {"x": np.zeros((batch, 480), np.float32)}
        if kind == "pfnn":
            feeds["phase"] = np.zeros((batch, 1), np.float32)
        outputs = session.run(None, feeds)
        assert outputs[0].shape == (batch, 363) and np.all(np.isfinite(outputs[0]))
    if kind == "mann":
        assert np.allclose(outputs[1].sum(axis=1), 1.0, atol=1e-5)  # expert weights
    if kind == "vnn":  # every kind converts with its parity check; y is the vanilla's only output
        from canis.export.precision import convert_motion_model

        check = convert_motion_model(out, tmp_path / "vnn.int8.onnx", "int8")
        assert check["finite"] and check["y_mean_error_std"] < 0.1


def test_exported_pfnn_phase_function_matches_torch_and_wraps(tiny_dataset, tmp_path):
    """The ONNX graph blends the control points as the trained network does at every phase
    (between control points, at them, and at the runtime's [0, 2pi) ends), and a phase a
    cycle away gives the same output: the runtime feeds radians wrapped to [0, 2pi)."""
    from canis.export.onnx_export import load_for_export

    train(config(tiny_dataset, kind="pfnn", epochs=1), tmp_path, progress=False)
    out = tmp_path / "pfnn.onnx"
    export_onnx(tmp_path / LAST, out, tiny_dataset)
    wrapper, _ = load_for_export(tmp_path / LAST)
    session = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    phases = np.concatenate(
        [np.linspace(0, 2 * np.pi, 65)[:-1], [np.float32(2 * np.pi) - 1e-6, 1e-7]]
    ).astype(np.float32)
    x = np.repeat(dataset.load(tiny_dataset)["X"][:1], len(phases), axis=0)

    def onnx_run(phase):
        return session.run(None, {"x": x, "phase": phase.astype(np.float32)[:, None]})

    y, delta = onnx_run(phases)
    with torch.no_grad():
        y_torch, delta_torch = wrapper(torch.as_tensor(x), torch.as_tensor(phases)[:, None])
    assert np.allclose(y, y_torch.numpy(), atol=1e-4)
    assert np.allclose(delta, delta_torch.numpy(), atol=1e-5)
    assert np.ptp(y, axis=0).max() > 1e-3  # the phase changes the output
    for shifted in (phases + 2 * np.pi, phases - 2 * np.pi):
        y_shifted, delta_shifted = onnx_run(shifted)
        assert np.allclose(y_shifted, y, atol=1e-3) and np.allclose(delta_shifted, delta, atol=1e-4)


def test_exported_model_clamps_inputs_to_the_training_range(tiny_dataset, tmp_path):
    train(config(tiny_dataset, epochs=1), tmp_path, progress=False)
    out = tmp_path / "m.onnx"
    export_onnx(tmp_path / LAST, out, tiny_dataset)
    session = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    meta = session.get_modelmeta().custom_metadata_map
    assert "training range" in meta["canis.input_clamp"]
    data = dataset.load(tiny_dataset)
    low, high = data["X"].min(0), data["X"].max(0)
    span = high - low
    huge = np.full((1, 480), 1e6, dtype=np.float32)
    at_edge = (high + 0.1 * span)[None].astype(np.float32)
    y_huge, y_edge = (session.run(["y"], {"x": x})[0] for x in (huge, at_edge))
    assert np.all(np.isfinite(y_huge)) and np.allclose(y_huge, y_edge, atol=1e-4)


def test_a_crash_while_saving_keeps_the_last_good_checkpoint(tiny_dataset, tmp_path, monkeypatch):
    train(config(tiny_dataset, epochs=1), tmp_path, progress=False)
    before = (tmp_path / LAST).read_bytes()

    def crash(tensors, filename, metadata=None):
        with open(filename, "wb") as file:
            file.write(b"half a checkpoi")
        raise KeyboardInterrupt  # killed mid-write

    monkeypatch.setattr(checkpoint_module, "save_file", crash)
    with pytest.raises(KeyboardInterrupt):
        train(config(tiny_dataset, epochs=2), tmp_path, resume=True, progress=False)
    assert (tmp_path / LAST).read_bytes() == before
    assert load_checkpoint(tmp_path / LAST).config["epoch"] == 1


def test_resume_refuses_another_precision_by_name(tiny_dataset, tmp_path):
    """Issue 17's bad input: a checkpoint trained in another precision, given to --resume, is
    refused naming the difference (a run written before precision was a setting reads as
    fp32)."""
    train(config(tiny_dataset, epochs=1), tmp_path, progress=False)
    other = config(tiny_dataset, epochs=2)
    other.precision = "bf16"
    with pytest.raises(ValueError, match=r"other settings: precision 'fp32' \(now 'bf16'\)"):
        train(other, tmp_path, resume=True, progress=False)
    # "auto" (the CLI's default) continues the run's own precision, whatever the machine has.
    other.precision = "auto"
    assert len(train(other, tmp_path, resume=True, progress=False)) == 2
    assert "precision" not in load_checkpoint(tmp_path / LAST).config["train"]["identity"]


def test_bf16_training_is_close_to_fp32(tiny_dataset, tmp_path):
    """bf16 autocast trains the same run to losses close to fp32's (not equal: bf16 keeps 8
    bits of mantissa in the matmuls), and records its precision for the resume check."""
    fp32 = train(config(tiny_dataset, epochs=2), tmp_path / "fp32", progress=False)
    bf16_config = config(tiny_dataset, epochs=2)
    bf16_config.precision = "bf16"
    bf16 = train(bf16_config, tmp_path / "bf16", progress=False)
    for a, b in zip(fp32, bf16, strict=True):
        assert np.isfinite(b["train_loss"]) and np.isfinite(b["validation_loss"])
        assert b["train_loss"] == pytest.approx(a["train_loss"], rel=0.05)
        assert b["validation_loss"] == pytest.approx(a["validation_loss"], rel=0.05)
    saved = load_checkpoint(tmp_path / "bf16" / LAST).config["train"]
    assert (
        saved["identity"]["precision"] == "bf16"
        and "precision" not in load_checkpoint(tmp_path / "fp32" / LAST).config["train"]["identity"]
    )
    # Resumed in bf16, it continues (the same precision).
    bf16_config.epochs = 3
    assert len(train(bf16_config, tmp_path / "bf16", resume=True, progress=False)) == 3


def test_auto_precision_follows_the_cpu(monkeypatch):
    from canis.training import optimisation

    cpu = torch.device("cpu")
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False)
    assert optimisation.resolve_precision("auto", cpu) == "fp32"  # e.g. AMD Zen 1: emulated
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: True)
    assert optimisation.resolve_precision("auto", cpu) == "bf16"
    assert optimisation.resolve_precision("fp32", cpu) == "fp32"
    with pytest.raises(ValueError, match="--precision 'half': choose one of auto, bf16, fp32"):
        optimisation.resolve_precision("half", cpu)
    # A resumed run keeps its own under auto; an explicit choice is passed on (and checked).
    assert optimisation.precision_for_run("auto", cpu, {"precision": "bf16"}) == "bf16"
    assert optimisation.precision_for_run("auto", cpu, {}) == "fp32"  # written before the setting
    assert optimisation.precision_for_run("auto", cpu, None) == "bf16"  # a new run: the hardware
    assert optimisation.precision_for_run("fp32", cpu, {"precision": "bf16"}) == "fp32"


def test_emulated_bf16_is_kept_and_said(monkeypatch, capsys):
    """A recipe's bf16 on a CPU that emulates it trains 20-35x slower: kept (the weights
    depend on it), and said before the first step; native bf16 and fp32 say nothing."""
    from canis.training import optimisation

    cpu = torch.device("cpu")
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False)
    assert optimisation.precision_for_run("bf16", cpu, None) == "bf16"
    err = capsys.readouterr().err
    assert "precision bf16 on a cpu without native bfloat16" in err and "fp32" in err
    assert err.count("\n") == 1  # one line
    assert optimisation.precision_for_run("auto", cpu, {"precision": "bf16"}) == "bf16"
    assert "without native bfloat16" in capsys.readouterr().err  # a resumed bf16 run too
    assert optimisation.precision_for_run("fp32", cpu, None) == "fp32"
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: True)
    assert optimisation.precision_for_run("bf16", cpu, None) == "bf16"
    assert capsys.readouterr().err == ""


def test_cli_refuses_bad_speed_options(tiny_dataset, tmp_path, capsys):
    from canis.cli import main

    base = ["train", "--dataset", str(tiny_dataset), "--out", str(tmp_path)]
    assert main([*base, "--threads", "0"]) == 2
    assert "--threads 0: must be at least 1" in capsys.readouterr().err
    assert main([*base, "--steps-per-epoch", "0"]) == 2
    assert "--steps-per-epoch 0: must be at least 1" in capsys.readouterr().err
    assert main([*base, "--hidden", "0"]) == 2
    assert "--hidden 0: must be at least 1" in capsys.readouterr().err


def test_fused_adamw_is_the_for_loop_update():
    """The fused optimiser train.py uses is the same AdamW to float rounding."""
    torch.manual_seed(0)
    models = [create_model("mann", 4, hidden=16) for _ in range(2)]
    models[1].load_state_dict(models[0].state_dict())
    optimizers = [
        torch.optim.AdamW(m.parameters(), lr=1e-2, weight_decay=2.5e-3, fused=f)
        for m, f in zip(models, (None, True), strict=True)
    ]
    x = torch.randn(8, 480)
    for _ in range(3):
        for model, optimizer in zip(models, optimizers, strict=True):
            optimizer.zero_grad()
            model.eval()
            model(x)[0].pow(2).mean().backward()
            optimizer.step()
    for a, b in zip(models[0].parameters(), models[1].parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def synthetic_rows(lengths, held_out=()):
    """Dataset columns of clips of the given frame counts, each followed by its mirror (the
    same frames), rows starting at frame 50 as clip_pairs' do."""
    clip, frame, mirrored, validation = [], [], [], []
    for i, length in enumerate(lengths):
        for mirror in (False, True):
            clip += [2 * i + mirror] * length
            frame += list(range(50, 50 + length))
            mirrored += [mirror] * length
            validation += [i in held_out] * length
    return {
        "clip": np.array(clip),
        "frame": np.array(frame),
        "mirrored": np.array(mirrored),
        "validation": np.array(validation),
    }


def test_within_clip_holdout_keeps_windows_apart():
    """`--holdout within-clips`: the last 15% of every training clip is validated on, no row's
    frame window (trajectory -50..+60, output +1) shared with a training row's; held-out clips
    stay out of both; a clip and its mirror are cut at the same frame."""
    from canis.runtime.features import TRAJECTORY_OFFSETS_FRAMES
    from canis.training.dataset import split_rows

    arrays = synthetic_rows([2000, 900, 1000, 300], held_out={1})
    training, within = split_rows(arrays, "within-clips")
    assert not (training & within).any()
    assert not ((training | within) & arrays["validation"]).any()
    reach_back, reach_ahead = -min(TRAJECTORY_OFFSETS_FRAMES), max(TRAJECTORY_OFFSETS_FRAMES) + 1
    for clip in (0, 1, 4, 5):
        rows = arrays["clip"] == clip
        last_training = arrays["frame"][rows & training].max()
        first_within = arrays["frame"][rows & within].min()
        assert last_training + reach_ahead < first_within - reach_back
        # The tail is about 15% of the clip (2000 frames: 300), less the gap's 60 frames.
        assert abs((rows & within).sum() - (0.15 * rows.sum() - 60)) <= 1
    short = arrays["clip"] == 6  # 300 frames: a 45-frame tail, all in the gap
    assert not (short & within).any() and (short & training).sum() == 300 - 45 - 60
    assert np.array_equal(
        arrays["frame"][(arrays["clip"] == 0) & within],
        arrays["frame"][(arrays["clip"] == 1) & within],
    )
    # The default is the dataset's split: every row of the training clips, none held back.
    training, within = split_rows(arrays, "clips")
    assert np.array_equal(training, ~arrays["validation"]) and not within.any()
    training, _ = split_rows(arrays, "clips", mirrored=False)
    assert np.array_equal(training, ~arrays["validation"] & ~arrays["mirrored"])
    with pytest.raises(ValueError, match="--holdout 'frames': choose one of clips, within-clips"):
        split_rows(arrays, "frames")
    with pytest.raises(ValueError, match="--holdout within-clips: leaves no training rows"):
        split_rows(synthetic_rows([60]), "within-clips")


def test_generalisation_options_train_and_refuse_another_resume(
    tiny_dataset, tmp_path, monkeypatch
):
    """--dropout, --weight-decay, --input-noise, --holdout and --no-mirrored reach the
    training, are part of the run's identity (a resume with others is refused, naming them),
    and the held-out-clip validation loss is the same yardstick in every run."""
    from canis.training.train import validation_loss
    from canis.training.training_data import TrainingData

    monkeypatch.setattr(dataset, "GAP_FRAMES", 5)  # the synthetic clips are 69-189 frames
    plain = train(config(tiny_dataset, epochs=1), tmp_path / "plain", progress=False)
    varied = config(tiny_dataset, epochs=1)
    varied.dropout, varied.weight_decay, varied.input_noise = 0.0, 0.01, 0.3
    varied.holdout, varied.mirrored = "within-clips", False
    rows = train(varied, tmp_path / "varied", progress=False)
    # Training is deterministic, so any difference is the options' doing. It is small: one
    # epoch of 32 units barely moves off the mean, and the synthetic dog's mirrored rows now
    # keep its captured rows' axis conventions (training/clips.py), so dropping them
    # changes the loss by about 1e-5.
    assert rows[0]["train_loss"] != plain[0]["train_loss"]
    assert np.isfinite(rows[0]["within_clip_validation_loss"])
    assert "within_clip_validation_loss" not in plain[0]
    header = (tmp_path / "varied" / "log.csv").read_text().splitlines()[0]
    assert header.startswith("epoch,train_loss,validation_loss,within_clip_validation_loss,")
    checkpoint = load_checkpoint(tmp_path / "varied" / LAST)
    identity = checkpoint.config["train"]["identity"]
    assert (identity["dropout"], identity["weight_decay"], identity["input_noise"]) == (
        0.0,
        0.01,
        0.3,
    )
    assert identity["holdout"] == "within-clips" and identity["mirrored"] is False
    # Defaults stay out of the identity, as runs written before the options resume.
    plain_identity = load_checkpoint(tmp_path / "plain" / LAST).config["train"]["identity"]
    assert not {"dropout", "input_noise", "holdout", "mirrored"} & plain_identity.keys()
    # Validation sees no noise and the same held-out clips: the logged loss is the
    # checkpoint's own on a split made without any of the options.
    model = create_model("mann", 4, hidden=TINY_HIDDEN)
    restore_model(checkpoint, model, tmp_path / "varied" / LAST)
    data = TrainingData(str(tiny_dataset), "mann", torch.device("cpu"))
    assert validation_loss(model, "mann", data) == pytest.approx(rows[0]["validation_loss"])
    resumed = config(tiny_dataset, epochs=2)
    resumed.dropout, resumed.weight_decay, resumed.input_noise = 0.0, 0.01, 0.3
    resumed.holdout = "within-clips"
    with pytest.raises(ValueError, match=r"other settings: mirrored False \(now True\);"):
        train(resumed, tmp_path / "varied", resume=True, progress=False)
    other = config(tiny_dataset, epochs=2)
    other.dropout = 0.5
    with pytest.raises(ValueError, match=r"other settings: dropout 0.3 \(now 0.5\);"):
        train(other, tmp_path / "plain", resume=True, progress=False)


def test_dropout_setting_reaches_the_layers():
    """In training mode two passes of one input differ only by dropout's masks."""
    torch.manual_seed(0)
    x = torch.randn(4, 480)

    def output(model):
        y = model(x)
        return y[0] if isinstance(y, tuple) else y

    for kind in ("mann", "vnn"):
        off = create_model(kind, 4, hidden=16, dropout=0.0).train()
        assert torch.equal(output(off), output(off))
        on = create_model(kind, 4, hidden=16, dropout=0.5).train()
        assert not torch.equal(output(on), output(on))


def test_undropped_commands_reach_the_first_layer_and_travel_with_the_run(tiny_dataset, tmp_path):
    """drop_commands = false: every network's first layer sees the trajectory's action and
    speed inputs whole in training while the other inputs draw the same masks as before, and
    the setting is part of the run: its identity, a restored network and the card's line."""
    from canis.export.model_card import _training_options
    from canis.training.models import command_columns, restored_model

    commands = command_columns()
    others = torch.ones(480, dtype=torch.bool)
    others[commands] = False
    x = torch.randn(64, 480)

    def first_layer_input(kind, drop_commands):
        model = create_model(kind, 4, hidden=16, dropout=0.5, drop_commands=drop_commands)
        first = model.layers[0] if kind == "vnn" else model.motion.layers[0]
        seen = []
        first.register_forward_pre_hook(lambda _, inputs: seen.append(inputs[0]))
        torch.manual_seed(3)
        model.train()(x, x[:, 0]) if kind == "pfnn" else model.train()(x)
        return seen[0]

    for kind in ("mann", "pfnn", "vnn"):
        seen = {drop: first_layer_input(kind, drop) for drop in (True, False)}
        assert torch.equal(seen[False][:, commands], x[:, commands])
        assert not torch.equal(seen[True][:, commands], x[:, commands])
        assert torch.equal(seen[False][:, others], seen[True][:, others])
    run = config(tiny_dataset, epochs=1)
    run.drop_commands = False
    train(run, tmp_path / "kept", progress=False)
    checkpoint = load_checkpoint(tmp_path / "kept" / LAST)
    assert checkpoint.config["train"]["identity"]["drop_commands"] is False
    assert "drop_commands" not in config(tiny_dataset).identity()
    restored = restored_model(checkpoint, tmp_path / "kept" / LAST)
    assert restored.motion.input_dropout.kept[commands].all()
    assert "--no-drop-commands" in _training_options(checkpoint.config["train"]["config"])
    with pytest.raises(ValueError, match=r"other settings: drop_commands False \(now True\);"):
        train(config(tiny_dataset, epochs=2), tmp_path / "kept", resume=True, progress=False)


def test_cli_refuses_bad_generalisation_options(tiny_dataset, tmp_path, capsys):
    from canis.cli import main

    base = ["train", "--dataset", str(tiny_dataset), "--out", str(tmp_path)]
    for option, value, message in (
        ("--dropout", "1", "--dropout 1.0: must be at least 0 and below 1"),
        ("--dropout", "-0.1", "--dropout -0.1: must be at least 0 and below 1"),
        ("--weight-decay", "-1", "--weight-decay -1.0: must be 0 or more"),
        ("--input-noise", "nan", "--input-noise nan: must be 0 or more"),
    ):
        assert main([*base, option, value]) == 2
        assert message in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([*base, "--holdout", "frames"])
    assert "invalid choice: 'frames'" in capsys.readouterr().err


def test_a_pose_residual_run_of_an_earlier_version_is_refused_by_name(tiny_dataset, tmp_path):
    """--pose-residual was deleted (docs/DECISIONS.md): a checkpoint or an export of such a
    network is refused in one line that says so, not loaded into a plain network."""
    import onnx
    from canis.training.checkpoint import Checkpoint
    from canis.training.checkpoint_from_onnx import checkpoint_from_onnx
    from canis.training.models import restored_model
    from canis.training.onnx_graph import POSE_RESIDUAL_KEY

    train(config(tiny_dataset, epochs=1), tmp_path, progress=False)
    saved = load_checkpoint(tmp_path / LAST)
    residual = Checkpoint(saved.tensors, saved.config | {"pose_residual": 1.0})
    with pytest.raises(ValueError, match=r"was trained with --pose-residual, which this version"):
        restored_model(residual, tmp_path / LAST)
    model = tmp_path / "m.onnx"
    export_onnx(tmp_path / LAST, model, tiny_dataset)
    graph = onnx.load(str(model))
    graph.metadata_props.add(key=POSE_RESIDUAL_KEY, value="1")
    onnx.save(graph, str(model))
    with pytest.raises(ValueError, match=r"m.onnx: was trained with --pose-residual"):
        checkpoint_from_onnx(model, tiny_dataset, tmp_path / "c.safetensors")
    assert not (tmp_path / "c.safetensors").exists()


@pytest.mark.parametrize(
    ("option", "wanted"),
    [
        (["--epochs", "0"], "--epochs 0: must be at least 1"),
        (["--batch-size", "0"], "--batch-size 0: must be at least 1"),
        (["--batch-size", "100000"], "--batch-size 100000: more than the"),
        (["--experts", "0"], "--experts 0: must be at least 1"),
        (["--weight-decay", "inf"], "--weight-decay inf: must be 0 or more, finite"),
        (["--lr", "nan"], "--lr nan: must be a finite number over 0"),
    ],
)
def test_train_refuses_settings_that_train_nothing_or_nan(
    option, wanted, tiny_dataset, tmp_path, capsys
):
    """--epochs 0 printed "done" with nothing written; --weight-decay inf made every weight
    NaN; --batch-size 0 or past the rows was a raw error or no step at all."""
    from canis.cli import main

    out = tmp_path / "run"
    args = ["train", "--dataset", str(tiny_dataset), "--out", str(out), "--experts", "4"]
    args += ["--hidden", "16", "--steps-per-epoch", "2", "--epochs", "1", *option]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert wanted in err and len(err.splitlines()) == 1
    assert not (out / "last.safetensors").exists()


def test_a_run_is_never_replaced_unasked_and_a_nan_loss_stops_it(tiny_dataset, tmp_path, capsys):
    """`canis train --out` over a run replaced it without a word (7 log rows became 1); a
    dataset with NaN rows made every weight NaN and still printed "done: ... best.safetensors"
    for a file that did not exist."""
    from canis.cli import main

    out = tmp_path / "run"
    args = ["train", "--dataset", str(tiny_dataset), "--out", str(out), "--experts", "4"]
    args += ["--hidden", "16", "--steps-per-epoch", "2", "--epochs", "1", "--batch-size", "8"]
    assert main(args) == 0
    assert (
        capsys.readouterr()
        .out.strip()
        .endswith(f"done: {out} (last.safetensors, best.safetensors, log.csv)")
    )
    log = (out / "log.csv").read_text()
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "already holds a run (last.safetensors, best.safetensors, log.csv)" in err
    assert "--resume" in err and "--force" in err and len(err.splitlines()) == 1
    assert (out / "log.csv").read_text() == log
    assert main([*args, "--force"]) == 0  # asked: replaced
    capsys.readouterr()

    with np.load(tiny_dataset) as data:
        arrays = dict(data)
    arrays["X"] = arrays["X"].copy()
    arrays["X"][5::7] = np.nan
    poisoned = tmp_path / "nan.npz"
    np.savez_compressed(poisoned, **arrays)
    fresh = tmp_path / "nan_run"
    nan_args = [str(poisoned) if a == str(tiny_dataset) else a for a in args]
    nan_args[nan_args.index(str(out))] = str(fresh)
    assert main(nan_args) == 2
    err = capsys.readouterr().err
    assert "X has non-finite values in" in err and "the first, row 5" in err
    assert len(err.splitlines()) == 1 and not fresh.exists()


def test_a_loss_that_stops_being_a_number_stops_the_run(tiny_dataset, tmp_path):
    """Settings that make the weights NaN (here a huge weight decay, which the command line
    refuses) stop the run at the step, keeping nothing of it, instead of saving NaN."""
    from dataclasses import replace

    from canis.training.train import train
    from conftest import tiny_config

    config = replace(tiny_config(tiny_dataset), weight_decay=1e38, lr=1e38)
    with pytest.raises(FloatingPointError, match=r"the loss is nan at epoch 1 step \d"):
        train(config, tmp_path / "run", progress=False)
    assert not (tmp_path / "run" / "last.safetensors").exists()


@pytest.mark.parametrize("drawn_as", ["oversample", "balanced", "uniform"])
def test_sniffing_rows_are_never_drawn_when_the_recipe_says_so(tiny_dataset, drawn_as):
    """--no-sniffing: the rows the dataset marks as an idle dog sniffing (training/labels.py)
    get no draws however the rows are drawn; it is part of the run's identity."""
    from canis.training.train import TrainConfig, _epoch_indices
    from canis.training.training_data import TrainingData

    data = TrainingData(tiny_dataset, "mann", torch.device("cpu"))
    assert not data.sniffing.any()  # the synthetic dogs never lower their heads
    data.sniffing = torch.arange(len(data.sniffing)) % 3 == 0  # as if a third sniffed
    how = {"balanced": {"balanced": True}, "uniform": {"oversample": False}}.get(drawn_as, {})
    config = TrainConfig(dataset=str(tiny_dataset), steps_per_epoch=50, sniffing=False, **how)
    drawn = _epoch_indices(data, config, epoch=0).numpy()
    assert len(drawn) == 50 * config.batch_size and np.all(drawn % 3 != 0)
    assert config.identity()["sniffing"] is False
    assert "sniffing" not in TrainConfig().identity()


def test_sniffing_walks_are_never_drawn_when_the_recipe_says_so(tiny_dataset, tmp_path):
    """sniffing_walks = false: the dataset's slow walks with the nose down get no draws; a
    dataset built before they were marked is refused, before any run folder is made."""
    from canis.training.dataset import load
    from canis.training.train import TrainConfig, _epoch_indices, train
    from canis.training.training_data import TrainingData

    data = TrainingData(tiny_dataset, "mann", torch.device("cpu"))
    assert data.sniffing_walk is not None and not data.sniffing_walk.any()
    data.sniffing_walk = torch.arange(len(data.sniffing_walk)) % 3 == 0
    config = TrainConfig(dataset=str(tiny_dataset), steps_per_epoch=50, sniffing_walks=False)
    drawn = _epoch_indices(data, config, epoch=0).numpy()
    assert len(drawn) == 50 * config.batch_size and np.all(drawn % 3 != 0)
    assert config.identity()["sniffing_walks"] is False
    assert "sniffing_walks" not in TrainConfig().identity()
    old = load(tiny_dataset)
    arrays = {k: v for k, v in old.arrays.items() if k != "sniffing_walk"}
    path = tmp_path / "old.npz"
    np.savez(path, metadata=np.array(json.dumps(old.metadata)), **arrays)
    with pytest.raises(ValueError, match="marks no sniffing walks .* build it again"):
        train(TrainConfig(dataset=str(path), sniffing_walks=False), tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_jump_rows_are_drawn_as_many_times_as_often_as_the_recipe_says(tiny_dataset):
    """--jump-oversample K: the jump's rows get K times their sampler's share of the draws, the
    other rows keep theirs relative to each other; it is part of the run's identity, and a
    value under 1 is refused before any work."""
    from canis.training.train import TrainConfig, _epoch_indices
    from canis.training.training_data import TrainingData

    data = TrainingData(tiny_dataset, "mann", torch.device("cpu"))
    data.jumping = torch.arange(len(data.jumping)) % 10 == 0  # as if a tenth jumped
    share = (data.weights * data.jumping).sum() / data.weights.sum()
    config = TrainConfig(dataset=str(tiny_dataset), steps_per_epoch=400, jump_oversample=4.0)
    drawn = _epoch_indices(data, config, epoch=0).numpy()
    expected = 4 * share / (4 * share + 1 - share)
    assert np.mean(drawn % 10 == 0) == pytest.approx(float(expected), abs=0.02)
    assert config.identity()["jump_oversample"] == 4.0
    assert "jump_oversample" not in TrainConfig().identity()
    with pytest.raises(ValueError, match="--jump-oversample 0.5"):
        TrainConfig(jump_oversample=0.5)


def test_balanced_sampling_evens_out_the_classes_by_the_square_root(tiny_dataset):
    """--balanced: a (gait, action) class's share of the drawn rows grows with the square root
    of its size (training/dataset.py balanced_weights), and it is part of the run's identity."""
    from canis.training.dataset import balanced_weights
    from canis.training.train import TrainConfig, _epoch_indices
    from canis.training.training_data import TrainingData

    gait = np.array([0] * 400 + [1] * 100 + [1] * 4)
    action = np.array([1] * 400 + [1] * 100 + [2] * 4)
    weights = balanced_weights(gait, action)
    shares = [weights[:400].sum(), weights[400:500].sum(), weights[500:].sum()]
    np.testing.assert_allclose(np.array(shares) / shares[2], [10.0, 5.0, 1.0])

    data = TrainingData(tiny_dataset, "mann", torch.device("cpu"))
    config = TrainConfig(dataset=str(tiny_dataset), balanced=True, steps_per_epoch=400)
    drawn = _epoch_indices(data, config, epoch=0).numpy()
    plain = _epoch_indices(data, TrainConfig(dataset=str(tiny_dataset), steps_per_epoch=400), 0)
    # Each class's share of the draws is its share of the weights (up to sampling noise).
    weights = data.balanced_weights.numpy()
    _, classes = np.unique(weights, return_inverse=True)  # a class's rows share one weight
    expected = np.bincount(classes, weights) / weights.sum()
    counts = np.bincount(classes[drawn], minlength=len(expected)) / len(drawn)
    np.testing.assert_allclose(counts, expected, atol=0.02)
    assert len(expected) > 2 and expected.max() / expected.min() < 30
    assert not np.array_equal(drawn, plain.numpy())
    assert config.identity()["balanced"] is True
    assert "balanced" not in TrainConfig().identity()
    with pytest.raises(ValueError, match="--balanced and --no-oversample"):
        TrainConfig(balanced=True, oversample=False)

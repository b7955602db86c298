"""Loading models: metadata checked against the contract, clear errors for bad files."""

import numpy as np
import onnx
import pytest
from canis.runtime.features import layout_hash
from canis.runtime.inference import ModelError, MotionModel


def rewrite_metadata(source, target, **changes):
    model = onnx.load(str(source))
    for entry in model.metadata_props:
        if entry.key in changes:
            entry.value = changes.pop(entry.key)
    onnx.save(model, str(target))
    return target


def test_loads_and_runs_a_batch(tiny_model):
    model = MotionModel(tiny_model)
    assert model.kind == "mann" and model.experts == 4 and model.device == "cpu"
    out = model.run(np.zeros((3, 480), np.float32))
    assert out["y"].shape == (3, 363) and out["expert_weights"].shape == (3, 4)


def test_layout_mismatch_names_both_hashes(tiny_model, tmp_path):
    path = rewrite_metadata(tiny_model, tmp_path / "old.onnx", **{"canis.layout_hash": "feed"})
    with pytest.raises(ModelError, match=f"old.onnx: .*layout feed differs .*{layout_hash()}"):
        MotionModel(path)


def test_several_differences_are_all_named(tiny_model, tmp_path):
    path = rewrite_metadata(
        tiny_model, tmp_path / "odd.onnx", **{"canis.fps": "30", "canis.joint_names": '["Hips"]'}
    )
    with pytest.raises(ModelError, match="frame rate 30 is not 60; joint names differ"):
        MotionModel(path)


@pytest.mark.parametrize("experts", ["8", "four"])
def test_experts_metadata_disagreeing_with_the_graph_fails_at_load(tiny_model, tmp_path, experts):
    path = rewrite_metadata(tiny_model, tmp_path / "odd.onnx", **{"canis.experts": experts})
    with pytest.raises(
        ModelError, match=f"odd.onnx: canis.experts '{experts}' disagrees with the graph's 4"
    ):
        MotionModel(path)


def test_truncated_and_foreign_files(tiny_model, tmp_path):
    truncated = tmp_path / "truncated.onnx"
    truncated.write_bytes(tiny_model.read_bytes()[:4096])
    with pytest.raises(ModelError, match="truncated.onnx: not a loadable ONNX model"):
        MotionModel(truncated)
    text = tmp_path / "notes.onnx"
    text.write_text("not a model")
    with pytest.raises(ModelError, match="notes.onnx: not a loadable ONNX model"):
        MotionModel(text)
    with pytest.raises(FileNotFoundError, match="missing.onnx: no such model file"):
        MotionModel(tmp_path / "missing.onnx")
    (tmp_path / "folder.onnx").mkdir()
    with pytest.raises(FileNotFoundError, match="folder.onnx: is a folder, not an ONNX model"):
        MotionModel(tmp_path / "folder.onnx")
    bare = onnx.load(str(tiny_model))
    del bare.metadata_props[:]
    onnx.save(bare, str(tmp_path / "bare.onnx"))
    with pytest.raises(ModelError, match="not a canis model"):
        MotionModel(tmp_path / "bare.onnx")


def test_io_binding_gives_the_same_outputs(tiny_model):
    model = MotionModel(tiny_model)
    buffers = model.bind(3)
    x = np.random.default_rng(0).normal(size=(3, 480)).astype(np.float32)
    buffers.inputs["x"][...] = x
    bound = model.run_bound(buffers)
    plain = model.run(x)
    for name in ("y", "expert_weights"):
        assert np.array_equal(bound[name], plain[name])
    buffers.inputs["x"][...] = 0.0  # written in place, read in place
    assert not np.array_equal(model.run_bound(buffers)["y"], plain["y"])


def test_a_failing_cuda_provider_falls_back_to_cpu_with_a_warning(tiny_model, monkeypatch, caplog):
    import canis.runtime.inference as inference
    import onnxruntime as ort

    real_session = ort.InferenceSession

    def session(path, options=None, providers=None):
        if providers and "CUDAExecutionProvider" in providers:
            raise RuntimeError("CUDA driver version is insufficient")  # as a broken install
        return real_session(path, options, providers=providers)

    monkeypatch.setattr(inference, "cuda_device_present", lambda: True)
    monkeypatch.setattr(inference.ort, "InferenceSession", session)
    model = MotionModel(tiny_model)
    assert model.device == "cpu"
    assert "CUDA provider failed (CUDA driver version is insufficient)" in caplog.text
    assert np.all(np.isfinite(model.run(np.zeros((1, 480), np.float32))["y"]))

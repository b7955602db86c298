"""An exported RTN names the clips it never trained on, and nothing measures it, or starts a
run from it, on data that holds out other clips: it would be scored on clips it learnt."""

import json
import shutil

import onnx
import pytest
from canis.training import transition_data

from canis.cli import main


def with_held_out(tmp_path, tiny_rtn, clips) -> object:
    """A copy of the tiny RTN (step and init) whose metadata names `clips` held out, or none
    when `clips` is None."""
    step = tmp_path / "other_step.onnx"
    for source, target in ((tiny_rtn, step), (tiny_rtn.with_name("tiny_rtn_init.onnx"), None)):
        model = onnx.load(str(source))
        kept = [p for p in model.metadata_props if p.key != "canis.dataset"]
        del model.metadata_props[:]
        model.metadata_props.extend(kept)
        if clips is not None:
            entry = model.metadata_props.add()
            entry.key, entry.value = "canis.dataset", json.dumps({"validation_clips": clips})
        onnx.save(model, str(target or tmp_path / "other_init.onnx"))
    return step


def test_the_tiny_rtn_names_the_clips_its_data_held_out(tiny_rtn, tiny_transitions):
    data = transition_data.load(tiny_transitions)
    meta = {p.key: p.value for p in onnx.load(str(tiny_rtn)).metadata_props}
    assert transition_data.held_out_clips(meta, tiny_rtn) == data.metadata["validation_clips"]
    transition_data.check_held_out(data, meta, tiny_rtn)  # the same split: no complaint


def test_evaluation_refuses_data_holding_out_other_clips(tiny_rtn, tiny_transitions, tmp_path):
    from canis.evaluation.transitions import evaluate

    other = with_held_out(tmp_path, tiny_rtn, ["walk"])
    with pytest.raises(ValueError, match="holds out trot but .*other_step.onnx was trained "):
        evaluate(other, tiny_transitions)
    with pytest.raises(ValueError, match="held-out-of"):  # the remedy is named
        evaluate(tiny_rtn, tiny_transitions, others={"other": other})
    unnamed = with_held_out(tmp_path, tiny_rtn, None)
    with pytest.raises(ValueError, match="names no held-out clips"):
        evaluate(unnamed, tiny_transitions)


def test_a_run_from_an_rtn_of_another_split_is_refused_before_it_starts(
    tiny_rtn, tiny_transitions, tmp_path
):
    from canis.training.train_rtn import train_rtn
    from conftest import tiny_rtn_config

    config = tiny_rtn_config(tiny_transitions, steps=1, eval_every=1, units=32)
    config.init_from = str(with_held_out(tmp_path, tiny_rtn, ["walk"]))
    with pytest.raises(ValueError, match="trained holding out walk"):
        train_rtn(config, tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()


def test_transitions_built_to_hold_out_an_rtns_clips(tiny_rtn, tmp_path, capsys):
    from synthetic_dog import standard_clips

    clips = tmp_path / "clips"
    standard_clips(clips)
    other = with_held_out(tmp_path, tiny_rtn, ["sit", "walk"])
    out = tmp_path / "t.npz"
    argv = ["dataset", "transitions", "--bvh", str(clips), "--out", str(out)]
    assert main([*argv, "--held-out-of", str(other)]) == 0
    data = transition_data.load(out)
    assert data.metadata["validation_clips"] == ["sit", "walk"]
    held = {str(n).removesuffix("_mirror") for n in data["clip_names"][data.clips(True)]}
    assert held == {"sit", "walk"}

    missing = with_held_out(tmp_path, tiny_rtn, ["walk", "gallop"])
    shutil.move(missing, tmp_path / "missing_step.onnx")
    shutil.move(tmp_path / "other_init.onnx", tmp_path / "missing_init.onnx")
    refused = tmp_path / "refused.npz"
    code = main([*argv[:-1], str(refused), "--held-out-of", str(tmp_path / "missing_step.onnx")])
    assert code != 0 and not refused.exists()
    err = capsys.readouterr().err
    assert "held-out clips not in" in err and "gallop" in err

"""The replay's commands: `canis evaluate replay` (the held-out yardstick) and `canis evaluate
ablation` (the fine-tuning terms judged on it), which share its run."""

from __future__ import annotations

import shlex
from pathlib import Path

from canis.evaluation.doc_sections import results_doc


def _replayed(args) -> tuple[dict, list, dict]:
    """The replay of --models over --clips with the pose after a jump and a stop: (results,
    every clip of the mocap, the loaded models by name)."""
    from canis.evaluation import after_actions, replay
    from canis.evaluation.controllers import load_clips
    from canis.evaluation.model_registry import model_paths, parse_models
    from canis.runtime.inference import MotionModel
    from canis.training.clips import DOWNLOAD_HINT, default_mocap_dir

    models = model_paths(*parse_models(args.models))
    mocap = args.bvh or default_mocap_dir()
    if mocap is None or not Path(mocap).is_dir():
        raise FileNotFoundError(f"no mocap folder at {mocap}: give --bvh. {DOWNLOAD_HINT}")
    every_clip = list(load_clips(Path(mocap), progress=False))
    clips = every_clip
    if args.clips == "held-out":
        clips = replay.held_out(clips, models.values())
    if not clips:
        raise ValueError(
            f"{mocap}: none of the clips to replay ({args.clips}: held out by every model) is there"
        )
    results = replay.evaluate_replay(models, clips)
    skeleton = clips[0].skeleton
    loaded = {name: MotionModel(path, threads=1) for name, path in models.items()}
    results["after_actions"] = {
        name: after_actions.after_actions(model, skeleton) for name, model in loaded.items()
    }
    return results, every_clip, loaded


def _write_part(args, results: dict, text: str, section: str) -> None:
    """Prints a part's page text, and writes its JSON and its section where asked."""
    print(text)
    if args.json:
        import json

        args.json.write_text(json.dumps(results, indent=1) + "\n")
    if args.doc is not None:
        from canis.evaluation.doc_sections import replace_section

        replace_section(args.doc, section, text)
    print(f"wrote {', '.join(str(p) for p in (args.json, args.doc) if p) or 'nothing'}")


def _machine() -> str:
    from canis.runtime.machine import describe_machine

    m = describe_machine()
    return f"{m['cpu']}, {m['logical_cores']} threads"


def run_evaluate_replay(args) -> int:
    from canis.evaluation import after_actions, head_sweep, replay

    args.doc = results_doc(args)
    results, every_clip, loaded = _replayed(args)
    results["head_sweep"] = head_sweep.head_sweep(loaded, every_clip)  # the whole data's head
    command = f"./run canis evaluate replay --models {args.models}"
    command += "" if args.clips == "held-out" else f" --clips {args.clips}"
    text = replay.markdown(results, command, _machine())
    text += after_actions.markdown(results["after_actions"])
    text += head_sweep.markdown(results["head_sweep"])
    _write_part(args, results, text, "replay")
    if results["missing"]:  # said, not NaN: a gait no clip of the set has frames of
        print(f"no frames of: {', '.join(results['missing'])} in these clips")
    return 0


def run_evaluate_ablation(args) -> int:
    from canis.evaluation import ablation

    args.doc = results_doc(args)
    results, _, _ = _replayed(args)
    if results["missing"]:
        raise ValueError(f"the held-out clips have no frames of: {', '.join(results['missing'])}")
    command = f"./run canis evaluate ablation --models {shlex.quote(args.models)}"
    if args.section != "ablation":
        command += f" --section {args.section}"
    text = ablation.markdown(results, command, _machine(), args.section)
    _write_part(args, results, text, args.section)
    return 0

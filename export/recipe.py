"""`canis train --config training/configs/NAME.toml --out RUN`: one network's whole recipe, from
the raw BVH to the exported ONNX files and their model cards, as one resumable command.

The run folder holds each stage's product, and a stage whose product is complete is skipped,
so the same command with --resume continues wherever the last one stopped (training resumes
exactly: training/train.py):

    RUN/recipe.toml          the recipe as given (a resume must give the same settings)
    RUN/dog_dataset.npz      labels, mirrors, features of every clip (`canis dataset build`)
    RUN/train/               `canis train`'s run
    RUN/finetune/            closed-loop fine-tuning's run, when the recipe has [finetune]
    RUN/NAME.onnx, .md       the export and its card; NAME.int8.onnx etc. per precision
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from canis.export.recipe_config import flat_settings, read_recipe

RECIPE, DATASET = "recipe.toml", "dog_dataset.npz"


def _products(out: Path, name: str) -> list[Path]:
    """What a recipe writes into its run folder (what --force removes: nothing else)."""
    stems = [f"{name}", *(f"{name}.{p}" for p in ("fp16", "int8"))]
    files = [out / f"{stem}{suffix}" for stem in stems for suffix in (".onnx", ".md")]
    files += [out / f"{stem}.closed_loop.json" for stem in stems]
    return [out / RECIPE, out / DATASET, out / "train", out / "finetune", *files]


def check_run_folder(out: Path, recipe: dict, config_path: Path, resume: bool, force: bool):
    """Before any work: a folder that holds a run is continued (--resume, with the same
    recipe) or replaced (--force), never overwritten unasked."""
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out}: is a file, not a run folder")
    held = [p.name for p in _products(out, recipe["name"]) if p.exists()]
    if resume and force:
        raise ValueError("--resume and --force: choose one")
    if resume:
        if not held:
            raise FileNotFoundError(f"--resume: {out} holds no run of a recipe")
        saved = out / RECIPE
        if saved.exists():
            before, now = flat_settings(read_recipe(saved)), flat_settings(recipe)
            differ = [
                key for key in sorted(before.keys() | now.keys()) if before.get(key) != now.get(key)
            ]
            if differ:
                raise ValueError(
                    f"--resume: {out} was started from another recipe ({', '.join(differ)} "
                    f"differ from {config_path}); resume with the same settings"
                )
    elif held and not force:
        raise ValueError(
            f"--out {out}: already holds a run ({', '.join(held)}); continue it with --resume, "
            "or replace it with --force"
        )


def _write_text(path: Path, text: str) -> None:
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".partial") as f:
        f.write(text)
    os.replace(f.name, path)


def build_dataset(recipe: dict, path: Path) -> None:
    from canis.training import dataset
    from canis.training.clips import DOWNLOAD_HINT, default_mocap_dir

    if path.exists():
        print(f"dataset: {path} (built)")
        return
    folder = recipe["data"]["bvh"] or default_mocap_dir()
    if folder is None:
        raise FileNotFoundError(f"no data.bvh in the recipe and no mocap found. {DOWNLOAD_HINT}")
    result = dataset.build(Path(folder), seed=recipe["data"]["holdout_seed"])
    dataset.save(result, path)
    print(f"dataset: wrote {path} ({len(result.arrays['X'])} pairs)")


def train_stage(recipe: dict, dataset_path: Path, run_dir: Path) -> Path:
    from canis.training.checkpoint import load_checkpoint
    from canis.training.train import LAST, TrainConfig, train

    t = recipe["train"]
    config = TrainConfig.from_schedule(
        t["schedule"],
        kind=t["model"],
        experts=t["experts"],
        hidden=t["hidden"] or None,  # 0 in the file: the paper's (training/models.py)
        epochs=t["epochs"] or None,  # 0: the schedule's
        batch_size=t["batch_size"] or None,
        lr=t["lr"] or None,
        seed=t["seed"],
        oversample=t["oversample"],
        balanced=t["balanced"],
        sniffing=t["sniffing"],
        sniffing_walks=t["sniffing_walks"],
        jump_oversample=t["jump_oversample"],
        precision=t["precision"],
        dataset=str(dataset_path),
        dropout=t["dropout"],
        drop_commands=t["drop_commands"],
        weight_decay=t["weight_decay"],
        input_noise=t["input_noise"],
        mirrored=t["mirrored"],
    )
    last = run_dir / LAST
    if last.exists() and load_checkpoint(last).config["epoch"] >= config.epochs:
        print(f"train: {run_dir} ({config.epochs} epochs, done)")
        return last
    train(config, run_dir, resume=last.exists())
    return last


def finetune_stage(recipe: dict, config_path: Path, start: Path, dataset_path: Path, run_dir):
    from canis.training.checkpoint import load_checkpoint
    from canis.training.finetune import fine_tune
    from canis.training.finetune_config import RUN_FIELDS, ClosedLoopConfig, FineTuneSettings
    from canis.training.train import LAST

    values = dict(recipe["finetune"])
    loop = ClosedLoopConfig(**{k: v for k, v in values.items() if k not in RUN_FIELDS})
    run = {k: v for k, v in values.items() if k in RUN_FIELDS}
    settings = FineTuneSettings(start=str(start), dataset=str(dataset_path), **run)
    last = run_dir / LAST
    if last.exists() and load_checkpoint(last).config["closed_loop_epoch"] >= settings.epochs:
        print(f"finetune: {run_dir} ({settings.epochs} epochs, done)")
        return last
    source = {"file": str(config_path), "values": values}
    fine_tune(settings, loop, run_dir, resume=last.exists(), recipe=source)
    return last


def export_stage(recipe: dict, checkpoint: Path, dataset_path: Path, out: Path, command: str):
    """Every precision the recipe names, each with its card (the closed-loop check run on
    it); the fp32 graph is checked against PyTorch first and the others converted from it."""
    from canis.export.closed_loop import closed_loop_report
    from canis.export.model_card import write_card, write_variant_card
    from canis.export.onnx_export import export_onnx
    from canis.export.precision import convert_motion_model
    from canis.training.checkpoint import load_checkpoint

    seconds, name = recipe["export"]["card_seconds"], recipe["name"]
    fp32 = out / f"{name}.onnx"
    report = export_onnx(checkpoint, fp32, dataset_path)
    config = load_checkpoint(checkpoint).config
    loop = closed_loop_report(fp32, seconds=seconds)
    write_card(fp32, config, checkpoint, report, loop, reproduce=command)
    written = [fp32]
    for precision in recipe["export"]["precisions"]:
        if precision != "fp32":
            variant = out / f"{name}.{precision}.onnx"
            check = convert_motion_model(fp32, variant, precision)
            loop = closed_loop_report(variant, seconds=seconds)
            write_variant_card(variant, check, loop, reproduce=command)
            written.append(variant)
    print("export: " + ", ".join(str(p) for p in written) + " (cards beside them)")


def run_recipe(config_path: Path, out: Path, resume: bool, force: bool) -> int:
    recipe = read_recipe(config_path)  # the whole file checked before any work
    out = Path(out)
    check_run_folder(out, recipe, config_path, resume, force)
    if force:
        for path in _products(out, recipe["name"]):
            shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    _write_text(out / RECIPE, Path(config_path).read_text(encoding="utf-8"))
    command = f"./run canis train --config {config_path} --out runs/NAME"
    dataset_path = out / DATASET
    build_dataset(recipe, dataset_path)
    checkpoint = train_stage(recipe, dataset_path, out / "train")
    if recipe["finetune"] is not None:
        checkpoint = finetune_stage(recipe, config_path, checkpoint, dataset_path, out / "finetune")
    export_stage(recipe, checkpoint, dataset_path, out, command)
    print(f"done: {out} ({recipe['name']}.onnx from {checkpoint})")
    return 0

"""The one registry of the motion models that `canis bench`, the demo and `canis evaluate` know
by name: the shipped ones (runtime/assets.py's SHIPPED_MOTION_MODELS, the manifest of what ships)
and the ones trained locally, with the command that makes each. Torch-free."""

from __future__ import annotations

from pathlib import Path

from canis.runtime.assets import SHIPPED_MOTION_MODELS, asset_path

# Where each model is expected; the ones not shipped are trained and exported by TRAIN_COMMANDS.
MODEL_FILES = {
    # fp32, the reference; the shipped int8 default is measured beside it by the precision gate
    "MANN8": asset_path(SHIPPED_MOTION_MODELS["MANN-8 fp32"], must_exist=False),
    "MANN4": Path("runs/mann4-cpu/mann4.onnx"),
    "PFNN": asset_path(SHIPPED_MOTION_MODELS["PFNN"], must_exist=False),
    "VNN": Path("runs/vnn-cpu/vnn.onnx"),
}
# Other files of the shipped models that the evaluation can name (not in MODEL_FILES: the
# controllers' default and `canis bench` already time the shipped files by the manifest).
VARIANT_FILES = {"MANN8-int8": asset_path(SHIPPED_MOTION_MODELS["MANN-8"], must_exist=False)}
TRAIN_COMMANDS = {
    "MANN4": "./run canis train --model mann --experts 4 --schedule cpu --out runs/mann4-cpu && "
    "./run canis export runs/mann4-cpu/last.safetensors --out runs/mann4-cpu/mann4.onnx "
    "--dataset data/dog_dataset.npz --card",
    "VNN": "./run canis train --model vnn --schedule cpu --out runs/vnn-cpu && "
    "./run canis export runs/vnn-cpu/last.safetensors --out runs/vnn-cpu/vnn.onnx "
    "--dataset data/dog_dataset.npz --card",
}


def default_models() -> tuple[list[str], str]:
    """(the models whose files are present: the shipped ones and any trained locally, a note
    on how to add the others): `canis evaluate controllers` with no --models runs on a fresh
    clone instead of failing on the networks that are not shipped."""
    present = [name for name, path in MODEL_FILES.items() if path.is_file()]
    absent = [name for name in MODEL_FILES if name not in present]
    note = "".join(
        f"; {name} is not built here ({MODEL_FILES[name]}): make it with "
        f"{TRAIN_COMMANDS.get(name, 'a fresh clone (it is shipped)')}"
        for name in absent
    )
    if absent:
        note += f", then add it with --models {','.join(MODEL_FILES)}"
    return present, f"evaluating {', '.join(present)}{note}"


def parse_models(text: str) -> tuple[list[str], dict[str, Path]]:
    """`--models` as the evaluation commands take it: known names (MODEL_FILES) or NAME=PATH,
    comma-separated; (the names in order, {name: path} of those given a path)."""
    names, overrides = [], {}
    for item in text.split(","):
        name, sep, path = item.strip().partition("=")
        names.append(name)
        if sep:
            overrides[name] = Path(path)
    return names, overrides


def model_paths(names: list[str], overrides: dict[str, Path] | None = None) -> dict[str, Path]:
    """Each named model's file; a clear error names the command that makes a missing one."""
    overrides = overrides or {}
    paths, missing = {}, []
    for name in names:
        known = MODEL_FILES | VARIANT_FILES
        if name not in known and name not in overrides:
            raise ValueError(f"unknown model {name!r}: known {', '.join(known)}, or give NAME=PATH")
        path = overrides.get(name, known.get(name))
        if not path.is_file():
            hint = TRAIN_COMMANDS.get(name, "export it with ./run canis export")
            missing.append(f"{name}: {path} is missing; make it with: {hint}")
        paths[name] = path
    if missing:
        raise FileNotFoundError("\n".join(missing))
    return paths

"""A network's recipe file (training/configs/NAME.toml): the settings of every stage from the
raw BVH to the exported ONNX files, read and checked before any work. Torch-free, so that a
bad file is refused at once.

    name = "mann8"                 # the exported files: RUN/mann8.onnx, RUN/mann8.int8.onnx
    [data]                         # `canis dataset build`
    [train]                        # `canis train` (training/train.py TrainConfig)
    [finetune]                     # optional: closed-loop fine-tuning (training/finetune_config.py)
    [export]                       # precisions and the model card's closed-loop check

A key the file does not give takes the default below (the finetune table's, its own module's)."""

from __future__ import annotations

import math
import tomllib
from pathlib import Path

# (type, default; REQUIRED: no default) of every key, by table.
REQUIRED = object()
FIELDS = {
    "": {"name": (str, REQUIRED), "description": (str, "")},
    "data": {"bvh": (str, ""), "holdout_seed": (int, 0)},
    "train": {
        "model": (str, REQUIRED),
        "experts": (int, 8),
        "hidden": (int, 0),
        "schedule": (str, "cpu"),
        "epochs": (int, 0),
        "batch_size": (int, 0),
        "lr": (float, 0.0),
        "seed": (int, REQUIRED),
        "precision": (str, "bf16"),
        "dropout": (float, 0.3),
        "drop_commands": (bool, True),
        "weight_decay": (float, 2.5e-3),
        "input_noise": (float, 0.0),
        "oversample": (bool, True),
        "balanced": (bool, False),
        "sniffing": (bool, True),
        "sniffing_walks": (bool, True),
        "jump_oversample": (float, 1.0),
        "mirrored": (bool, True),
    },
    "export": {"precisions": (list, ["fp32", "int8"]), "card_seconds": (float, 60.0)},
}
TABLES = (*FIELDS, "finetune")
MODELS = ("mann", "pfnn", "vnn")
EXPORT_PRECISIONS = ("fp32", "fp16", "int8")
_WORDS = {str: "a string", int: "an integer", float: "a number", bool: "true or false"}


def _key(table: str, key: str) -> str:
    return f"{table}.{key}" if table else key


def _typed(path: Path, table: str, key: str, value, kind):
    """The value as its field's type, or one line naming the file and the key."""
    if kind is list:
        ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
        words = "a list of strings"
    elif kind is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        ok = ok and math.isfinite(value)
        words = "a finite number"
    elif kind is int:
        ok, words = isinstance(value, int) and not isinstance(value, bool), _WORDS[int]
    else:
        ok, words = isinstance(value, kind), _WORDS[kind]
    if not ok:
        raise ValueError(f"{path}: {_key(table, key)} = {value!r}: must be {words}")
    return float(value) if kind is float else value


def _check_ranges(path: Path, recipe: dict) -> None:
    train, export = recipe["train"], recipe["export"]

    def refuse(key: str, value, what: str):
        raise ValueError(f"{path}: {key} = {value!r}: {what}")

    if train["model"] not in MODELS:
        refuse("train.model", train["model"], f"one of {', '.join(MODELS)}")
    if train["schedule"] not in ("paper", "cpu"):
        refuse("train.schedule", train["schedule"], "paper or cpu (training/optimisation.py)")
    if train["precision"] not in ("bf16", "fp32"):
        refuse("train.precision", train["precision"], "bf16 or fp32")
    for key in ("experts", "hidden", "epochs", "batch_size", "seed"):
        if train[key] < 0 or (key == "experts" and train[key] < 1):
            refuse(f"train.{key}", train[key], "must be at least 1" if key == "experts" else ">= 0")
    if not 0 <= train["dropout"] < 1:
        refuse("train.dropout", train["dropout"], "a probability, at least 0 and below 1")
    for key in ("lr", "weight_decay", "input_noise"):
        if train[key] < 0:
            refuse(f"train.{key}", train[key], "must be 0 or more")
    if train["jump_oversample"] < 1:
        refuse("train.jump_oversample", train["jump_oversample"], "must be at least 1")
    unknown = [p for p in export["precisions"] if p not in EXPORT_PRECISIONS]
    if unknown or not export["precisions"] or "fp32" not in export["precisions"]:
        refuse("export.precisions", export["precisions"], "fp32 and any of fp16, int8")
    if export["card_seconds"] <= 0:
        refuse("export.card_seconds", export["card_seconds"], "must be over 0")
    if not recipe["name"].replace("-", "").replace("_", "").isalnum():
        refuse("name", recipe["name"], "letters, digits, - and _ only (it names the files)")
    if recipe["data"]["bvh"] and not Path(recipe["data"]["bvh"]).is_dir():
        refuse("data.bvh", recipe["data"]["bvh"], "not a folder of .bvh clips")


def read_recipe(path) -> dict:
    """The recipe's every setting ({"name", "description", "data", "train", "finetune"
    (None when the file has no such table), "export"}), or one line naming the file and the
    key: not TOML, an unknown table or key, a missing value, a wrong type, out of range."""
    from canis.training.finetune_config import check_config_values

    path = Path(path)
    try:
        values = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise ValueError(f"{path}: not a readable TOML recipe ({error})") from None
    recipe: dict = {"finetune": None}
    for table, fields in FIELDS.items():
        given = values if not table else values.get(table, {})
        if table and not isinstance(given, dict):
            raise ValueError(f"{path}: {table} must be a table ([{table}])")
        out = recipe if not table else recipe.setdefault(table, {})
        for key, (kind, default) in fields.items():
            if key in given:
                out[key] = _typed(path, table, key, given[key], kind)
            elif default is REQUIRED:
                raise ValueError(f"{path}: missing {_key(table, key)} (no default)")
            else:
                out[key] = list(default) if kind is list else default
    for key, value in values.items():
        if isinstance(value, dict) and key not in TABLES:
            raise ValueError(f"{path}: unknown table [{key}] (the tables: {', '.join(TABLES[1:])})")
        if not isinstance(value, dict) and key not in FIELDS[""]:
            raise ValueError(f"{path}: unknown key {key!r} (the keys: name, description)")
    for table in FIELDS:
        if table:
            for key in values.get(table, {}):
                if key not in FIELDS[table]:
                    known = ", ".join(FIELDS[table])
                    raise ValueError(f"{path}: unknown key {table}.{key} (the keys: {known})")
    if "finetune" in values:
        if not isinstance(values["finetune"], dict):
            raise ValueError(f"{path}: finetune must be a table ([finetune])")
        recipe["finetune"] = check_config_values(dict(values["finetune"]), f"{path}: ", "finetune.")
    _check_ranges(path, recipe)
    return recipe


def flat_settings(recipe: dict) -> dict:
    """{"train.seed": 1, ...}: every setting by its key in the file, to compare two recipes."""
    flat = {}
    for table, value in recipe.items():
        if isinstance(value, dict):
            flat |= {f"{table}.{key}": v for key, v in value.items()}
        else:
            flat[table] = value
    return flat

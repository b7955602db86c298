"""Checkpoints as safetensors: model weights, AdamW state, the normalisation statistics and a
JSON config in the metadata. No pickle: a checkpoint is tensors and strings only. Written
atomically (temporary file, then rename), so a crash never leaves a corrupt latest checkpoint.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import torch
from canis.runtime.features import layout_hash
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

FORMAT = "canis-checkpoint-1"


@dataclass
class Checkpoint:
    tensors: dict[str, torch.Tensor]
    config: dict

    def section(self, prefix: str) -> dict[str, torch.Tensor]:
        return {k[len(prefix) :]: v for k, v in self.tensors.items() if k.startswith(prefix)}


def save_checkpoint(
    path: Path, model, optimizer, normalisation: dict, config: dict, layout: str | None = None
) -> None:
    """`layout` is the hash of the feature contract the model was trained for (default: the
    motion networks'; the transition network has its own)."""
    tensors = {f"model/{k}": v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    tensors |= {
        f"norm/{k}": torch.as_tensor(v).cpu().contiguous() for k, v in normalisation.items()
    }
    names = [name for name, _ in model.named_parameters()]
    for index, state in optimizer.state_dict()["state"].items():
        for key, value in state.items():
            tensors[f"optim/{names[index]}/{key}"] = torch.as_tensor(value).cpu().contiguous()
    write_checkpoint(path, tensors, config, layout)


def write_checkpoint(
    path: Path, tensors: dict[str, torch.Tensor], config: dict, layout: str | None = None
) -> None:
    """The file itself: `tensors` (model/, norm/ and optionally optim/ entries) and the config,
    written atomically."""
    metadata = {
        "format": FORMAT,
        "layout_hash": layout or layout_hash(),
        "config": json.dumps(config),
    }
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".partial")
    save_file(tensors, str(tmp), metadata=metadata)
    tmp.replace(path)


def load_checkpoint(path: str | Path, layout: str | None = None) -> Checkpoint:
    path = Path(path)
    layout = layout or layout_hash()
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such checkpoint")
    try:
        tensors = load_file(str(path))
        from safetensors import safe_open

        with safe_open(str(path), framework="pt") as file:
            metadata = file.metadata() or {}
    except (SafetensorError, OSError, ValueError) as error:
        raise ValueError(f"{path}: not a readable safetensors checkpoint ({error})") from None
    if metadata.get("format") != FORMAT:
        raise ValueError(f"{path}: not a canis checkpoint (format {metadata.get('format')!r})")
    if metadata.get("layout_hash") != layout:
        from canis.runtime.transition_frames import transition_layout_hash

        found = metadata.get("layout_hash")
        if found == transition_layout_hash() and layout == layout_hash():
            raise ValueError(f"{path}: an RTN checkpoint; export it with `canis export-rtn`")
        if found == layout_hash() and layout == transition_layout_hash():
            raise ValueError(f"{path}: a motion network's checkpoint; use `canis export`")
        raise ValueError(
            f"{path}: trained for feature layout {metadata.get('layout_hash')}, but this runtime "
            f"uses {layout}; retrain on a dataset built with this version"
        )
    return Checkpoint(tensors, json.loads(metadata["config"]))


def tensor_differences(expected: dict, given: dict, prefix: str = "") -> list[str]:
    """Each tensor of `given` missing, unexpected or of another shape than `expected`'s."""
    problems = [f"missing {prefix}{k}" for k in expected if k not in given]
    problems += [f"unexpected {prefix}{k}" for k in given if k not in expected]
    problems += [
        f"{prefix}{k}: {tuple(given[k].shape)} vs {tuple(v.shape)}"
        for k, v in expected.items()
        if k in given and given[k].shape != v.shape
    ]
    return problems


def restore_model(checkpoint: Checkpoint, model, path: Path | str = "checkpoint") -> None:
    """Loads weights, naming every tensor whose presence or shape differs (its shape, then the
    model's)."""
    weights = checkpoint.section("model/")
    problems = tensor_differences(model.state_dict(), weights)
    if problems:
        raise ValueError(
            f"{path}: does not fit a {checkpoint.config.get('kind')} model with "
            f"this configuration: {'; '.join(problems[:6])}"
        )
    model.load_state_dict(weights)


def restore_optimizer(checkpoint: Checkpoint, model, optimizer) -> None:
    names = [name for name, _ in model.named_parameters()]
    state = optimizer.state_dict()
    saved = checkpoint.section("optim/")
    state["state"] = {}
    for index, name in enumerate(names):
        entries = {k[len(name) + 1 :]: v for k, v in saved.items() if k.startswith(name + "/")}
        if entries:
            state["state"][index] = entries
    optimizer.load_state_dict(state)


def check_new_run(run_dir: Path, resume: bool, force: bool) -> None:
    """A run folder that already holds a run is continued (resume) or replaced when asked
    (force), never overwritten silently; checked before any work."""
    run_dir = Path(run_dir)
    if run_dir.exists() and not run_dir.is_dir():
        raise ValueError(f"--out {run_dir}: is a file, not a run folder")
    held = [
        n for n in ("last.safetensors", "best.safetensors", "log.csv") if (run_dir / n).exists()
    ]
    if resume:
        if not (run_dir / "last.safetensors").exists():
            raise FileNotFoundError(f"--resume: {run_dir} holds no run (no last.safetensors)")
    elif held and not force:
        raise ValueError(
            f"--out {run_dir}: already holds a run ({', '.join(held)}); continue it with "
            "--resume, or replace it with --force"
        )


def finite_loss(value: float, what: str) -> float:
    """`value`, or a FloatingPointError naming where the loss stopped being a number (NaN
    rows in the data, or a setting such as an infinite weight decay): the run stops there,
    its last checkpoint kept as it was, instead of saving NaN weights."""
    if not math.isfinite(value):
        raise FloatingPointError(
            f"the loss is {value} at {what}; the run stopped (check the dataset for non-finite "
            "rows and the settings); its last checkpoint is kept as it was"
        )
    return value


def done_line(run_dir: Path) -> str:
    """'done: RUN (FILES)' naming only the files the run holds."""
    files = [
        n
        for n in ("last.safetensors", "best.safetensors", "log.csv")
        if (Path(run_dir) / n).exists()
    ]
    if not files:
        return f"nothing written to {run_dir}: no epoch or step finished"
    return f"done: {run_dir} ({', '.join(files)})"

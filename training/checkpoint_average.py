"""`canis average`: the mean of the weights of two or more checkpoints of one network (a "model
soup", Wortsman et al. 2022; over one run's epochs, stochastic weight averaging's mean).

Each short closed-loop fine-tune moves the weights a little at random around a good region: on
the one-step start the same recipe a seed or an epoch apart met nine or ten of the ten bars
(docs/RESULTS.md, the twenty-ninth and thirtieth sessions), and a closed loop is chaotic, so a
figure of one snapshot is partly its draw. The mean of a run's epochs sits inside that region.

Only checkpoints that can be averaged are: the same kind and layers (every model tensor with
the same shape) and the same standardisation (the dataset build the weights read their inputs
through). Optimiser state is dropped (the mean of AdamW moments is no optimiser's state), so
the result is a start (`canis finetune --start`) or an export, not a resume. The config is the
last checkpoint's, with `averaged_from` naming each source (its file, SHA-256, epoch and seed),
which the model card prints.
"""

from __future__ import annotations

from pathlib import Path

import torch
from canis.runtime.assets import file_sha256
from canis.training.checkpoint import (
    load_checkpoint,
    tensor_differences,
    write_checkpoint,
)


def average_checkpoints(paths: list[Path], out: Path) -> dict:
    """Writes the mean of `paths`' model weights to `out`; returns its config."""
    paths = [Path(p) for p in paths]
    if len(paths) < 2:
        raise ValueError(f"{len(paths)} checkpoint given: needs two or more to average")
    if Path(out).resolve() in {p.resolve() for p in paths}:
        raise ValueError(f"{out}: is one of the checkpoints averaged; write the mean elsewhere")
    loaded = [load_checkpoint(p) for p in paths]
    first = loaded[0]
    for path, checkpoint in zip(paths[1:], loaded[1:], strict=True):
        for key in ("kind", "experts"):
            if checkpoint.config.get(key) != first.config.get(key):
                raise ValueError(
                    f"{path}: {key} {checkpoint.config.get(key)!r}, but {paths[0]} has "
                    f"{first.config.get(key)!r}: only one network's checkpoints can be averaged"
                )
        problems = [
            problem
            for prefix in ("model/", "norm/")
            for problem in tensor_differences(
                first.section(prefix), checkpoint.section(prefix), prefix
            )
        ]
        if problems:
            raise ValueError(f"{path}: does not fit {paths[0]}'s layers: {'; '.join(problems[:6])}")
        for key, value in first.section("norm/").items():
            if not torch.equal(checkpoint.tensors[f"norm/{key}"], value):
                raise ValueError(
                    f"{path}: standardised otherwise than {paths[0]} (norm/{key} differs): "
                    "trained on another build of the dataset"
                )
    tensors = {
        f"model/{key}": torch.stack([c.tensors[f"model/{key}"].double() for c in loaded])
        .mean(0)
        .to(value.dtype)
        .contiguous()
        for key, value in first.section("model/").items()
    }
    tensors |= {f"norm/{key}": value for key, value in first.section("norm/").items()}
    config = dict(loaded[-1].config)
    config["averaged_from"] = [
        {
            "file": str(path),
            "sha256": file_sha256(path),
            "closed_loop_epoch": checkpoint.config.get("closed_loop_epoch"),
            "seed": checkpoint.config.get("closed_loop", {}).get("seed"),
        }
        for path, checkpoint in zip(paths, loaded, strict=True)
    ]
    write_checkpoint(out, tensors, config)
    return config

"""The command line the controllers studies share (scenario_cadence, skating_breakdown,
replay_quality): the networks to drive and the mocap to compare them with."""

from __future__ import annotations

import argparse
from pathlib import Path


def study_parser(doc: str) -> argparse.ArgumentParser:
    """A parser described by the module's docstring's first paragraph, with --models and
    --mocap."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument(
        "--models", default="MANN8,PFNN", help="names or NAME=PATH, comma-separated"
    )
    parser.add_argument(
        "--mocap",
        type=Path,
        default=None,
        help="mocap folder (default: CANIS_MOCAP_DIR, or shared)",
    )
    return parser


def models_and_clips(parser: argparse.ArgumentParser, args) -> tuple[dict[str, Path], list]:
    """({name: model file}, the mocap's clips as captured) of parsed study arguments; a clear
    error for a missing model or mocap folder."""
    from canis.evaluation.controllers import load_clips
    from canis.evaluation.model_registry import model_paths, parse_models
    from canis.training.data_paths import DOWNLOAD_HINT, default_mocap_dir

    mocap = args.mocap or default_mocap_dir()
    if mocap is None or not Path(mocap).is_dir():
        parser.error(f"--mocap: no mocap folder at {mocap}. {DOWNLOAD_HINT}")
    paths = model_paths(*parse_models(args.models))
    return paths, list(load_clips(Path(mocap), progress=False))

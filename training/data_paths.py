"""Where the dog motion capture is. It is CC BY-NC 4.0 and never committed: the project reads
it from $CANIS_MOCAP_DIR, or from ../shared/data/dog-mocap beside the checkout when present."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
MOCAP_ENV_VAR = "CANIS_MOCAP_DIR"
SHARED_MOCAP_DIR = REPO_ROOT.parent / "shared" / "data" / "dog-mocap"
DOWNLOAD_HINT = (
    "The dog motion capture comes with 'Mode-Adaptive Neural Networks for Quadruped Motion "
    "Control' (Zhang et al., SIGGRAPH 2018): get MotionCapture.zip from the AI4Animation "
    "repository (SIGGRAPH_2018 folder), unzip its .bvh files into a folder and set "
    f"{MOCAP_ENV_VAR} to it (licence CC BY-NC 4.0)."
)


def default_mocap_dir() -> Path | None:
    """The mocap folder to use by default, or None when none is available."""
    configured = os.environ.get(MOCAP_ENV_VAR)
    if configured:
        return Path(configured)
    return SHARED_MOCAP_DIR if SHARED_MOCAP_DIR.is_dir() else None

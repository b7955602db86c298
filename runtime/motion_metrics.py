"""Torch-free measures of motion quality shared by the harness (canis run), training and the
evaluation: one implementation of each."""

from __future__ import annotations

import numpy as np

SKATING_HEIGHT_CM = 2.5  # the MANN paper's H


def foot_skating_cm(paw_xz_m: np.ndarray, paw_height_m: np.ndarray) -> np.ndarray:
    """The MANN paper's measure per frame and paw (F-1, 4): horizontal speed in cm/frame,
    counted under H = 2.5 cm and weighted by 2 - 2^(h/H) with the exponent in [0, 1]."""
    velocity_cm = np.linalg.norm(np.diff(paw_xz_m, axis=0), axis=-1) * 100
    height_cm = paw_height_m[1:] * 100
    weight = 2 - 2 ** np.clip(height_cm / SKATING_HEIGHT_CM, 0, 1)
    return np.where(height_cm < SKATING_HEIGHT_CM, velocity_cm * weight, 0.0)

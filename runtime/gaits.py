"""Gait from the footfall pattern: walk, pace, trot or canter (the MANN paper's Fig. 2).

Used for labelling and evaluating the mocap (training/labels.py) and for the demo's HUD;
never a network input: in MANN the gaits emerge from the commanded speed.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

GAITS = ("walk", "pace", "trot", "canter")
NO_GAIT = -1
# Contact patterns are compared over this window (frames) around each frame.
GAIT_WINDOW_FRAMES = 61
GAIT_PAIR_CORRELATION = 0.5
WALK_MIN_DUTY_FACTOR = 0.5
# Below this speed, unsynchronised stepping with little ground contact is a slow walk whose
# contacts the detector partly misses (turning on the spot, shuffling), not a canter: the
# paper, too, split gaits by speed first.
CANTER_MIN_SPEED_MPS = 1.5


def _correlation(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pearson correlation along the last axis; 0 where either signal is constant."""
    a = a - a.mean(axis=-1, keepdims=True)
    b = b - b.mean(axis=-1, keepdims=True)
    denominator = np.sqrt((a * a).sum(-1) * (b * b).sum(-1))
    return np.where(denominator > 0, (a * b).sum(-1) / np.where(denominator > 0, denominator, 1), 0)


def classify_gaits(
    contacts: np.ndarray, root_speed_mps: np.ndarray, locomotion: np.ndarray
) -> np.ndarray:
    """Gait per frame (F,) from the footfall pattern around it, NO_GAIT off locomotion.

    contacts (F, 4) in the paw order left front, right front, left hind, right hind. Trot
    moves diagonal pairs together and pace lateral pairs; of the rest, a walk keeps each paw
    down more than half the time and a canter less.
    """
    half = GAIT_WINDOW_FRAMES // 2
    padded = np.pad(contacts.astype(np.float64), [(half, half), (0, 0)], mode="edge")
    signals = sliding_window_view(padded, GAIT_WINDOW_FRAMES, axis=0)  # (F, 4, window)
    lf, rf, lh, rh = (signals[:, p] for p in range(4))
    diagonal = 0.5 * (_correlation(lf, rh) + _correlation(rf, lh))
    lateral = 0.5 * (_correlation(lf, lh) + _correlation(rf, rh))
    duty = signals.mean(axis=(1, 2))
    cantering = (duty < WALK_MIN_DUTY_FACTOR) & (root_speed_mps >= CANTER_MIN_SPEED_MPS)
    gaits = np.where(cantering, GAITS.index("canter"), GAITS.index("walk"))
    gaits = np.where(
        (lateral > GAIT_PAIR_CORRELATION) & (lateral > diagonal), GAITS.index("pace"), gaits
    )
    gaits = np.where(
        (diagonal > GAIT_PAIR_CORRELATION) & (diagonal >= lateral), GAITS.index("trot"), gaits
    )
    return np.where(locomotion, gaits, NO_GAIT)

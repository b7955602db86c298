"""Which dataset rows `canis train` trains on and which it validates on (`--holdout`,
`--no-mirrored`): the generalisation study's splits (docs/RESULTS.md, issue 17 item 3).

`clips` (the default) trains on every row of the clips the dataset does not hold out (its
`validation` column: whole clips, a clip and its mirror together). `within-clips` also keeps
those held-out clips out of training, so that every run is validated on the same held-out
clips, and in addition holds out the last TAIL_FRACTION of every training clip: a second
validation set of motions the network has seen the start of. A gap of GAP_FRAMES on each side
of the cut is dropped, so that no training row's window of frames (the trajectory's -50..+60
frames, the output's next frame) overlaps a within-clip validation row's: the two sets then
share motions, not frames. A clip and its mirror have the same frames, so they are cut at the
same frame.
"""

from __future__ import annotations

import numpy as np
from canis.runtime.features import TRAJECTORY_OFFSETS_FRAMES

HOLDOUTS = ("clips", "within-clips")
TAIL_FRACTION = 0.15
# A row at frame f reads frames f-50 .. f+60 (+1 for its output); with this gap on each side
# of the cut, a training row and a within-clip validation row are at least 121 frames apart.
GAP_FRAMES = max(TRAJECTORY_OFFSETS_FRAMES)


def tail_cuts(clip: np.ndarray, frame: np.ndarray) -> np.ndarray:
    """Per row, the frame at which its clip's held-out tail (with the gap around it) is cut:
    the first frame of the clip's last TAIL_FRACTION of rows' frames."""
    clips = np.unique(clip)
    first = np.array([frame[clip == c].min() for c in clips])
    last = np.array([frame[clip == c].max() for c in clips])
    cut = first + np.ceil((1 - TAIL_FRACTION) * (last - first + 1)).astype(np.int64)
    return cut[np.searchsorted(clips, clip)]


def split_rows(arrays, holdout: str, mirrored: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(training rows, within-clip validation rows) as boolean masks over the dataset's rows.
    The held-out-clip validation rows are always the dataset's `validation` column; the
    within-clip rows are empty for `clips`. `mirrored=False` trains on the captured rows only
    (validation keeps both, so runs compare on the same rows)."""
    if holdout not in HOLDOUTS:
        raise ValueError(f"--holdout {holdout!r}: choose one of {', '.join(HOLDOUTS)}")
    training = ~arrays["validation"]
    within = np.zeros_like(training)
    if holdout == "within-clips":
        cut = tail_cuts(arrays["clip"], arrays["frame"])
        within = training & (arrays["frame"] >= cut + GAP_FRAMES)
        training = training & (arrays["frame"] < cut - GAP_FRAMES)
    if not mirrored:
        training = training & ~arrays["mirrored"].astype(bool)
    if not training.any():
        raise ValueError(f"--holdout {holdout}: leaves no training rows in the dataset")
    return training, within

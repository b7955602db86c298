"""Picks the keyframe library (runtime/poses.py) out of the labelled mocap: for each pose, the
stillest frame among those labelled with its action, re-expressed in its root frame."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from canis.runtime.features import ACTIONS
from canis.runtime.poses import KEYFRAME_ACTIONS, Keyframe, keyframe_from_world_pose
from canis.training.bvh import read_bvh
from canis.training.clips import process_clip

# Frames this close to a label change are skipped: the pose is still blending there.
MARGIN_FRAMES = 30


def pick_keyframes(bvh_files: list[Path]) -> list[Keyframe]:
    best: dict[str, tuple[float, Keyframe]] = {}
    for path in bvh_files:
        clip = process_clip(read_bvh(path))
        labels = clip.labels
        stillness = np.linalg.norm(clip.velocities_mps, axis=-1).sum(axis=1)
        for name, action in KEYFRAME_ACTIONS.items():
            inside = labels.action_index == ACTIONS.index(action)
            # Only frames deep inside a run of the label.
            window = np.ones(2 * MARGIN_FRAMES + 1)
            deep = np.convolve(inside.astype(float), window, mode="same") >= len(window)
            if not deep.any():
                continue
            frame = int(np.flatnonzero(deep)[np.argmin(stillness[deep])])
            if name in best and best[name][0] <= stillness[frame]:
                continue
            keyframe = keyframe_from_world_pose(
                name,
                clip.skeleton,
                clip.rotations[frame],
                clip.root_rotations[frame],
                float(labels.hips_height_m[frame]),
                f"{path.stem} frame {frame}",
            )
            best[name] = (float(stillness[frame]), keyframe)
    return [best[name][1] for name in KEYFRAME_ACTIONS if name in best]

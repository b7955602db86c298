"""A dog in its axes' rest pose whose shown paws slide by given distances (the moving-skating
term's tests, test_moving_skating.py)."""

import numpy as np
import torch
from canis.runtime.features import FPS, INPUT, OUTPUT, PAW_ROWS
from canis.training.torch_runtime import shown_positions_m

X_HIPS = INPUT.field(np.arange(INPUT.size), "joints", "position")[0]
Y_HIPS = OUTPUT.field(np.arange(OUTPUT.size), "joints", "position")[0]
Y_HIPS_VELOCITY = OUTPUT.field(np.arange(OUTPUT.size), "joints", "velocity")[0]


def _steps(
    slide_cm_per_frame: np.ndarray, lowered_m: float = 0.002
) -> tuple[torch.Tensor, torch.Tensor]:
    """x, y rows of a dog in its axes' rest pose, its paws under the ground by `lowered_m` or
    more (the clip's at 0: the dogs' lowest paws below the clip's), sliding forward (+z) with
    its hips by the given distances (rows,) in one frame, the root still."""
    rows = len(slide_cm_per_frame)
    x, y = torch.zeros(rows, INPUT.size), torch.zeros(rows, OUTPUT.size)
    for layout, values in ((INPUT, x), (OUTPUT, y)):
        for field, axis in (("forward", 2), ("up", 1)):
            values[:, layout.field(np.arange(layout.size), "joints", field)[:, axis]] = 1.0
    rest = shown_positions_m(OUTPUT, y, torch.zeros(rows, 3))[:, list(PAW_ROWS), 1]
    x[:, X_HIPS[1]] = y[:, Y_HIPS[1]] = -rest.max() - lowered_m  # the highest paw down
    slide_m = torch.as_tensor(slide_cm_per_frame / 100.0, dtype=torch.float32)
    y[:, Y_HIPS[2]] = slide_m  # predicted there, and advanced there by its velocity
    y[:, Y_HIPS_VELOCITY[2]] = slide_m * FPS
    return x, y

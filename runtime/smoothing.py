"""Exponential smoothing (a damper): a value moves toward its target so that half of the gap
is left after each half-life, whatever the time step. The command smoothing, the speed
tracking, the IK's and the foot lock's blend weights and the hand-back's display offsets all
use it, each with its own half-life.
"""

from __future__ import annotations

import numpy as np
from canis.runtime.root import wrap_angle_rad


def smoothing_factor(dt_s: float, half_life_s) -> float | np.ndarray:
    """How much of the gap to the target remains after dt_s (half_life_s may be an array)."""
    return 0.5 ** (dt_s / half_life_s)


def damp(value, target, dt_s: float, half_life_s):
    """`value` moved toward `target` for dt_s (arrays broadcast; nothing is modified)."""
    return target + (value - target) * smoothing_factor(dt_s, half_life_s)


def damp_angle_rad(value_rad, target_rad, dt_s: float, half_life_s):
    """damp for angles: the gap is taken the short way round, the result wrapped."""
    gap = wrap_angle_rad(value_rad - target_rad)
    return wrap_angle_rad(target_rad + gap * smoothing_factor(dt_s, half_life_s))

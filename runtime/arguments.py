"""Checks on the per-dog arguments of the controller's public calls: a wrong shape or a
non-finite value is a one-line ValueError naming the call, the argument and the number of
dogs, rather than a numpy broadcast or reshape error (or a NaN dog) later."""

from __future__ import annotations

import numpy as np


def per_dog(values, shape: tuple, name: str, caller: str, broadcast: bool = False) -> np.ndarray:
    """`values` as a new float64 array of `shape` (shape[0] is the number of dogs), finite.
    With `broadcast`, one value of shape[1:] stands for every dog."""
    try:
        array = np.asarray(values, dtype=np.float64)
        array = np.broadcast_to(array, shape).copy() if broadcast else array.reshape(shape).copy()
    except (TypeError, ValueError):
        either = f" (or {shape[1:]} for all of them)" if broadcast else ""
        raise ValueError(
            f"{caller}: {name} must have shape {shape} for {shape[0]} dog(s){either}; "
            f"got {np.shape(values)}"
        ) from None
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{caller}: {name} is not finite: {values!r}")
    return array

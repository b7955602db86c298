"""Which dogs an argument names, and resizing the per-dog arrays when dogs come and go.

`characters` everywhere is indices or a boolean mask over the N dogs; a wrong one is a
one-line error naming the call, the argument and N rather than a numpy IndexError.
"""

from __future__ import annotations

from dataclasses import fields, is_dataclass

import numpy as np


def dog_rows(characters, count: int, caller: str, name: str = "characters") -> np.ndarray:
    """`characters` (indices, or a boolean mask of `count`) as sorted unique indices."""
    array = np.atleast_1d(np.asarray(characters))
    if array.dtype == bool:
        if array.shape != (count,):
            raise ValueError(
                f"{caller}: {name} as a mask must have shape ({count},) for {count} dog(s); "
                f"got {array.shape}"
            )
        return np.flatnonzero(array)
    if array.ndim != 1 or not (array.size == 0 or np.issubdtype(array.dtype, np.integer)):
        raise ValueError(
            f"{caller}: {name} must be dog indices or a boolean mask of {count}; got {characters!r}"
        )
    if np.any((array < 0) | (array >= count)):
        raise ValueError(
            f"{caller}: {name} {array.tolist()} names a dog that does not exist "
            f"(there are {count}, indices 0-{count - 1})"
        )
    if len(np.unique(array)) != len(array):
        raise ValueError(f"{caller}: {name} {array.tolist()} names a dog twice")
    return array.astype(np.int64)


def take_rows(owner, names: tuple[str, ...], keep: np.ndarray) -> None:
    """Keeps rows `keep` of each named per-dog array attribute of `owner`."""
    for name in names:
        value = getattr(owner, name)
        if value is not None:
            setattr(owner, name, value[keep].copy())


def append_rows(owner, names: tuple[str, ...], fresh, added: int) -> None:
    """Appends the rows of `fresh` (the same kind of object, for the `added` new dogs) to
    each named per-dog array attribute of `owner`."""
    for name in names:
        value, more = getattr(owner, name), getattr(fresh, name)
        if value is not None and more is None:  # sized lazily (the RTN's state): zeros
            more = np.zeros((added,) + value.shape[1:], value.dtype)
        if value is not None:
            setattr(owner, name, np.concatenate([value, more]))


def concat_states(a, b):
    """Two DogStates (or their parts) as one, `a`'s dogs first."""
    if a is None:
        return None
    if is_dataclass(a):
        return type(a)(
            **{f.name: concat_states(getattr(a, f.name), getattr(b, f.name)) for f in fields(a)}
        )
    return np.concatenate([a, b])


# The per-dog arrays held outside DogState, by owner (what add/remove resize and a snapshot
# carries).
IK_ROWS = ("weight",)
FOOT_LOCK_ROWS = ("locked_xz_m", "holding", "released", "weight")


def transition_rows(player) -> tuple[str, ...]:
    """The transition player's per-dog arrays: every array it holds but the skeleton's
    parents, and the RTN's recurrent state (None until its first initialisation)."""
    names = [k for k, v in vars(player).items() if isinstance(v, np.ndarray) and k != "parents"]
    return tuple(n for n in names if n not in ("h", "c")) + ("h", "c")

"""Named actions: what a game asks a dog to do, by name or by `Action`, wherever an index
into the network's action labels (features.ACTIONS) is accepted.

The network's label "stand" is the begging pose (on the hind legs), while the keyframe
"stand" is standing on four legs; the API calls the begging action "beg", as the keyframe
library does. "stand" as an action name still works for one release, with a
DeprecationWarning. "get_up" is the explicit way out of a sit, lie or beg: the network has
no label of its own for it, so it is the idle label (standing on four legs).
"""

from __future__ import annotations

import warnings
from enum import IntEnum

import numpy as np
from canis.runtime.features import ACTIONS


class Action(IntEnum):
    IDLE = 0
    MOVE = 1
    JUMP = 2
    SIT = 3
    BEG = 4
    LIE = 5


# The network's labels, in its order, by their API names (checked against features.ACTIONS).
assert len(Action) == len(ACTIONS)
ACTION_NAMES = tuple(a.name.lower() for a in Action)
ALIASES = {"get_up": Action.IDLE}
DEPRECATED_ALIASES = {"stand": Action.BEG}  # to be removed in the release after next


def action_index(value) -> int:
    """The label index of an Action, a name ("beg", "get_up", ...) or an index."""
    if isinstance(value, Action):
        return int(value)
    if isinstance(value, str):
        name = value.lower()
        if name in ACTION_NAMES:
            return ACTION_NAMES.index(name)
        if name in ALIASES:
            return int(ALIASES[name])
        if name in DEPRECATED_ALIASES:
            new = DEPRECATED_ALIASES[name].name.lower()
            warnings.warn(
                f"action {value!r} is deprecated: it is the begging pose, now called {new!r}",
                DeprecationWarning,
                stacklevel=3,
            )
            return int(DEPRECATED_ALIASES[name])
        raise ValueError(
            f"unknown action {value!r}; choose one of {', '.join(ACTION_NAMES + tuple(ALIASES))}"
        )
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        if 0 <= value < len(ACTIONS):
            return int(value)
    raise ValueError(f"action must be a name or an index below {len(ACTIONS)}, got {value!r}")


def api_name(label: str) -> str:
    """The API's name of one of the network's labels (features.ACTIONS): "stand" is "beg"."""
    return ACTION_NAMES[ACTIONS.index(label)]


def action_indices(values) -> np.ndarray:
    """An array of names, Actions or indices as label indices (same shape)."""
    if isinstance(values, np.ndarray) and values.dtype.kind in "iu":  # the per-frame case
        return values.astype(np.int64, copy=False)
    array = np.asarray(values, dtype=object if _has_names(values) else None)
    if array.dtype != object and np.issubdtype(array.dtype, np.integer):
        return array.astype(np.int64)
    flat = [action_index(v.item() if isinstance(v, np.generic) else v) for v in array.ravel()]
    return np.array(flat, dtype=np.int64).reshape(array.shape)


def _has_names(values) -> bool:
    return isinstance(values, str) or any(
        isinstance(v, str) for v in np.asarray(values, dtype=object).ravel()
    )

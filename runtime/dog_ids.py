"""Stable dog ids: a number per dog that survives every add() and remove().

A dog's row (its index in every per-dog array) changes when a dog before it is removed; its
id never does. Controller.add returns the new dogs' ids, which are never reused in a
controller's life (a removed dog's id names nobody from then on). Ids increase with the rows
(add appends, remove keeps the order), so `state.dog_id` is sorted and a lookup is one
searchsorted. `controller.ids` gives the id of each row, `controller.rows(ids)` the rows of
ids, and every per-dog call that takes `characters` (rows) also takes `ids=`.
"""

from __future__ import annotations

import numpy as np
from canis.runtime.state import dog_rows


class UnknownDogIdError(KeyError, ValueError):
    """An id that names no dog of the controller (never given, or its dog removed). A
    KeyError (a failed lookup) and a ValueError (a bad argument, as every other), whose
    message is one plain line (KeyError's own str() quotes it)."""

    def __str__(self) -> str:
        return str(self.args[0])


def checked_ids(ids, caller: str) -> np.ndarray:
    """`ids` (one id or a 1-D sequence of them) as int64, or a one-line ValueError."""
    array = np.atleast_1d(np.asarray(ids))
    if array.ndim != 1 or not (array.size == 0 or np.issubdtype(array.dtype, np.integer)):
        raise ValueError(f"{caller}: ids must be dog ids (whole numbers), got {ids!r}")
    if len(np.unique(array)) != len(array):
        raise ValueError(f"{caller}: ids {array.tolist()} names a dog twice")
    return array.astype(np.int64)


def _listed(ids: np.ndarray, most: int = 12) -> str:
    """The ids for an error message: all of them, or the first few and how many more."""
    shown = ", ".join(map(str, ids[:most].tolist()))
    return shown if len(ids) <= most else f"{shown} and {len(ids) - most} more"


def rows_of_ids(dog_id: np.ndarray, ids, caller: str) -> np.ndarray:
    """The rows (int64, in the order of `ids`) of the dogs `ids` among the sorted `dog_id`."""
    wanted = checked_ids(ids, caller)
    rows = np.searchsorted(dog_id, wanted)
    found = rows < len(dog_id)
    found[found] = dog_id[rows[found]] == wanted[found]
    if not found.all():
        unknown = wanted[~found].tolist()
        raise UnknownDogIdError(
            f"{caller}: no dog has id {', '.join(map(str, unknown))} (removed, or never given; "
            f"the ids now: {_listed(dog_id)})"
        )
    return rows.astype(np.int64)


def check_dog_ids(dog_id: np.ndarray, next_id: int, where: str) -> None:
    """Ids as a controller keeps them: increasing, >= 0 and below the next one to give."""
    if len(dog_id) and (dog_id[0] < 0 or dog_id[-1] >= next_id or np.any(np.diff(dog_id) <= 0)):
        raise ValueError(
            f"{where}: dog ids must increase, each in [0, {next_id}), got {dog_id.tolist()}"
        )


class DogIds:
    """Controller's ids (module docstring), from its `state.dog_id` and `next_dog_id`."""

    @property
    def ids(self) -> np.ndarray:
        """(N,) int64 the id of each row's dog (read-only: ids are given by add())."""
        view = self.state.dog_id.view()
        view.flags.writeable = False
        return view

    def rows(self, ids) -> np.ndarray:
        """(n,) int64 the rows of the dogs `ids` (one id or a sequence), in that order; an
        unknown id is an UnknownDogIdError (a KeyError and a ValueError) naming it."""
        return rows_of_ids(self.state.dog_id, ids, "rows")

    def _new_ids(self, count: int) -> np.ndarray:
        """`count` ids never given before in this controller."""
        ids = np.arange(self.next_dog_id, self.next_dog_id + count, dtype=np.int64)
        self.next_dog_id += count
        return ids

    def _forget_removed_dogs(self) -> None:
        """What waits for dogs by id (PostureRequests) let go for the dogs no longer here."""
        for gone in set(self.posture_waits) - set(self.state.dog_id.tolist()):
            del self.posture_waits[gone]

    def _named_rows(self, characters, ids, caller: str):
        """`characters` (rows, a mask, or None for all) as they were, or the rows of `ids`
        when ids are given instead; both is an error."""
        if ids is None:
            return characters
        if characters is not None:
            raise ValueError(f"{caller}: give characters (rows) or ids, not both")
        return rows_of_ids(self.state.dog_id, ids, caller)

    def _rows_named(self, characters, ids, caller: str) -> np.ndarray:
        """The rows `characters` or `ids` name (int64), every dog's when both are None."""
        named = self._named_rows(characters, ids, caller)
        return np.arange(self.count) if named is None else dog_rows(named, self.count, caller)

"""Checks on the array arguments of the runtime's public calls: a wrong shape or a non-finite
value is a one-line ValueError naming the call, the argument and (for per-dog arguments) the
number of dogs, rather than a numpy broadcast or reshape error (or a NaN dog) later.

`checked` is the one shape/finite check; `per_dog` is it for arrays with a row per dog.
Which dogs an index or mask argument names is runtime/state.py.
"""

from __future__ import annotations

import numpy as np

ANY = -1  # a dimension of any length in `shape`


def checked(
    values,
    shape: tuple,
    name: str,
    caller: str,
    broadcast: bool = False,
    dtype=np.float64,
    finite: bool = True,
    expected: str = "",
) -> np.ndarray:
    """`values` as a new array of `dtype` and `shape` (ANY: a dimension of any length),
    finite unless `finite` is False. With `broadcast`, anything that broadcasts to `shape`
    (one value of shape[1:] for every row, say) is accepted. `expected` follows the shape in
    the message ("for 3 dog(s)")."""
    try:
        kind = (
            values.dtype.kind if isinstance(values, np.ndarray) else np.asarray(values).dtype.kind
        )
    except ValueError:  # a ragged list: the shape check below names it
        kind = "f"
    if kind == "c":  # numpy would drop the imaginary part with a warning
        raise ValueError(f"{caller}: {name} must be real numbers, got complex ones")
    if kind not in "biuf":
        raise ValueError(f"{caller}: {name} must be numbers, got {_shape_of(values)} of {kind!r}")
    try:
        array = np.asarray(values, dtype=dtype)
        if broadcast and ANY not in shape:
            array = np.broadcast_to(array, shape)
        fits = array.ndim == len(shape) and all(
            want in (ANY, got) for want, got in zip(shape, array.shape, strict=True)
        )
    except (TypeError, ValueError):
        fits = False
    if not fits:
        either = f" (or {shape[1:]} for all of them)" if broadcast else ""
        wanted = "(" + ", ".join("any" if d == ANY else str(d) for d in shape)
        wanted += ",)" if len(shape) == 1 else ")"
        raise ValueError(
            f"{caller}: {name} must have shape {wanted}{expected}{either}; got {_shape_of(values)}"
        )
    array = array.copy()
    if finite and np.issubdtype(array.dtype, np.floating) and not np.all(np.isfinite(array)):
        raise ValueError(f"{caller}: {name} {_where_not_finite(array)}")
    return array


def per_dog(values, shape: tuple, name: str, caller: str, **options) -> np.ndarray:
    """`checked` (with its `options`: broadcast, dtype, finite) for an array with a row per
    dog: shape[0] is the number of dogs, which the message names."""
    return checked(values, shape, name, caller, expected=f" for {shape[0]} dog(s)", **options)


def finite_number(value, where: str, low: float = -np.inf, high: float = np.inf) -> float:
    """`value` as a float: a finite number within [low, high], or a one-line ValueError
    starting with `where` ("caller: name", or a file and its key)."""
    kind = np.asarray(value).dtype.kind if not isinstance(value, (bool, np.bool_)) else "b"
    ok = np.ndim(value) == 0 and kind in "iuf"  # a number, or a 0-d array of one
    number = float(value) if ok else np.nan
    if not (np.isfinite(number) and low <= number <= high):
        bounds = "" if (low, high) == (-np.inf, np.inf) else f" within [{low:g}, {high:g}]"
        raise ValueError(f"{where} must be a finite number{bounds}, got {value!r}")
    return number


def whole_number(value, low: int, message: str) -> None:
    """Refuses `value` with ValueError(message) unless it is a whole number >= `low` (a bool
    is not one)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ValueError(message)


def random_generator(seed, where: str) -> np.random.Generator:
    """A numpy Generator from `seed`: None (fresh entropy), a whole number >= 0, or a
    Generator (used as it is); else a one-line ValueError starting with `where`."""
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is not None and (
        isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)) or seed < 0
    ):
        raise ValueError(f"{where} must be None or a whole number >= 0, got {seed!r}")
    return np.random.default_rng(seed)


def _shape_of(values) -> str:
    try:
        return str(np.shape(values))
    except ValueError:  # a ragged list
        return f"a ragged {type(values).__name__}"


def _where_not_finite(array: np.ndarray) -> str:
    """Which rows (dogs) hold NaN or inf, in one line."""
    if array.ndim == 0:
        return f"is not finite: {array.item()}"
    bad = ~np.isfinite(array.reshape(len(array), -1)).all(axis=1)
    rows = np.flatnonzero(bad)
    shown = rows[:8].tolist() + (["..."] if len(rows) > 8 else [])
    return f"is not finite (NaN or inf) in row(s) {shown}"


# Past this many dogs in one controller the arrays alone take gigabytes (10**9 asked for 60
# GiB and failed in numpy's allocator); more dogs belong in more controllers.
MAX_DOGS = 100_000
# A dog placed further from the origin than this (a reset, an add, a restored save) is refused:
# the shown pose is float32, whose spacing there is already 6 cm, and at 3.4e38 m it is inf.
MAX_PLACE_M = 1e6


def within_world(root_xz_m: np.ndarray, caller: str) -> np.ndarray:
    """`root_xz_m` (finite, checked) as it is, or a ValueError naming `caller` if a dog is
    further than MAX_PLACE_M from the origin along x or z."""
    far = np.abs(root_xz_m) > MAX_PLACE_M
    if far.any():
        row = int(np.argwhere(far)[0][0])
        raise ValueError(
            f"{caller}: root_xz_m of dog {row} is {root_xz_m[row].tolist()}, further than "
            f"{MAX_PLACE_M:g} m from the origin (the shown pose is float32)"
        )
    return root_xz_m


def controller_options(count, max_dogs, tau, terrain, transition_model, native_frame):
    """Controller's arguments checked before anything is built: (tau, the terrain: a
    Heightmap, or one loaded from a built-in name or a file); a wrong one is a one-line
    ValueError or TypeError naming it (a terrain or transition model of another type failed
    only at the first step)."""
    from pathlib import Path

    from canis.runtime.terrain import Heightmap, load_terrain
    from canis.runtime.transition import TransitionModel

    whole_number(count, 1, f"Controller: count must be a whole number of dogs >= 1, got {count!r}")
    if count > MAX_DOGS:
        raise ValueError(f"Controller: count {count} is past MAX_DOGS ({MAX_DOGS})")
    if isinstance(terrain, (str, Path)):
        terrain = load_terrain(str(terrain))
    if terrain is not None and not isinstance(terrain, Heightmap):
        raise TypeError(
            "Controller: terrain must be None (flat), a Heightmap or a terrain name/file, "
            f"got {type(terrain).__name__}"
        )
    if transition_model is not None and not isinstance(transition_model, TransitionModel):
        raise TypeError(
            "Controller: transition_model must be a TransitionModel (the RTN's _step.onnx), "
            f"got {type(transition_model).__name__}"
        )
    if max_dogs is not None:
        whole_number(
            max_dogs,
            count,
            f"Controller: max_dogs must be None or a whole number >= count ({count}), "
            f"got {max_dogs!r}",
        )
    if native_frame is not True:
        raise ValueError(
            "Controller: native_frame must be True: the runtime runs the per-frame math in "
            "the native core only (its numpy definition is tests/reference_frame.py)"
        )
    return finite_number(tau, "Controller: tau", low=0.0, high=1.0), terrain

"""Save and restore: a plain, picklable snapshot of every dog (Controller.get_state /
set_state). It holds numpy arrays and numbers only: the model, its sessions, the terrain and
the profiler are not part of it, so a snapshot pickles, deep-copies, and restores into a
controller built with the same model layout and dog count. Restoring it makes the next steps
match an unbroken run bit for bit (tests/test_api.py).

A snapshot carries a SHA-256 over its contents: a corrupted one is refused, naming what is
wrong, before anything in the controller changes.
"""

from __future__ import annotations

import hashlib
from dataclasses import fields, is_dataclass

import numpy as np
from canis.runtime.dog_rows import FOOT_LOCK_ROWS, IK_ROWS, transition_rows

# 2: the speed tracking's asked-speed window and the gait readout's canter latch per dog.
# 3: the shown paws' position and speed per dog, which the contacts are told from.
FORMAT = 3
# Scalars of the controller a step reads (everything else per dog is in arrays).
SCALARS = ("frame", "_has_prediction", "offsets_active", "non_finite_events")
DISPLAY = (
    "display_positions",
    "display_rotations",
    "previous_display_positions",
    "previous_display_rotations",
    "contacts",
    "path_future_xz_m",
)


def _leaves(value, name: str):
    """(dotted name, array or None) for every array of a (nested) dataclass."""
    if is_dataclass(value):
        for f in fields(value):
            yield from _leaves(getattr(value, f.name), f"{name}.{f.name}")
    else:
        yield name, value


def _arrays(controller) -> dict[str, np.ndarray | None]:
    arrays = dict(_leaves(controller.state, "state"))
    owners = [("ik", controller.ik, IK_ROWS), ("foot_lock", controller.foot_lock, FOOT_LOCK_ROWS)]
    if controller.transitions is not None:
        t = controller.transitions
        owners.append(("transitions", t, transition_rows(t)))
    for prefix, owner, names in owners:
        for name in names:
            arrays[f"{prefix}.{name}"] = getattr(owner, name)
    for name in DISPLAY:
        arrays[name] = getattr(controller, name)
    return arrays


def layout(controller) -> dict:
    """What a snapshot must agree with: the model's kind and widths, and the dog count."""
    model = controller.model
    return {
        "kind": model.kind,
        "experts": getattr(model, "experts", None),
        "joints": controller.skeleton.joint_count,
        "transitions": controller.transitions is not None,
        "dogs": controller.count,
    }


def _digest(layout_: dict, scalars: dict, arrays: dict) -> str:
    h = hashlib.sha256(repr((sorted(layout_.items()), sorted(scalars.items()))).encode())
    for name in sorted(arrays):
        value = arrays[name]
        h.update(name.encode())
        if value is not None:
            h.update(repr((value.dtype.str, value.shape)).encode())
            h.update(np.ascontiguousarray(value).tobytes())
    return h.hexdigest()


def capture(controller) -> dict:
    arrays = {k: None if v is None else np.array(v) for k, v in _arrays(controller).items()}
    scalars = {name: _plain(getattr(controller, name)) for name in SCALARS}
    layout_ = layout(controller)
    return {
        "format": FORMAT,
        "layout": layout_,
        "scalars": scalars,
        "arrays": arrays,
        "sha256": _digest(layout_, scalars, arrays),
    }


def _plain(value):
    return value.item() if isinstance(value, np.generic) else value


def restore(controller, snapshot) -> None:
    """Checks everything first, then writes: on any error the controller is unchanged."""
    if not isinstance(snapshot, dict) or "format" not in snapshot:
        raise ValueError(f"set_state: not a canis controller snapshot (format {FORMAT})")
    if snapshot["format"] != FORMAT:
        raise ValueError(
            f"set_state: a snapshot of format {snapshot['format']!r}; this runtime reads "
            f"format {FORMAT}"
        )
    try:
        layout_, scalars, arrays = snapshot["layout"], snapshot["scalars"], snapshot["arrays"]
        digest = _digest(layout_, scalars, arrays)
    except (KeyError, TypeError, AttributeError) as error:
        raise ValueError(f"set_state: the snapshot is corrupted ({error!r})") from None
    if digest != snapshot.get("sha256"):
        raise ValueError("set_state: the snapshot is corrupted (its SHA-256 does not match)")
    here = layout(controller)
    if layout_ != here:
        differ = [
            f"{k} {layout_.get(k)!r} (here {here[k]!r})" for k in here if layout_.get(k) != here[k]
        ]
        raise ValueError(f"set_state: the snapshot is for another controller: {', '.join(differ)}")
    current = _arrays(controller)
    if set(arrays) != set(current):
        raise ValueError(
            f"set_state: the snapshot's arrays differ: {sorted(set(arrays) ^ set(current))}"
        )
    for name, value in arrays.items():
        now = current[name]
        if value is None or now is None:
            if value is not None and name not in ("transitions.h", "transitions.c"):
                raise ValueError(f"set_state: {name} is in the snapshot but not here")
            continue
        if value.shape != now.shape or value.dtype.kind != now.dtype.kind:
            raise ValueError(
                f"set_state: {name} has shape {value.shape} {value.dtype}, here {now.shape} "
                f"{now.dtype}"
            )
    _write(controller, scalars, arrays)


def _write(controller, scalars: dict, arrays: dict) -> None:
    for name, value in arrays.items():
        owner_path, _, attr = name.rpartition(".")
        owner = controller
        for part in owner_path.split(".") if owner_path else ():
            owner = getattr(owner, part)
        setattr(owner, attr, None if value is None else np.array(value))
    for name, value in scalars.items():
        setattr(controller, name, value)

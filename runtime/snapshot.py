"""Save and restore (Controller.get_state / set_state): a plain, picklable snapshot of every
dog's state (runtime/state.py's DogState and the rows its owners keep), the controller's
scalars and random generator, and what the snapshot must agree with (the model files, dog
count and settings); restored only after every field is checked, so a refused snapshot
changes nothing."""

from __future__ import annotations

import hashlib
from dataclasses import fields, is_dataclass
from pathlib import Path

import numpy as np
from canis.runtime import posture_waits
from canis.runtime.arguments import within_world
from canis.runtime.assets import file_sha256
from canis.runtime.dog_ids import check_dog_ids
from canis.runtime.kinematics import FOOT_LOCK_ROWS
from canis.runtime.state import DISPLAY_ROWS, transition_rows

# A snapshot (format 4) names the IK's, the foot lock's, the transitions' and the shown pose's
# rows by their owners, as before they were in DogState: ik.<name>, foot_lock.<name>,
# transitions.<name>, <name>.
IK_ROWS = ("weight",)
SNAPSHOT_OWNED = ("ik", "foot_lock", "transitions") + DISPLAY_ROWS


# 2: the speed tracking's asked-speed window and the gait readout's canter latch per dog.
# 3: the shown paws' position and speed per dog, which the contacts are told from.
# 4: the settings (model files, terrain, foot lock, IK, tau) and the rng.
# 5: the dogs' ids and the next id to give, where each dog looks, and the posture requests
# waiting for their dogs to stop ("postures": runtime/posture_waits.py).
FORMAT = 5
# Scalars of the controller a step reads (everything else per dog is in arrays).
SCALARS = ("frame", "_has_prediction", "offsets_active", "non_finite_events", "next_dog_id")
WHOLE_NUMBERS = ("frame", "non_finite_events", "next_dog_id")
DISPLAY = (*DISPLAY_ROWS, "path_future_xz_m")
# Arrays whose values a step relies on staying within a range (a look's weights).
BOUNDED = {"state.look_at.goal": (0.0, 1.0), "state.look_at.weight": (0.0, 1.0)}


def _leaves(value, name: str):
    """(dotted name, array or None) for every array of a (nested) dataclass."""
    if is_dataclass(value):
        for f in fields(value):
            if name != "state" or f.name not in SNAPSHOT_OWNED:  # named by their owners
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
    """What a snapshot must agree with: the model (its kind, widths and file), the dog count,
    and the settings a step depends on (terrain, foot lock, IK, tau, speed tracking, stand
    hold): a save loaded into a controller that differs in any of them would not continue as
    it did."""
    model = controller.model
    return {
        "kind": model.kind,
        "experts": getattr(model, "experts", None),
        "joints": controller.skeleton.joint_count,
        "transitions": controller.transitions is not None,
        "dogs": controller.count,
        "model": _file_identity(model),
        "transition_model": _file_identity(controller.transition_model),
        "terrain": _terrain_identity(controller.terrain),
        "foot_lock": bool(controller.foot_lock.enabled),
        "ik": bool(controller.ik.enabled),
        "tau": float(controller.tau),
        "speed_tracking": bool(controller.speed_tracking),
        "stand_hold": bool(controller.stand_hold),
    }


def _file_identity(model) -> str | None:
    """A model's file name and the start of its SHA-256, read once per model object."""
    path = getattr(model, "path", None) or getattr(model, "step_path", None)
    if path is None:
        return None
    if getattr(model, "_snapshot_identity", None) is None:
        digest = file_sha256(path)[:16]
        model._snapshot_identity = f"{Path(path).name} sha256 {digest}"
    return model._snapshot_identity


def _terrain_identity(terrain) -> str:
    if terrain is None:
        return "flat"
    h = hashlib.sha256(np.ascontiguousarray(terrain.heights_m).tobytes())
    h.update(repr((float(terrain.cell_size_m), tuple(terrain.origin_xz_m))).encode())
    return f"heightmap {terrain.heights_m.shape} sha256 {h.hexdigest()[:16]}"


def _digest(layout_: dict, scalars: dict, arrays: dict, rng=None, postures=None) -> str:
    """The SHA-256 over a snapshot's parts: the waiting posture requests' arrays (a dict,
    hashed after the dogs' as postures.<name>) included when given."""
    h = hashlib.sha256(repr((sorted(layout_.items()), sorted(scalars.items()))).encode())
    if rng is not None:  # snapshots from before it was kept have none, and keep their digest
        h.update(repr(rng).encode())
    if postures is not None:
        arrays = arrays | {f"postures.{name}": value for name, value in postures.items()}
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
    # The generator transition_to(variation=...) draws from when no seed is given: without it
    # a restored controller's next sampled transition differed from the unbroken run's.
    rng = controller.rng.bit_generator.state
    postures = posture_waits.to_arrays(controller.posture_waits, controller.skeleton.joint_count)
    return {
        "format": FORMAT,
        "layout": layout_,
        "scalars": scalars,
        "arrays": arrays,
        "rng": rng,
        "postures": postures,
        "sha256": _digest(layout_, scalars, arrays, rng, postures),
    }


def _plain(value):
    return value.item() if isinstance(value, np.generic) else value


def restore(controller, snapshot) -> None:
    """Checks everything first, then writes: on any error the controller is unchanged."""
    if not isinstance(snapshot, dict) or "format" not in snapshot:
        raise ValueError(f"set_state: not a canis controller snapshot (format {FORMAT})")
    if snapshot["format"] != FORMAT:
        older = isinstance(snapshot["format"], int) and snapshot["format"] < FORMAT
        raise ValueError(
            f"set_state: a snapshot of format {snapshot['format']!r}"
            f"{' (an older runtime saved it)' if older else ''}; this runtime reads format "
            f"{FORMAT} only"
        )
    try:
        layout_, scalars, arrays = snapshot["layout"], snapshot["scalars"], snapshot["arrays"]
        rng, postures = snapshot.get("rng"), snapshot["postures"]
        digest = _digest(layout_, scalars, arrays, rng, postures)
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
    if not isinstance(arrays, dict) or set(arrays) != set(current):
        differ = sorted(set(arrays) ^ set(current)) if isinstance(arrays, dict) else arrays
        raise ValueError(f"set_state: the snapshot's arrays differ: {differ}")
    _check_scalars(scalars)
    for name, value in arrays.items():
        now = current[name]
        if value is None or now is None:
            # Rebuilt every step, so a controller that has not had one yet holds none.
            if value is not None and name not in ("transitions.h", "transitions.c", *DISPLAY):
                raise ValueError(f"set_state: {name} is in the snapshot but not here")
            if value is not None:
                _check_values(name, value, value)
            continue
        _check_values(name, value, now)
    for name, (low, high) in BOUNDED.items():
        if np.any((arrays[name] < low) | (arrays[name] > high)):
            raise ValueError(f"set_state: {name} must be within [{low}, {high}]")
    check_dog_ids(arrays["state.dog_id"], scalars["next_dog_id"], "set_state: state.dog_id")
    joints, keyframes = controller.skeleton.joint_count, controller.keyframes
    waits = posture_waits.from_arrays(postures, arrays["state.dog_id"], keyframes, joints)
    if waits and controller.transition_model is None:
        raise ValueError("set_state: posture requests wait, and this controller has no transitions")
    generator = _checked_generator(controller, rng)
    _write(controller, scalars, arrays)
    controller.posture_waits = waits
    if generator is not None:
        controller.rng = generator


def _checked_generator(controller, state) -> np.random.Generator | None:
    """A generator in the snapshot's state (None: the snapshot kept none), or a one-line
    error for a state the controller's kind of generator does not take."""
    if state is None:
        return None
    kind = type(controller.rng.bit_generator)
    generator = np.random.Generator(kind())
    try:
        generator.bit_generator.state = state
    except (TypeError, ValueError, KeyError) as error:
        raise ValueError(
            f"set_state: the snapshot's rng is not a {kind.__name__} state ({error})"
        ) from None
    return generator


def _check_scalars(scalars) -> None:
    """The controller's scalars, each of its own type: a snapshot's digest is only a checksum
    (anyone can recompute it), so nothing it carries is trusted (`count=5` or `model=None` were
    set as attributes)."""
    if not isinstance(scalars, dict) or set(scalars) != set(SCALARS):
        raise ValueError(f"set_state: the snapshot's scalars must be exactly {', '.join(SCALARS)}")
    for name, value in scalars.items():
        if name in WHOLE_NUMBERS:
            ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
        else:
            ok = isinstance(value, bool)
        if not ok:
            wanted = "a whole number >= 0" if name in WHOLE_NUMBERS else "a bool"
            raise ValueError(f"set_state: scalar {name} must be {wanted}, got {value!r}")


def _check_values(name: str, value, like: np.ndarray) -> None:
    """A snapshot array as the controller's own: an ndarray of the same dtype and shape, and
    finite (the path's NaN rows, 'no path', aside)."""
    if not isinstance(value, np.ndarray) or value.dtype != like.dtype or value.shape != like.shape:
        got = f"{value.shape} {value.dtype}" if isinstance(value, np.ndarray) else type(value)
        raise ValueError(f"set_state: {name} must be {like.shape} {like.dtype}, got {got}")
    if value.dtype.kind == "f":
        bad = np.isinf(value) if name == "path_future_xz_m" else ~np.isfinite(value)
        if bad.any():
            raise ValueError(f"set_state: {name} holds non-finite values")
    if name == "state.root_xz_m":
        within_world(value, "set_state")


def _write(controller, scalars: dict, arrays: dict) -> None:
    for name, value in arrays.items():
        owner_path, _, attr = name.rpartition(".")
        owner = controller
        for part in owner_path.split(".") if owner_path else ():
            owner = getattr(owner, part)
        setattr(owner, attr, None if value is None else np.array(value))
    for name, value in scalars.items():
        setattr(controller, name, value)

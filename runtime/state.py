"""The dogs' state: one object of numpy arrays with a leading axis N, one row per dog.

Everything a step carries to the next lives here, the IK's blend weight, the foot locks, the
pose shown and every dog's transition included (the IK, the foot lock and the transition
player work on their rows here, bound by Controller._set_state_object). Other parts (the NaN
rollback, the hand-back, resets) never write the controller's fields one by one: they take
rows (`rows(idx)`, a copy), change that copy, and put it back (`put_rows(idx, rows)`), so adding a
field to the state is adding it here, and a row that does not fit is an error, not a skip.
The transition player's every frame of playback is the exception: it writes the fields a
transition frame sets in place, as pose.advance_root does (copying every row cost a fifth
of its time).

Which dogs an argument names, and resizing the per-dog arrays when dogs come and go.

`characters` everywhere is indices or a boolean mask over the N dogs; a wrong one is a
one-line error naming the call, the argument and N rather than a numpy IndexError.

The state a dog starts from (Controller.__init__, reset and add), and the checks on where
it is asked to start.

Save and restore: a plain, picklable snapshot of every dog (Controller.get_state /
set_state). It holds numpy arrays and numbers only: the model, its sessions, the terrain and
the profiler are not part of it, so a snapshot pickles, deep-copies, and restores into a
controller built with the same model layout and dog count. Restoring it makes the next steps
match an unbroken run bit for bit (tests/test_api.py).

A snapshot carries a SHA-256 over its contents: a corrupted one is refused, naming what is
wrong, before anything in the controller changes.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass, fields, is_dataclass
from pathlib import Path

import numpy as np
from canis.runtime.arguments import per_dog
from canis.runtime.control import SPEED_TRACKING_WINDOW_FRAMES
from canis.runtime.features import (
    ACTION_ONE_HOT,
    ACTIONS,
    FUTURE_OFFSETS_FRAMES,
    LocalPose,
)
from canis.runtime.kinematics import FOOT_LOCK_ROWS, FootLockRows, IkRows
from canis.runtime.poses import Keyframe, keyframe_pose
from canis.runtime.readouts import GAIT_WINDOW_FRAMES, PAW_ORDER
from canis.runtime.root import from_root_xz, yaw_direction_xz
from canis.runtime.skeleton import Skeleton
from canis.runtime.trajectory import HISTORY_FRAMES, PAST_SAMPLES, PAST_SLICE, GroundTrajectory  # noqa: F401
from canis.runtime.transition import TransitionRows
from canis.runtime.transition_frames import CONTEXT_FRAMES, frame_vector

# DogState's fields of the pose shown, which the controller reads and writes by these names.
DISPLAY_ROWS = (
    "display_positions",
    "display_rotations",
    "previous_display_positions",
    "previous_display_rotations",
    "contacts",
)


@dataclass
class DisplayOffset:
    """What the display adds to the root-frame pose after a hand-back (decaying to zero):
    (N, J, 3) each; only the hips' position is used."""

    positions_m: np.ndarray
    forwards: np.ndarray
    ups: np.ndarray


@dataclass
class DogState:
    root_xz_m: np.ndarray  # (N, 2) world, on the ground plane
    root_yaw_rad: np.ndarray  # (N,)
    root_velocity_xz_mps: np.ndarray  # (N, 2) world
    pose: LocalPose  # (N, J, 3) each, in the root frame: what the network reads next
    action_weights: np.ndarray  # (N, A) the actions the dog is doing
    commanded_velocity_mps: np.ndarray  # (N, 2) the smoothed command, world
    commanded_yaw_rad: np.ndarray  # (N,)
    commanded_actions: np.ndarray  # (N, A)
    speed_gain: np.ndarray  # (N,) speed tracking's correction of the asked speed
    measured_speed_mps: np.ndarray  # (N,) speed tracking's measured speed (a window's mean)
    # (N, SPEED_TRACKING_WINDOW_FRAMES) the speed asked over the same window, newest last
    asked_speed_history_mps: np.ndarray
    phase_rad: np.ndarray  # (N,) PFNN's phase (unused by the other models)
    history: GroundTrajectory  # (N, HISTORY_FRAMES, ...) the path walked, world
    predicted_future: GroundTrajectory  # (N, 6, ...) the network's last future, world
    frame_history: np.ndarray  # (N, CONTEXT_FRAMES, FRAME_SIZE) float32, as the RTN reads
    display_offset: DisplayOffset  # hand-back offsets of the shown pose
    handback_pending: np.ndarray  # (N,) bool: handed back this frame, offsets to start
    expert_weights: np.ndarray | None  # (N, E) MANN's gating output; None for other models
    contact_history: np.ndarray  # (N, GAIT_WINDOW_FRAMES, 4) bool paw contacts, newest last
    # The shown paws (the network's flat-ground pose, before the IK) on the ground plane at
    # the last frame shown, and their speed there: what the contacts are told from
    # (tests/reference_frame.py paw_speeds_mps). Paws in PAW_ORDER.
    paw_xz_m: np.ndarray  # (N, 4, 2) world
    paw_speed_mps: np.ndarray  # (N, 4)
    canter_speed: np.ndarray  # (N,) bool: fast enough to canter (readouts.canter_latch)
    ik: IkRows  # the terrain IK's blend weight (runtime/kinematics.py FullBodyIk.rows)
    foot_lock: FootLockRows  # the foot locks (runtime/kinematics.py FootLock.rows)
    # The pose shown (runtime/pose.py show): world joints (N, J, 3) and (N, J, 4), the last
    # step's (display_pose(alpha) interpolates from them), and the paw contacts (N, 4) bool.
    display_positions: np.ndarray
    display_rotations: np.ndarray
    previous_display_positions: np.ndarray
    previous_display_rotations: np.ndarray
    contacts: np.ndarray
    # Every dog's transition (runtime/transition_player.py; None without a transition model).
    transitions: TransitionRows | None = None

    def rows(self, idx) -> DogState:
        """A copy of the rows `idx` (indices or a boolean mask) of every array."""
        return _map(lambda a: np.array(a[idx]), self)

    def put_rows(self, idx, other: DogState) -> None:
        """Writes `other` (as rows() gave it) into the rows `idx`, in place."""
        count = len(np.arange(len(self.root_yaw_rad))[idx])  # how many rows idx names
        _put(self, idx, count, other, "state")

    def copy(self) -> DogState:
        return _map(np.copy, self)


@functools.cache
def _field_names(cls: type) -> tuple[str, ...] | None:
    """The dataclass fields of `cls`, None for an array (looked up once per type: a
    transition's every frame takes and puts rows, and dataclasses.fields costs more than the
    copies)."""
    return tuple(f.name for f in fields(cls)) if is_dataclass(cls) else None


def _map(fn, value):
    if value is None:
        return None
    names = _field_names(type(value))
    if names is not None:
        return type(value)(**{name: _map(fn, getattr(value, name)) for name in names})
    return fn(value)


def _put(target, idx, count: int, source, name: str) -> None:
    names = _field_names(type(target))
    if names is not None:
        for field in names:
            _put(getattr(target, field), idx, count, getattr(source, field), f"{name}.{field}")
        return
    if target is None or source is None:
        if target is not None or source is not None:
            raise ValueError(f"{name}: one of the states has it and the other does not")
        return
    rows = (count, *target.shape[1:])
    if rows != np.shape(source):
        raise ValueError(f"{name}: rows of shape {np.shape(source)} do not fit {rows}")
    target[idx] = source


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


def concat_states(a, b, added: int | None = None):
    """Two DogStates (or their parts) as one, `a`'s dogs first. An array sized lazily (the
    RTN's h and c, None until its first initialisation) that `b`'s `added` dogs lack yet is
    zeros for them."""
    if added is None and hasattr(b, "root_yaw_rad"):
        added = len(b.root_yaw_rad)
    if a is None:
        return None
    if is_dataclass(a):
        parts = {
            f.name: concat_states(getattr(a, f.name), getattr(b, f.name), added) for f in fields(a)
        }
        return type(a)(**parts)
    if b is None:
        b = np.zeros((added, *a.shape[1:]), a.dtype)
    return np.concatenate([a, b])


# A snapshot (format 4) names the IK's, the foot lock's, the transitions' and the shown pose's
# rows by their owners, as before they were in DogState: ik.<name>, foot_lock.<name>,
# transitions.<name>, <name>.
IK_ROWS = ("weight",)
SNAPSHOT_OWNED = ("ik", "foot_lock", "transitions") + DISPLAY_ROWS


def transition_rows(player) -> tuple[str, ...]:
    """The transition player's per-dog arrays (TransitionRows), the RTN's recurrent state
    (None until its first initialisation) last."""
    return tuple(f.name for f in fields(TransitionRows))


def still_state(
    skeleton: Skeleton,
    keyframes: dict[str, Keyframe],
    experts: int | None,
    n: int,
    root_xz_m,
    yaw_rad,
    start_pose: str,
    caller: str,
) -> DogState:
    """The state of `n` dogs standing still at `root_xz_m` (n, 2) facing `yaw_rad` (n,) in the
    keyframe `start_pose`; `experts` sizes the gating readout (None for a network without one).
    A bad argument is a ValueError naming it and `caller`."""
    root_xz_m = (
        np.zeros((n, 2)) if root_xz_m is None else per_dog(root_xz_m, (n, 2), "root_xz_m", caller)
    )
    yaw = np.zeros(n) if yaw_rad is None else per_dog(yaw_rad, (n,), "yaw_rad", caller)
    if start_pose not in keyframes:
        raise ValueError(
            f"{caller}: no start pose {start_pose!r}; the library has {', '.join(keyframes)}"
        )
    still = keyframe_pose(skeleton, keyframes[start_pose])  # in its root frame
    tile = lambda a: np.repeat(a, n, axis=0)  # noqa: E731
    pose = LocalPose(*(tile(a) for a in vars(still).values()))
    idle = np.repeat(ACTION_ONE_HOT[ACTIONS.index("idle")][None], n, axis=0)
    facing = yaw_direction_xz(yaw)

    def standing(frames: int) -> GroundTrajectory:
        """`frames` samples of a dog standing where it is."""
        return GroundTrajectory(
            positions_xz_m=np.repeat(root_xz_m[:, None], frames, axis=1),
            directions_xz=np.repeat(facing[:, None], frames, axis=1),
            velocities_xz_mps=np.zeros((n, frames, 2)),
            speeds_mps=np.zeros((n, frames)),
            actions=np.repeat(idle[:, None], frames, axis=1),
        )

    joints = lambda: np.zeros((n, skeleton.joint_count, 3))  # noqa: E731
    context = frame_vector(np.zeros((n, 2)), np.zeros(n), pose)
    return DogState(
        root_xz_m=root_xz_m,
        root_yaw_rad=yaw,
        root_velocity_xz_mps=np.zeros((n, 2)),
        pose=pose,
        action_weights=idle,
        commanded_velocity_mps=np.zeros((n, 2)),
        commanded_yaw_rad=yaw.copy(),
        commanded_actions=idle.copy(),
        speed_gain=np.ones(n),
        measured_speed_mps=np.zeros(n),
        asked_speed_history_mps=np.zeros((n, SPEED_TRACKING_WINDOW_FRAMES)),
        phase_rad=np.zeros(n),
        history=standing(HISTORY_FRAMES),
        # A standing dog's future, though the first step uses the desired one alone (the
        # controller's _has_prediction): the network has predicted nothing yet.
        predicted_future=standing(len(FUTURE_OFFSETS_FRAMES)),
        # The last CONTEXT_FRAMES frames as the transition network reads them.
        frame_history=np.repeat(context[:, None], CONTEXT_FRAMES, axis=1),
        display_offset=DisplayOffset(joints(), joints(), joints()),
        handback_pending=np.zeros(n, dtype=bool),
        expert_weights=np.zeros((n, experts), np.float32)
        if experts
        else None,  # as the network gives
        contact_history=np.ones((n, GAIT_WINDOW_FRAMES, len(PAW_ORDER)), dtype=bool),
        paw_xz_m=from_root_xz(pose.positions_m[:, skeleton.group("paws"), ::2], root_xz_m, yaw),
        paw_speed_mps=np.zeros((n, len(PAW_ORDER))),
        canter_speed=np.zeros(n, dtype=bool),
        ik=IkRows(np.ones(n)),
        foot_lock=FootLockRows.zeros(n, len(PAW_ORDER)),
        # Drawn by the controller before anything reads them.
        display_positions=np.zeros((n, skeleton.joint_count, 3), np.float32),
        display_rotations=np.zeros((n, skeleton.joint_count, 4), np.float32),
        previous_display_positions=np.zeros((n, skeleton.joint_count, 3), np.float32),
        previous_display_rotations=np.zeros((n, skeleton.joint_count, 4), np.float32),
        contacts=np.zeros((n, len(PAW_ORDER)), dtype=bool),
    )


# 2: the speed tracking's asked-speed window and the gait readout's canter latch per dog.
# 3: the shown paws' position and speed per dog, which the contacts are told from.
FORMAT = 4  # 4: the settings (model files, terrain, foot lock, IK, tau) and the rng
# Scalars of the controller a step reads (everything else per dog is in arrays).
SCALARS = ("frame", "_has_prediction", "offsets_active", "non_finite_events")
DISPLAY = (*DISPLAY_ROWS, "path_future_xz_m")


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
    and the settings a step depends on (terrain, foot lock, IK, tau, speed tracking): a save
    loaded into a controller that differs in any of them would not continue as it did."""
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
    }


def _file_identity(model) -> str | None:
    """A model's file name and the start of its SHA-256, read once per model object."""
    path = getattr(model, "path", None) or getattr(model, "step_path", None)
    if path is None:
        return None
    if getattr(model, "_snapshot_identity", None) is None:
        digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]
        model._snapshot_identity = f"{Path(path).name} sha256 {digest}"
    return model._snapshot_identity


def _terrain_identity(terrain) -> str:
    if terrain is None:
        return "flat"
    h = hashlib.sha256(np.ascontiguousarray(terrain.heights_m).tobytes())
    h.update(repr((float(terrain.cell_size_m), tuple(terrain.origin_xz_m))).encode())
    return f"heightmap {terrain.heights_m.shape} sha256 {h.hexdigest()[:16]}"


def _digest(layout_: dict, scalars: dict, arrays: dict, rng: dict | None = None) -> str:
    h = hashlib.sha256(repr((sorted(layout_.items()), sorted(scalars.items()))).encode())
    if rng is not None:  # snapshots from before it was kept have none, and keep their digest
        h.update(repr(rng).encode())
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
    return {
        "format": FORMAT,
        "layout": layout_,
        "scalars": scalars,
        "arrays": arrays,
        "rng": rng,
        "sha256": _digest(layout_, scalars, arrays, rng),
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
        rng = snapshot.get("rng")
        digest = _digest(layout_, scalars, arrays, rng)
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
    generator = _checked_generator(controller, rng)
    _write(controller, scalars, arrays)
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
        if name in ("frame", "non_finite_events"):
            ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
        else:
            ok = isinstance(value, bool)
        if not ok:
            wanted = "a whole number >= 0" if name in ("frame", "non_finite_events") else "a bool"
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


def _write(controller, scalars: dict, arrays: dict) -> None:
    for name, value in arrays.items():
        owner_path, _, attr = name.rpartition(".")
        owner = controller
        for part in owner_path.split(".") if owner_path else ():
            owner = getattr(owner, part)
        setattr(owner, attr, None if value is None else np.array(value))
    for name, value in scalars.items():
        setattr(controller, name, value)

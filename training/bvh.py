"""Reading and writing BVH motion capture (the dog data: CRLF, ZXY channels, centimetres).

read_bvh returns the file's own units (centimetres for the dog) with the unit in the field
names; `BvhMotion.skeleton()` converts to the runtime's metres. Any problem raises BvhError
naming the file, the line and what is wrong.

Conventions: joints (end sites included, named "<parent>Site") are in the file's depth-first
order, so parents precede children. The root's OFFSET is ignored when it has position
channels: in the dog data it is a capture-start artefact while the channels are absolute.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from canis.runtime.rotations import quat_from_euler, quat_identity, quat_slerp, quat_to_euler
from canis.runtime.skeleton import METRES_PER_CENTIMETRE, Skeleton

POSITION_CHANNELS = ("Xposition", "Yposition", "Zposition")
ROTATION_CHANNELS = ("Xrotation", "Yrotation", "Zrotation")


class BvhError(ValueError):
    """A malformed BVH file. str() reads 'path:line: problem'."""

    def __init__(self, path, line: int | None, problem: str):
        self.path, self.line, self.problem = str(path), line, problem
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {problem}")


@dataclass(frozen=True)
class BvhMotion:
    path: str
    joint_names: tuple[str, ...]
    parents: np.ndarray  # (J,) int32
    offsets_cm: np.ndarray  # (J, 3) float64, file units
    rotation_orders: tuple[str, ...]  # per joint, e.g. "ZXY"; "" for end sites
    frame_time_s: float
    root_positions_cm: np.ndarray  # (F, 3) float64
    local_rotations: np.ndarray  # (F, J, 4) float64 quaternions (w, x, y, z)

    @property
    def frame_count(self) -> int:
        return len(self.root_positions_cm)

    @property
    def fps(self) -> float:
        return 1.0 / self.frame_time_s

    @property
    def duration_s(self) -> float:
        return self.frame_count * self.frame_time_s

    def skeleton(self) -> Skeleton:
        return Skeleton(self.joint_names, self.parents, self.offsets_cm * METRES_PER_CENTIMETRE)

    def root_positions_m(self) -> np.ndarray:
        return self.root_positions_cm * METRES_PER_CENTIMETRE

    def with_motion(self, root_positions_cm: np.ndarray, local_rotations: np.ndarray) -> BvhMotion:
        return replace(self, root_positions_cm=root_positions_cm, local_rotations=local_rotations)


def same_rate(frame_time_s: float, fps: float) -> bool:
    """Within 0.1%: the dog data's 'Frame Time: 0.0166667' is 60 fps."""
    return abs(frame_time_s * fps - 1.0) < 1e-3


def resample(motion: BvhMotion, fps: float) -> BvhMotion:
    """The motion at another frame rate, over the same span of time: root positions
    interpolated linearly and joint rotations by slerp between the two captured frames around
    each new frame's time."""
    if same_rate(motion.frame_time_s, fps):
        return motion
    times_s = np.arange(motion.frame_count) * motion.frame_time_s
    new_times_s = np.arange(0.0, times_s[-1] + 0.5 / fps, 1.0 / fps)
    new_times_s = new_times_s[new_times_s <= times_s[-1] + 1e-9]
    position = new_times_s / motion.frame_time_s
    before = np.minimum(np.floor(position).astype(int), motion.frame_count - 1)
    after = np.minimum(before + 1, motion.frame_count - 1)
    t = np.clip(position - before, 0.0, 1.0)
    roots = motion.root_positions_cm
    roots = roots[before] + (roots[after] - roots[before]) * t[:, None]
    rotations = quat_slerp(
        motion.local_rotations[before], motion.local_rotations[after], t[:, None]
    )
    return replace(
        motion, frame_time_s=1.0 / fps, root_positions_cm=roots, local_rotations=rotations
    )


@dataclass
class _Joint:
    name: str
    parent: int
    offset: tuple[float, float, float] = (0.0, 0.0, 0.0)
    channels: tuple[str, ...] = ()


class _Tokens:
    """The HIERARCHY section as (token, line number) pairs, consumed front to back."""

    def __init__(self, path, lines: list[str]):
        self.path = path
        self.items = [(token, n + 1) for n, line in enumerate(lines) for token in line.split()]
        self.position = 0

    def line(self) -> int:
        if self.position < len(self.items):
            return self.items[self.position][1]
        return self.items[-1][1] if self.items else 1

    def peek(self) -> str | None:
        return self.items[self.position][0] if self.position < len(self.items) else None

    def next(self, what: str) -> str:
        if self.position >= len(self.items):
            raise BvhError(self.path, self.line(), f"file ends where {what} was expected")
        token = self.items[self.position][0]
        self.position += 1
        return token

    def expect(self, word: str) -> None:
        line, token = self.line(), self.next(repr(word))
        if token != word:
            raise BvhError(self.path, line, f"expected {word!r}, found {token!r}")

    def number(self, what: str) -> float:
        line, token = self.line(), self.next(what)
        try:
            value = float(token)
        except ValueError:
            raise BvhError(self.path, line, f"{what} is not a number: {token!r}") from None
        if not np.isfinite(value):
            raise BvhError(self.path, line, f"{what} is not finite: {token!r}")
        return value


def _parse_joint(tokens: _Tokens, joints: list[_Joint], name: str, parent: int) -> None:
    index = len(joints)
    joint = _Joint(name, parent)
    joints.append(joint)
    tokens.expect("{")
    tokens.expect("OFFSET")
    joint.offset = tuple(tokens.number(f"OFFSET {axis} of {name}") for axis in "xyz")
    if tokens.peek() == "CHANNELS":
        tokens.next("CHANNELS")
        line = tokens.line()
        count = int(tokens.number(f"channel count of {name}"))
        channels = []
        for _ in range(count):
            channel_line, channel = tokens.line(), tokens.next(f"a channel name of {name}")
            if channel not in POSITION_CHANNELS + ROTATION_CHANNELS:
                raise BvhError(
                    tokens.path, channel_line, f"unknown channel name {channel!r} on joint {name}"
                )
            channels.append(channel)
        positions = [c for c in channels if c in POSITION_CHANNELS]
        if positions and parent >= 0:
            raise BvhError(
                tokens.path, line, f"position channels on non-root joint {name} are not supported"
            )
        if positions and channels[:3] != list(POSITION_CHANNELS):
            raise BvhError(
                tokens.path, line, f"root {name} must list Xposition Yposition Zposition first"
            )
        joint.channels = tuple(channels)
    while True:
        line, token = tokens.line(), tokens.next(f"JOINT, End Site or '}}' in {name}")
        if token == "}":
            return
        if token == "JOINT":
            _parse_joint(tokens, joints, tokens.next("a joint name"), index)
        elif token == "End":
            tokens.expect("Site")
            site = _Joint(f"{name}Site", index)
            joints.append(site)
            tokens.expect("{")
            tokens.expect("OFFSET")
            site.offset = tuple(
                tokens.number(f"OFFSET {axis} of {name}'s end site") for axis in "xyz"
            )
            tokens.expect("}")
        else:
            raise BvhError(tokens.path, line, f"unexpected {token!r} inside joint {name}")


def _header_value(path, lines: list[str], index: int, label: str) -> str:
    if index >= len(lines):
        raise BvhError(path, index + 1, f"file ends where '{label}' was expected (truncated)")
    text = lines[index].strip()
    if not text.startswith(label):
        raise BvhError(path, index + 1, f"expected '{label}', found {text[:40]!r}")
    return text[len(label) :].strip()


def read_bvh(path: str | Path) -> BvhMotion:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8", errors="strict")  # joint names may be UTF-8
    except UnicodeDecodeError as error:
        raise BvhError(path, None, f"not a UTF-8 text BVH file ({error.reason})") from None
    lines = text.splitlines()  # handles CRLF and LF alike

    motion_at = next((n for n, line in enumerate(lines) if line.strip() == "MOTION"), None)
    if motion_at is None:
        raise BvhError(path, len(lines) or 1, "no MOTION section (file truncated?)")
    tokens = _Tokens(path, lines[:motion_at])
    tokens.expect("HIERARCHY")
    tokens.expect("ROOT")
    joints: list[_Joint] = []
    _parse_joint(tokens, joints, tokens.next("the root's name"), -1)
    if tokens.peek() is not None:
        raise BvhError(path, tokens.line(), f"unexpected {tokens.peek()!r} after the hierarchy")

    frames_text = _header_value(path, lines, motion_at + 1, "Frames:")
    time_text = _header_value(path, lines, motion_at + 2, "Frame Time:")
    try:
        frame_count, frame_time_s = int(frames_text), float(time_text)
    except ValueError:
        raise BvhError(path, motion_at + 2, "Frames / Frame Time are not numbers") from None
    if frame_count < 1 or not (np.isfinite(frame_time_s) and frame_time_s > 0):
        raise BvhError(path, motion_at + 2, f"bad frame count {frame_count} or time {time_text}")

    values = _read_frames(path, lines, motion_at + 3, frame_count, joints)
    _check_ranges(path, motion_at + 3, joints, values)
    return _to_motion(path, joints, frame_time_s, values)


# Channel values past these are corruption, not motion: an angle of 1e30 degrees has no
# meaningful sine in float64 (a lie pose came out 0.43 m under the ground), and a position
# of 1e300 cm overflows every later sum.
MAX_ANGLE_DEG = 1e5
MAX_POSITION_CM = 1e7


def _check_ranges(path, first: int, joints: list[_Joint], values: np.ndarray) -> None:
    names = [(j.name, c) for j in joints for c in j.channels]
    limits = np.array(
        [MAX_POSITION_CM if c in POSITION_CHANNELS else MAX_ANGLE_DEG for _, c in names]
    )
    outside = np.abs(values) > limits
    if outside.any():
        frame, column = (int(i) for i in np.argwhere(outside)[0])
        joint, channel = names[column]
        unit = "cm" if channel in POSITION_CHANNELS else "degrees"
        raise BvhError(
            path,
            first + frame + 1,
            f"frame {frame}: {joint} {channel} is {values[frame, column]:g} {unit}, past "
            f"{limits[column]:g} (corrupt?)",
        )


def _read_frames(path, lines, first, frame_count, joints) -> np.ndarray:
    channel_count = sum(len(j.channels) for j in joints)
    data_lines = lines[first:]
    while data_lines and not data_lines[-1].strip():
        data_lines.pop()
    for n, line in enumerate(data_lines[:frame_count]):
        found = len(line.split())
        if found != channel_count:
            hint = " (file truncated?)" if n == len(data_lines) - 1 else ""
            raise BvhError(
                path,
                first + n + 1,
                f"frame {n} has {found} channel values, expected {channel_count}{hint}",
            )
    if len(data_lines) < frame_count:
        raise BvhError(
            path,
            first + len(data_lines),
            f"MOTION declares {frame_count} frames but the file ends after "
            f"{len(data_lines)} (truncated)",
        )
    if len(data_lines) > frame_count:
        raise BvhError(
            path,
            first + frame_count + 1,
            f"MOTION declares {frame_count} frames but more lines follow",
        )
    try:
        values = np.array(" ".join(data_lines).split(), dtype=np.float64)
    except ValueError:
        for n, line in enumerate(data_lines):
            for token in line.split():
                try:
                    float(token)
                except ValueError:
                    raise BvhError(
                        path, first + n + 1, f"channel value is not a number: {token!r}"
                    ) from None
        raise
    values = values.reshape(frame_count, channel_count)
    if not np.all(np.isfinite(values)):
        bad = int(np.argwhere(~np.isfinite(values))[0, 0])
        raise BvhError(path, first + bad + 1, f"frame {bad} has a non-finite channel value")
    return values


def _to_motion(path, joints: list[_Joint], frame_time_s: float, values: np.ndarray) -> BvhMotion:
    frame_count = len(values)
    rotations = quat_identity((frame_count, len(joints)))
    root_positions = np.tile(np.array(joints[0].offset), (frame_count, 1))
    orders = []
    column = 0
    for j, joint in enumerate(joints):
        names = joint.channels
        block = values[:, column : column + len(names)]
        column += len(names)
        if names[:3] == POSITION_CHANNELS:
            root_positions = block[:, :3].copy()
        rotation_columns = [i for i, c in enumerate(names) if c in ROTATION_CHANNELS]
        order = "".join(names[i][0] for i in rotation_columns)
        orders.append(order)
        if order:
            rotations[:, j] = quat_from_euler(np.radians(block[:, rotation_columns]), order)
    return BvhMotion(
        path=str(path),
        joint_names=tuple(j.name for j in joints),
        parents=np.array([j.parent for j in joints], dtype=np.int32),
        offsets_cm=np.array([j.offset for j in joints], dtype=np.float64),
        rotation_orders=tuple(orders),
        frame_time_s=frame_time_s,
        root_positions_cm=root_positions,
        local_rotations=rotations,
    )


def write_bvh(path: str | Path, motion: BvhMotion) -> None:
    """Writes a motion as BVH with CRLF line endings, the root's 6 channels and 3 rotation
    channels per joint in each joint's order (end sites have none)."""
    children: dict[int, list[int]] = {j: [] for j in range(len(motion.joint_names))}
    for j, parent in enumerate(motion.parents[1:], start=1):
        children[int(parent)].append(j)
    out = ["HIERARCHY"]

    def write_joint(j: int, depth: int) -> None:
        pad = "  " * depth
        offset = " ".join(f"{v:.6g}" for v in motion.offsets_cm[j])
        if not children[j] and j != 0:
            out.extend([f"{pad}End Site", f"{pad}{{", f"{pad}  OFFSET {offset}", f"{pad}}}"])
            return
        keyword = "ROOT" if j == 0 else "JOINT"
        out.extend(
            [f"{pad}{keyword} {motion.joint_names[j]}", f"{pad}{{", f"{pad}  OFFSET {offset}"]
        )
        channels = [f"{axis}rotation" for axis in motion.rotation_orders[j]]
        if j != 0 and not channels:
            raise ValueError(f"joint {motion.joint_names[j]} has children but no rotation")
        if j == 0:
            channels = list(POSITION_CHANNELS) + channels
        out.append(f"{pad}  CHANNELS {len(channels)} {' '.join(channels)}")
        for child in children[j]:
            write_joint(child, depth + 1)
        out.append(f"{pad}}}")

    write_joint(0, 0)
    columns = [motion.root_positions_cm]
    for j, order in enumerate(motion.rotation_orders):
        if children[j] or j == 0:
            columns.append(np.degrees(quat_to_euler(motion.local_rotations[:, j], order)))
    table = np.concatenate(columns, axis=1)
    out += ["MOTION", f"Frames:\t{motion.frame_count}", f"Frame Time:\t{motion.frame_time_s:.7g}"]
    out += [" ".join(f"{v:.6f}" for v in row) for row in table]
    Path(path).write_text("\r\n".join(out) + "\r\n", newline="")

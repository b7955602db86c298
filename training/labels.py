"""Automatic labels for the dog mocap, which has none: ground height, paw contacts, the six
actions (as soft weights), gaits and the PFNN phase.

Every threshold below was read off the 43 clips (heights above the estimated ground, speeds)
and is explained where it is set; docs/LABELS.md says how the labels were checked.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from canis.runtime.features import ACTIONS, FPS
from canis.runtime.readouts import classify_gaits
from canis.runtime.root import yaw_from_direction
from canis.runtime.skeleton import Skeleton
from numpy.lib.stride_tricks import sliding_window_view

# Paw order as in DOG_GROUPS["paws"]: left front, right front, left hind, right hind.
PAW_NAMES = ("left_front", "right_front", "left_hind", "right_hind")

# A paw counts as possibly planted below this speed when estimating the ground (m/s).
GROUND_PAW_SPEED_MPS = 0.25
# The ground is the lowest possibly-planted paw within this many frames either side.
GROUND_WINDOW_FRAMES = 10
# Contact hysteresis: planted paws sit 0-4 cm above the ground estimate at < 0.2 m/s; swinging
# paws leave fast. Enter contact when low and slow, leave when high or fast.
CONTACT_ON_HEIGHT_M, CONTACT_ON_SPEED_MPS = 0.04, 0.25
CONTACT_OFF_HEIGHT_M, CONTACT_OFF_SPEED_MPS = 0.06, 0.5
# Posture: lying and sitting both bring the hips under 30 cm; sitting keeps the neck base
# high (~38 cm), lying brings it down (< 20 cm). Rearing/begging pitches the body over 55°
# (sitting is 45-50°).
LOW_HIPS_M = 0.30
HIGH_NECK_M = 0.28
SIT_MIN_PITCH_DEG = 20.0
STAND_MIN_PITCH_DEG = 55.0
# Moving: the root's speed over a quarter second, or turning on the spot.
MOVE_MIN_SPEED_MPS = 0.3
MOVE_MIN_YAW_RATE_DEGPS = 60.0
# Jumps: a flight (no paw in contact) of at least 10 frames in which the hips rise 60 cm
# over the take-off ground (gallop flights peak at 53 cm), or which lands on ground 15 cm
# higher or lower (jumping onto or off the platform and the steps).
JUMP_MIN_FLIGHT_FRAMES = 10
JUMP_MIN_HIPS_PEAK_M = 0.60
JUMP_MIN_GROUND_CHANGE_M = 0.15
JUMP_MARGIN_FRAMES = 18  # the crouch before take-off and the landing after
# Hard labels shorter than this are outvoted by their surroundings (frames).
ACTION_MAJORITY_WINDOW_FRAMES = 15
# Soft action weights blend over this window around each change (frames), as the released
# MANN data blends its action labels.
ACTION_BLEND_WINDOW_FRAMES = 31
# PFNN phase: a left-front stride lasts 0.35-0.67 s in canter and trot, 0.56-1.75 s in pace
# and walk (p5-max over the mocap's labelled gaits); a touchdown closer than MIN_STRIDE_S to
# the previous one is contact flicker (the walk's 0.2 s "strides"), and a gap over
# MAX_STRIDE_S is no stride: the phase cycles there at NOMINAL_PHASE_HZ (the walk's median
# stride rate is 1.15 Hz).
MIN_STRIDE_S = 0.3
MAX_STRIDE_S = 1.8
NOMINAL_PHASE_HZ = 1.0


@dataclass
class Labels:
    ground_m: np.ndarray  # (F,) ground height under the dog
    contacts: np.ndarray  # (F, 4) bool, PAW_NAMES order
    action_index: np.ndarray  # (F,) int, index into ACTIONS (hard label)
    actions: np.ndarray  # (F, 6) soft weights summing to 1
    gait_index: np.ndarray  # (F,) int, index into GAITS, NO_GAIT outside locomotion
    phase_rad: np.ndarray  # (F,) PFNN phase in [0, 2pi)
    hips_height_m: np.ndarray  # (F,) above the ground
    body_pitch_deg: np.ndarray  # (F,) hips-to-neck angle above horizontal
    root_speed_mps: np.ndarray  # (F,) horizontal, smoothed
    yaw_rate_degps: np.ndarray  # (F,) of the facing, left positive, smoothed


def rolling(values: np.ndarray, half_window: int, reduce) -> np.ndarray:
    """reduce over a centred window along axis 0, with edges padded by their last value."""
    padded = np.pad(
        values, [(half_window, half_window)] + [(0, 0)] * (values.ndim - 1), mode="edge"
    )
    return reduce(sliding_window_view(padded, 2 * half_window + 1, axis=0), axis=-1)


# Sniffing: an idle dog with its nose down. Nothing a game asks leads into it or out of it (the
# action input has no sniff), so a network that learns it drifts into it when asked to stand
# still and stays there. Marked as the idle frames within half a second of one whose head is
# under 75% of the standing head height (idle frames' median: about 47 cm on the mocap, where
# 19% of idle frames are under 35 cm).
SNIFF_HEAD_SHARE = 0.75
SNIFF_MARGIN_FRAMES = 30


# A walk as slow as this with the nose down is a sniffing walk: 37% of the move frames under
# it, a mode the walking dog's command (its speed) cannot tell from a walk with the head up.
SNIFF_WALK_MAX_MPS = 1.0


def _nose_down(frames: np.ndarray, head_height_m: np.ndarray, standing_head_m: float):
    """The `frames` (bool, one clip's consecutive frames) within SNIFF_MARGIN_FRAMES of one of
    them whose head is under SNIFF_HEAD_SHARE of the standing height."""
    low = frames & (head_height_m < SNIFF_HEAD_SHARE * standing_head_m)
    return frames & rolling(low, SNIFF_MARGIN_FRAMES, np.any)


def sniffing(action_index: np.ndarray, head_height_m: np.ndarray, standing_head_m: float):
    """(F,) bool over one clip's consecutive frames: the idle frames of a sniff."""
    return _nose_down(action_index == ACTIONS.index("idle"), head_height_m, standing_head_m)


def sniffing_walk(
    action_index: np.ndarray, speed_mps: np.ndarray, head_height_m: np.ndarray, standing_m: float
):
    """(F,) bool over one clip's consecutive frames: the move frames under SNIFF_WALK_MAX_MPS
    with the nose down by `sniffing`'s rule."""
    walk = (action_index == ACTIONS.index("move")) & (speed_mps < SNIFF_WALK_MAX_MPS)
    return _nose_down(walk, head_height_m, standing_m)


def speeds_mps(positions_m: np.ndarray) -> np.ndarray:
    """Speeds (F, ...) of points (F, ..., 3) by central differences."""
    velocity = np.gradient(positions_m, axis=0) * FPS
    return np.linalg.norm(velocity, axis=-1)


def estimate_ground(paw_heights_m: np.ndarray, paw_speeds_mps: np.ndarray) -> np.ndarray:
    """Ground height (F,) from the paws that may be planted: the lowest slow paw within a
    short window. The capture floor is not flat everywhere (a platform, steps), so the
    ground follows the paws; frames with no slow paw (flight) interpolate."""
    candidates = np.where(paw_speeds_mps < GROUND_PAW_SPEED_MPS, paw_heights_m, np.inf)
    ground = rolling(candidates.min(axis=1), GROUND_WINDOW_FRAMES, np.min)
    known = np.isfinite(ground)
    if not known.any():
        return np.zeros(len(ground))
    frames = np.arange(len(ground))
    return np.interp(frames, frames[known], ground[known])


def detect_contacts(heights_above_ground_m: np.ndarray, paw_speeds_mps: np.ndarray):
    """Contacts (F, 4) with hysteresis, so a paw does not flicker at the thresholds."""
    enter = (heights_above_ground_m < CONTACT_ON_HEIGHT_M) & (paw_speeds_mps < CONTACT_ON_SPEED_MPS)
    leave = (heights_above_ground_m > CONTACT_OFF_HEIGHT_M) | (
        paw_speeds_mps > CONTACT_OFF_SPEED_MPS
    )
    contacts = np.zeros_like(enter)
    state = enter[0].copy()
    for f in range(len(enter)):  # a per-frame state machine; 4 paws at once
        state = (state & ~leave[f]) | enter[f]
        contacts[f] = state
    return contacts


def stride_contacts(
    heights_above_ground_m: np.ndarray, horizontal_paw_speeds_mps: np.ndarray, body_speed_mps
) -> np.ndarray:
    """Footfalls (F, 4) that count a sliding stance paw as down: detect_contacts with its
    speed thresholds (0.25 m/s to land, 0.5 to lift) raised to half and all of the body's
    speed when it moves faster. A galloping or braking dog's planted paws slide at 1-2 m/s in
    the mocap, which the contacts miss (whole strides of the canter), while a swinging paw
    moves faster than the body. The PFNN phase and the evaluation's footfalls use it."""
    body = np.asarray(body_speed_mps, dtype=np.float64)
    scale = CONTACT_ON_SPEED_MPS / np.maximum(CONTACT_ON_SPEED_MPS, 0.5 * body)
    return detect_contacts(heights_above_ground_m, horizontal_paw_speeds_mps * scale[:, None])


def true_runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """[start, end) of each run of True."""
    edges = np.diff(np.concatenate([[0], mask.astype(np.int8), [0]]))
    return list(zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1), strict=True))


def find_jumps(contacts, hips_height_world_m, ground_m) -> np.ndarray:
    """(F,) bool: frames inside a jump, with the crouch and landing around its flight."""
    jumping = np.zeros(len(contacts), dtype=bool)
    for start, end in true_runs(~contacts.any(axis=1)):
        if end - start < JUMP_MIN_FLIGHT_FRAMES:
            continue
        takeoff_ground = ground_m[max(start - 1, 0)]
        landing_ground = ground_m[min(end, len(ground_m) - 1)]
        rise = hips_height_world_m[start:end].max() - takeoff_ground
        if rise >= JUMP_MIN_HIPS_PEAK_M or abs(landing_ground - takeoff_ground) >= (
            JUMP_MIN_GROUND_CHANGE_M
        ):
            jumping[max(start - JUMP_MARGIN_FRAMES, 0) : end + JUMP_MARGIN_FRAMES] = True
    return jumping


def majority_filter(labels: np.ndarray, classes: int, window: int) -> np.ndarray:
    """Each frame takes the most common label in a centred window (ties keep the lower index)."""
    one_hot = np.eye(classes)[labels]
    return rolling(one_hot, window // 2, np.sum).argmax(axis=1)


def soft_actions(action_index: np.ndarray) -> np.ndarray:
    """Soft weights (F, 6): one-hot labels averaged over a centred window, so the weights
    cross-fade around each change instead of switching in one frame."""
    one_hot = np.eye(len(ACTIONS))[action_index]
    weights = rolling(one_hot, ACTION_BLEND_WINDOW_FRAMES // 2, np.mean)
    return weights / weights.sum(axis=1, keepdims=True)


def classify_actions(
    hips_height_m, neck_height_m, body_pitch_deg, root_speed_mps, yaw_rate_degps, jumping
) -> np.ndarray:
    """Hard action labels (F,), first matching rule wins: jump, stand, lie, sit, move, idle."""
    low = hips_height_m < LOW_HIPS_M
    rules = [
        ("jump", jumping),
        ("stand", body_pitch_deg > STAND_MIN_PITCH_DEG),
        ("lie", low & (neck_height_m < HIGH_NECK_M)),
        ("sit", low & (body_pitch_deg > SIT_MIN_PITCH_DEG)),
        (
            "move",
            (root_speed_mps > MOVE_MIN_SPEED_MPS)
            | (np.abs(yaw_rate_degps) > MOVE_MIN_YAW_RATE_DEGPS),
        ),
    ]
    labels = np.full(len(jumping), ACTIONS.index("idle"))
    for name, matches in reversed(rules):
        labels[matches] = ACTIONS.index(name)
    return majority_filter(labels, len(ACTIONS), ACTION_MAJORITY_WINDOW_FRAMES)


def front_paw_phase(contacts: np.ndarray) -> np.ndarray:
    """PFNN phase (F,) in [0, 2pi) from footfalls (F, 4) (label_clip gives stride_contacts,
    which do not miss the canter's sliding stances): one cycle per left-front stride, 0 at
    each left-front touchdown and rising at a constant rate to 2pi at the next, as the MANN
    paper's PFNN baseline fits one trigonometric cycle per front-leg stride. The right front
    paw is not an anchor: it lands half a stride later in walk, pace and trot, but a quarter
    (or, mirrored, three quarters) in the canter, where anchoring it at pi made the phase jump
    by up to pi in a frame and advance at different rates in the two halves of a stride.

    Where no stride exists (idle, sitting, lying: touchdowns seconds apart) the phase cycles
    at about NOMINAL_PHASE_HZ, a whole number of cycles between the touchdowns, as PFNN cycles
    the phase of a standing character: it never stalls, so the runtime's integrated phase
    keeps moving when the dog starts off. Touchdowns under MIN_STRIDE_S after the previous
    one are contact flicker and are dropped. Before the first and after the last touchdown the
    phase runs at the nominal rate."""
    frames = np.arange(len(contacts), dtype=np.float64)
    nominal_rate = 2 * np.pi * NOMINAL_PHASE_HZ / FPS  # rad/frame
    kept: list[int] = []
    for f in np.flatnonzero(np.diff(contacts[:, 0].astype(int)) == 1) + 1:
        if not kept or f - kept[-1] >= MIN_STRIDE_S * FPS:
            kept.append(int(f))
    if not kept:
        return (nominal_rate * frames) % (2 * np.pi)
    times = np.array(kept, dtype=np.float64)
    gaps_s = np.diff(times) / FPS
    cycles = np.where(gaps_s <= MAX_STRIDE_S, 1, np.maximum(2, np.round(gaps_s * NOMINAL_PHASE_HZ)))
    unwrapped = 2 * np.pi * np.concatenate([[0.0], np.cumsum(cycles)])
    phase = np.interp(frames, times, unwrapped)
    before, after = frames < times[0], frames > times[-1]
    phase[before] = unwrapped[0] - nominal_rate * (times[0] - frames[before])
    phase[after] = unwrapped[-1] + nominal_rate * (frames[after] - times[-1])
    return phase % (2 * np.pi)


def label_clip(skeleton: Skeleton, positions_m: np.ndarray, facing: np.ndarray) -> Labels:
    """All labels of one clip from its global joint positions (F, J, 3) and facing (F, 3)."""
    paws = positions_m[:, skeleton.group("paws")]
    paw_speeds = speeds_mps(paws)
    ground = estimate_ground(paws[..., 1], paw_speeds)
    contacts = detect_contacts(paws[..., 1] - ground[:, None], paw_speeds)

    hips = positions_m[:, skeleton.index("Hips")]
    neck = positions_m[:, skeleton.index("Neck")]
    body = neck - hips
    pitch_deg = np.degrees(np.arctan2(body[:, 1], np.linalg.norm(body[:, [0, 2]], axis=1)))
    root_speed = rolling(speeds_mps(hips * np.array([1.0, 0.0, 1.0])), 7, np.mean)
    yaw = np.unwrap(yaw_from_direction(facing))
    yaw_rate_degps = rolling(np.degrees(np.gradient(yaw)) * FPS, 7, np.mean)
    jumping = find_jumps(contacts, hips[:, 1], ground)
    hips_height = hips[:, 1] - ground
    action_index = classify_actions(
        hips_height, neck[:, 1] - ground, pitch_deg, root_speed, yaw_rate_degps, jumping
    )
    locomotion = (action_index == ACTIONS.index("move")) & (root_speed > MOVE_MIN_SPEED_MPS)
    return Labels(
        ground_m=ground,
        contacts=contacts,
        action_index=action_index,
        actions=soft_actions(action_index),
        gait_index=classify_gaits(contacts, root_speed, locomotion),
        phase_rad=front_paw_phase(
            stride_contacts(
                paws[..., 1] - ground[:, None], speeds_mps(paws * [1.0, 0.0, 1.0]), root_speed
            )
        ),
        hips_height_m=hips_height,
        body_pitch_deg=pitch_deg,
        root_speed_mps=root_speed,
        yaw_rate_degps=yaw_rate_degps,
    )

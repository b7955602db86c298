"""Gait from the footfall pattern: walk, pace, trot or canter (the MANN paper's Fig. 2).

Used for labelling and evaluating the mocap (training/labels.py) and for the demo's HUD;
never a network input: in MANN the gaits emerge from the commanded speed.

What a game reads from the dogs besides the pose: gait, footfalls, ground and bounds, and
the pose interpolated between steps for displays faster than the 60 Hz step.

Paws are always in PAW_ORDER (the skeleton's "paws" group, as Controller.contacts has them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from canis.runtime.actions import Action
from canis.runtime.arguments import checked, finite_number
from canis.runtime.rotations import quat_slerp
from numpy.lib.stride_tricks import sliding_window_view

if TYPE_CHECKING:
    from canis.runtime.features import LocalPose
    from canis.runtime.trajectory import GroundTrajectory

GAITS = ("walk", "pace", "trot", "canter")
NO_GAIT = -1
# Contact patterns are compared over this window (frames) around each frame.
GAIT_WINDOW_FRAMES = 61
GAIT_PAIR_CORRELATION = 0.5
WALK_MIN_DUTY_FACTOR = 0.5
# Below this speed, unsynchronised stepping with little ground contact is a slow walk whose
# contacts the detector partly misses (turning on the spot, shuffling), not a canter: the
# paper, too, split gaits by speed first.
CANTER_MIN_SPEED_MPS = 1.5


def _correlation(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pearson correlation along the last axis; 0 where either signal is constant."""
    a = a - a.mean(axis=-1, keepdims=True)
    b = b - b.mean(axis=-1, keepdims=True)
    denominator = np.sqrt((a * a).sum(-1) * (b * b).sum(-1))
    return np.where(denominator > 0, (a * b).sum(-1) / np.where(denominator > 0, denominator, 1), 0)


def classify_gaits(
    contacts: np.ndarray, root_speed_mps: np.ndarray, locomotion: np.ndarray
) -> np.ndarray:
    """Gait per frame (F,) from the footfall pattern around it, NO_GAIT off locomotion.

    contacts (F, 4) in the paw order left front, right front, left hind, right hind. Trot
    moves diagonal pairs together and pace lateral pairs; of the rest, a walk keeps each paw
    down more than half the time and a canter less.
    """
    half = GAIT_WINDOW_FRAMES // 2
    padded = np.pad(contacts.astype(np.float64), [(half, half), (0, 0)], mode="edge")
    signals = sliding_window_view(padded, GAIT_WINDOW_FRAMES, axis=0)  # (F, 4, window)
    lf, rf, lh, rh = (signals[:, p] for p in range(4))
    diagonal = 0.5 * (_correlation(lf, rh) + _correlation(rf, lh))
    lateral = 0.5 * (_correlation(lf, lh) + _correlation(rf, rh))
    duty = signals.mean(axis=(1, 2))
    cantering = (duty < WALK_MIN_DUTY_FACTOR) & (root_speed_mps >= CANTER_MIN_SPEED_MPS)
    gaits = np.where(cantering, GAITS.index("canter"), GAITS.index("walk"))
    gaits = np.where(
        (lateral > GAIT_PAIR_CORRELATION) & (lateral > diagonal), GAITS.index("pace"), gaits
    )
    gaits = np.where(
        (diagonal > GAIT_PAIR_CORRELATION) & (diagonal >= lateral), GAITS.index("trot"), gaits
    )
    return np.where(locomotion, gaits, NO_GAIT)


PAW_ORDER = ("LF", "RF", "LH", "RH")  # left front, right front, left hind, right hind
NO_GAIT_NAME = "none"
# The classifier compares footfalls over a window centred on the frame it labels, so the
# gait read now is the gait of half a window ago: GAIT_LATENCY_S (0.5 s at 60 Hz).
GAIT_LATENCY_FRAMES = GAIT_WINDOW_FRAMES // 2
GAIT_LATENCY_S = GAIT_LATENCY_FRAMES / 60.0
# The classifier tells a canter from a walk partly by speed (CANTER_MIN_SPEED_MPS).
# The readout compares the speed over the last SPEED_TRACKING_WINDOW_FRAMES (a stride or
# more, not this frame's, which rises and falls within a stride) with a hysteresis band, so
# a dog running near 1.5 m/s does not flicker between the two (canter_latch).
CANTER_HYSTERESIS_MPS = 0.1
# How far the shipped body mesh (assets/mesh/dog_body.npz, drawn by demo/skinned_mesh.py)
# reaches past the box of the joints, (below, above, sideways): the ears and the coat over the
# back, and the haunches in a sit or lie, which skinning sinks up to 12.9 cm below the ground.
# Measured by `python -m canis.tools.bounds_margin` over the four keyframes and walking to
# cantering at four facings (11.7, 21.8 and 22.7 cm), rounded up to the cm; tests/test_api.py
# re-measures it. Regenerate both with the mesh.
BOUNDS_MARGIN_M = (0.12, 0.22, 0.23)


def push_contacts(history: np.ndarray, contacts: np.ndarray) -> None:
    """Adds this frame's contacts (N, 4) to the history (N, GAIT_WINDOW_FRAMES, 4), in place."""
    history[:, :-1] = history[:, 1:]
    history[:, -1] = contacts


def canter_latch(latched: np.ndarray, window_speed_mps: np.ndarray) -> np.ndarray:
    """(N,) whether each dog is fast enough to canter: past CANTER_MIN_SPEED_MPS by the
    hysteresis band to become so, below it by the band to stop being so."""
    return np.where(
        latched,
        window_speed_mps >= CANTER_MIN_SPEED_MPS - CANTER_HYSTERESIS_MPS,
        window_speed_mps >= CANTER_MIN_SPEED_MPS + CANTER_HYSTERESIS_MPS,
    )


def gaits(contact_history: np.ndarray, fast: np.ndarray, moving: np.ndarray) -> tuple:
    """The gait name per dog ("walk", "pace", "trot", "canter", or "none" when not moving)
    from the last GAIT_WINDOW_FRAMES frames of contacts: classify_gaits' rule (the one that
    labels the mocap) for the window's middle frame, GAIT_LATENCY_S late, for every dog at
    once (a classify_gaits call per dog took 150 us, 39 ms for 256 dogs); `fast` (N,) is
    canter_latch's answer, which decides the classifier's speed test."""
    signals = np.asarray(contact_history, dtype=np.float64).transpose(0, 2, 1)  # (N, 4, W)
    lf, rf, lh, rh = (signals[:, p] for p in range(4))
    diagonal = 0.5 * (_correlation(lf, rh) + _correlation(rf, lh))
    lateral = 0.5 * (_correlation(lf, lh) + _correlation(rf, rh))
    duty = signals.mean(axis=(1, 2))
    index = np.where(
        (duty < WALK_MIN_DUTY_FACTOR) & fast, GAITS.index("canter"), GAITS.index("walk")
    )
    pace, trot = GAITS.index("pace"), GAITS.index("trot")
    index = np.where((lateral > GAIT_PAIR_CORRELATION) & (lateral > diagonal), pace, index)
    index = np.where((diagonal > GAIT_PAIR_CORRELATION) & (diagonal >= lateral), trot, index)
    return tuple(GAITS[i] if on else NO_GAIT_NAME for i, on in zip(index, moving, strict=True))


# Readouts.events()' record types.
FOOTFALL_EVENT = np.dtype(
    [("dog", np.int64), ("paw", np.int64), ("touch_down", bool), ("position_m", np.float64, 3)]
)
TRANSITION_EVENT = np.dtype([("dog", np.int64), ("started", bool)])
GAIT_EVENT = np.dtype([("dog", np.int64), ("gait", "U6"), ("previous", "U6")])


def footfalls(contact_history: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(touch-downs, lift-offs) in this frame: (N, 4) bool each, paws in PAW_ORDER."""
    now, before = contact_history[:, -1], contact_history[:, -2]
    return now & ~before, before & ~now


def bounds_m(positions_m: np.ndarray, margin_m=BOUNDS_MARGIN_M) -> np.ndarray:
    """(N, 2, 3) world axis-aligned box (min corner, max corner) of each dog's joints (N, J, 3)
    padded by `margin_m` (below, above, sideways) so that it holds the body mesh; (0, 0, 0)
    gives the joints' own box."""
    below, above, sideways = margin_m
    low = positions_m.min(axis=1) - [sideways, below, sideways]
    high = positions_m.max(axis=1) + [sideways, above, sideways]
    return np.stack([low, high], axis=1)


def interpolated(previous: tuple, current: tuple, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """The pose `alpha` of the way from the previous step's (positions, rotations) to the
    current one's: positions linearly, rotations by slerp (runtime/rotations.py)."""
    alpha = finite_number(alpha, "display_pose: alpha")
    if not -1e-9 <= alpha <= 1.0 + 1e-9:  # an accumulator's rounding is not an error
        raise ValueError(f"display_pose: alpha must be within [0, 1], got {alpha}")
    alpha = min(max(alpha, 0.0), 1.0)
    (p0, q0), (p1, q1) = previous, current
    return p0 + (p1 - p0) * alpha, quat_slerp(q0, q1, alpha)


def record_frame(s, contacts: np.ndarray, window_speed_mps: np.ndarray) -> None:
    """The step's readouts kept in the dogs' state `s`: this frame's paw contacts (N, 4) in
    the gait window, and the canter latch on the speed over the tracking window (N,)."""
    push_contacts(s.contact_history, contacts)
    s.canter_speed = canter_latch(s.canter_speed, window_speed_mps)


def _in_state(name: str) -> property:
    """A controller attribute that is the dogs' state's field `name`."""
    return property(
        lambda self: getattr(self.state, name), lambda self, v: setattr(self.state, name, v)
    )


class Readouts:
    """What a game reads of a Controller's dogs (docs/EMBEDDING.md), from its `state` (a
    DogState), `terrain` and `count`: Controller inherits them."""

    # The shown pose, in the state (runtime/pose.py show writes it).
    display_positions = _in_state("display_positions")
    display_rotations = _in_state("display_rotations")
    previous_display_positions = _in_state("previous_display_positions")
    previous_display_rotations = _in_state("previous_display_rotations")
    contacts = _in_state("contacts")

    # The readouts an embedder uses (docs/EMBEDDING.md); the state itself is self.state.
    @property
    def root_xz_m(self) -> np.ndarray:
        return self.state.root_xz_m

    @property
    def root_yaw_rad(self) -> np.ndarray:
        return self.state.root_yaw_rad

    @property
    def root_velocity_xz_mps(self) -> np.ndarray:
        return self.state.root_velocity_xz_mps

    @property
    def action_weights(self) -> np.ndarray:
        return self.state.action_weights

    @property
    def pose(self) -> LocalPose:
        return self.state.pose

    @property
    def expert_weights(self) -> np.ndarray | None:
        return self.state.expert_weights

    @property
    def predicted_future(self) -> GroundTrajectory | None:
        """The network's last predicted future (None before the first step)."""
        return self.state.predicted_future if self._has_prediction else None

    @property
    def root_position_m(self) -> np.ndarray:
        """(N, 3) world root positions on the network's flat ground (y = 0)."""
        xz = self.state.root_xz_m
        return np.stack([xz[:, 0], np.zeros(self.count), xz[:, 1]], 1)

    def in_transition(self) -> np.ndarray:
        """(N,) whether each character is in a transition: in its lead, when the motion
        network still moves it as commanded when it was asked for, or driven by the
        transition network."""
        if self.transitions is None:
            return np.zeros(self.count, dtype=bool)
        return self.transitions.active.copy()

    def display_pose(self, alpha: float | None = None) -> tuple[np.ndarray, np.ndarray]:
        """World joint positions (N, J, 3) and rotations (N, J, 4) to draw. With `alpha` in
        [0, 1], the pose that far from the previous step's to this one's (for a display
        faster than the 60 Hz step: alpha is the fixed-step accumulator's remainder / DT_S;
        examples/fast_display.py)."""
        if alpha is None:
            return self.display_positions, self.display_rotations
        previous = self.previous_display_positions, self.previous_display_rotations
        return interpolated(previous, (self.display_positions, self.display_rotations), alpha)

    # Readouts for games (runtime/py; docs/EMBEDDING.md).
    def gaits(self) -> tuple[str, ...]:
        """Each dog's gait ("walk", "pace", "trot", "canter", "none" when not moving), from
        the runtime's footfall classifier: GAIT_LATENCY_S (0.5 s) late."""
        moving = self.state.action_weights.argmax(axis=1) == int(Action.MOVE)
        return gaits(self.state.contact_history, self.state.canter_speed, moving)

    def actions(self) -> np.ndarray:
        """(N, len(Action)) each dog's action blend, columns in Action order."""
        return self.state.action_weights.copy()

    def events(self) -> dict[str, np.ndarray]:
        """What happened, as arrays a game hangs a sound, a dust puff or a log line on (call
        it once a step; the gait and transition events are those since the last call):
        "footfalls" (K,) records of this step's touch-downs and lift-offs: `dog`, `paw` (its
        index in PAW_ORDER), `touch_down` (else a lift-off) and `position_m` (3,), the paw
        where it is shown; "transitions" (K,): `dog`, `started` (else handed back); "gaits"
        (K,): `dog`, `gait` and `previous` (names, "none" when not moving)."""
        down, up = self.footfalls()
        dogs, paws = np.nonzero(down | up)
        feet = np.zeros(len(dogs), dtype=FOOTFALL_EVENT)
        feet["dog"], feet["paw"], feet["touch_down"] = dogs, paws, down[dogs, paws]
        feet["position_m"] = self.display_positions[dogs, self.paws[paws]]
        playing, gait = self.in_transition(), np.array(self.gaits())
        before = getattr(self, "_events_seen", None)
        if before is None or len(before[0]) != self.count:  # the first call, or dogs came or went
            before = (np.zeros(self.count, dtype=bool), gait)
        changed = np.flatnonzero(playing != before[0])
        transitions = np.zeros(len(changed), dtype=TRANSITION_EVENT)
        transitions["dog"], transitions["started"] = changed, playing[changed]
        moved = np.flatnonzero(gait != before[1])
        gaits_ = np.zeros(len(moved), dtype=GAIT_EVENT)
        gaits_["dog"], gaits_["gait"], gaits_["previous"] = moved, gait[moved], before[1][moved]
        self._events_seen = (playing, gait)
        return {"footfalls": feet, "transitions": transitions, "gaits": gaits_}

    def footfalls(self) -> tuple[np.ndarray, np.ndarray]:
        """(touch-downs, lift-offs) in the last step: (N, 4) bool, paws in PAW_ORDER."""
        return footfalls(self.state.contact_history)

    def ground_height_m(self) -> np.ndarray:
        """(N,) the terrain's height under each dog's root (0 on flat ground)."""
        if self.terrain is None:
            return np.zeros(self.count)
        return self.terrain.sample(self.state.root_xz_m)[0].astype(np.float64)

    def root_world_m(self) -> np.ndarray:
        """(N, 3) the root on the terrain in the world: (x, ground height, z)."""
        root = self.root_position_m.copy()
        root[:, 1] = self.ground_height_m()
        return root

    def bounds_m(self, margin_m=BOUNDS_MARGIN_M) -> np.ndarray:
        """(N, 2, 3) each dog's world axis-aligned box (min, max) around its body: the shown
        joints' box padded by `margin_m` (below, above, sideways), by default the body mesh's
        measured reach past them (BOUNDS_MARGIN_M); (0, 0, 0) for the joints' box."""
        margin_m = checked(
            margin_m, (3,), "margin_m", "bounds_m", expected=" (below, above, sideways)"
        )
        return bounds_m(self.display_positions, margin_m)

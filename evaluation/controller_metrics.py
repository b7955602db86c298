"""The MANN paper's motion-quality measures (Tables 2 and 3), one implementation for the
ground-truth clips and for the controllers' recordings alike.

- Foot skating (cm/frame): canis.runtime.motion_metrics.foot_skating_cm, the paper's formula.
- Paws down: the share of paw-steps ending under the skating measure's 2.5 cm, where skating
  is counted at all; a dog that carries its paws higher skates nothing by the paper's measure.
- Paws planted: the share of paw-steps down and moving under the runtime's contact speed
  (kinematics.CONTACT_SPEED_MPS) in the world, front and hind paws apart: a paw that shuffles
  just under 2.5 cm is down and skates little by the measure, and is not planted.
- Leg stiffness (degrees/frame): the mean angle each leg joint's local (parent-relative)
  rotation turns by from one frame to the next. Local, so that the whole body turning is not
  counted as leg motion; end sites carry no rotation of their own and are left out.
"""

from __future__ import annotations

import numpy as np
from canis.runtime.features import FPS
from canis.runtime.kinematics import CONTACT_SPEED_MPS, local_rotations
from canis.runtime.motion_metrics import SKATING_HEIGHT_CM, foot_skating_cm
from canis.runtime.rotations import quat_conjugate, quat_multiply
from canis.runtime.skeleton import DOG_GROUPS, DOG_LEG_GROUPS, Skeleton

BACK_LEG_GROUPS = ("back_left_leg", "back_right_leg")
BACK_PAWS = slice(2, 4)  # paws group order: left front, right front, left hind, right hind


def leg_joints(skeleton: Skeleton, groups=DOG_LEG_GROUPS) -> np.ndarray:
    """Indices of the rotating joints of the named leg groups (no end sites)."""
    names = [n for g in groups for n in DOG_GROUPS[g] if not n.endswith("Site")]
    return skeleton.indices(names)


def angular_update_deg(rotations: np.ndarray) -> np.ndarray:
    """(F - 1, ...) angle in degrees between consecutive frames' rotations (F, ..., 4)."""
    rotations = np.asarray(rotations, dtype=np.float64)
    delta = quat_multiply(quat_conjugate(rotations[:-1]), rotations[1:])
    # atan2 of the vector part, not arccos of w: arccos near 1 turns float32 rounding of the
    # poses into a noise floor of ~0.04 degrees per joint and frame.
    sine = np.linalg.norm(delta[..., 1:], axis=-1)
    return np.degrees(2 * np.arctan2(sine, np.abs(delta[..., 0])))


def motion_quality(
    skeleton: Skeleton,
    world_positions_m: np.ndarray,
    world_rotations: np.ndarray,
    ground_m: np.ndarray | float = 0.0,
    counted: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """Per-frame-step measures of one continuous stretch of F frames: skating (F-1, 4) in
    cm/frame per paw, whether each paw ends the step under the skating measure's height (F-1,
    4), and leg joint updates (F-1, L) in degrees, each over the step from frame f to f + 1;
    `counted` (F,) keeps the steps whose both ends are counted. Heights are above `ground_m`
    (scalar or (F,))."""
    paws = world_positions_m[:, skeleton.group("paws")]
    ground = np.broadcast_to(np.asarray(ground_m, dtype=np.float64), (len(paws),))
    heights_m = paws[..., 1] - ground[:, None]
    skating = foot_skating_cm(paws[..., [0, 2]], heights_m)
    down = heights_m[1:] * 100 < SKATING_HEIGHT_CM  # the step's end, as the skating weighs it
    speed_mps = np.linalg.norm(np.diff(paws[..., [0, 2]], axis=0), axis=-1) * FPS
    planted = down & (speed_mps < CONTACT_SPEED_MPS)
    legs = leg_joints(skeleton)
    updates = angular_update_deg(local_rotations(skeleton, world_rotations)[:, legs])
    if counted is not None:
        keep = counted[:-1] & counted[1:]
        skating, down, updates, planted = skating[keep], down[keep], updates[keep], planted[keep]
    return {
        "skating_cm": skating,
        "paws_down": down,
        "paws_planted": planted,
        "leg_updates_deg": updates,
    }


def summarise(skeleton: Skeleton, parts: list[dict[str, np.ndarray]]) -> dict[str, float]:
    """Means over every step of the parts (each from motion_quality): all legs and back legs."""
    skating = np.concatenate([p["skating_cm"] for p in parts])
    down = np.concatenate([p["paws_down"] for p in parts])
    planted = np.concatenate([p["paws_planted"] for p in parts])
    updates = np.concatenate([p["leg_updates_deg"] for p in parts])
    legs = leg_joints(skeleton)
    back = np.isin(legs, leg_joints(skeleton, BACK_LEG_GROUPS))
    return {
        "skating_cm": float(skating.mean()),
        "skating_back_cm": float(skating[:, BACK_PAWS].mean()),
        "paws_down_share": float(down.mean()),
        "paws_down_front_share": float(down[:, :2].mean()),
        "paws_down_hind_share": float(down[:, BACK_PAWS].mean()),
        "paws_planted_front_share": float(planted[:, :2].mean()),
        "paws_planted_hind_share": float(planted[:, BACK_PAWS].mean()),
        "stiffness_deg": float(updates.mean()),
        "stiffness_back_deg": float(updates[:, back].mean()),
        "steps": int(len(skating)),
    }

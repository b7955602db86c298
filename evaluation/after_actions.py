"""What a replay of the mocap never asks and a player does: the pose a second after a jump
from a stand, and after a stop from a walk. Each is measured against the standing pose the
same network holds before it is asked (the network alone, speed tracking off, flat ground):
the hips' and the head's heights as a share of the standing ones, and the root's speed then
and over the SETTLED_S that follow (one moment can fall in a lull of a dog that creeps on)."""

from __future__ import annotations

from canis.evaluation.controllers import JUMP_HOLD_S
from canis.export.closed_loop import Steering, record
from canis.runtime.controller import DT_S, Controller

STAND_S = 2.0  # stood before the action; its last half second is the standing pose
AFTER_S = 1.0  # the pose is read this long after the action ends (a few frames averaged)
SETTLED_S = 2.0  # and the root's mean speed over this long after that

WALK_MPS, WALK_S = 1.1, 3.0
# The bars: heights within 10% of the standing pose's, the root under 0.05 m/s.
HEIGHT_TOLERANCE, STILL_MPS = 0.10, 0.05


def _frame(t_s: float) -> int:
    return int(round(t_s / DT_S))


def after_row(hips_m, head_m, speeds_mps, standing: slice, ended_frame: int) -> dict:
    """The row for one run's hips and head heights (F,) and root speeds (F,): the standing
    frames, and the frame the action ended on."""
    after = _frame(AFTER_S)
    at = slice(ended_frame + after - 3, ended_frame + after + 4)
    settled = slice(ended_frame + after, ended_frame + after + _frame(SETTLED_S))
    row = {
        "hips_share": float(hips_m[at].mean() / hips_m[standing].mean()),
        "head_share": float(head_m[at].mean() / head_m[standing].mean()),
        "root_speed_mps": float(speeds_mps[at].mean()),
        "settled_speed_mps": float(speeds_mps[settled].mean()),
    }
    row["passed"] = bool(
        abs(row["hips_share"] - 1) <= HEIGHT_TOLERANCE
        and abs(row["head_share"] - 1) <= HEIGHT_TOLERANCE
        and row["root_speed_mps"] < STILL_MPS
        and row["settled_speed_mps"] < STILL_MPS
    )
    return row


def _after(model, skeleton, speed_at, action_at, ended_s: float) -> dict:
    steering = Steering(0.0, action_at=action_at)
    base = Steering.__call__

    def control(frame):  # Steering's speed, changed over time
        steering.speed_mps = speed_at(frame * DT_S)
        return base(steering, frame)

    controller = Controller(model, speed_tracking=False, stand_hold=False)  # the network alone
    run = record(controller, control, _frame(ended_s + AFTER_S + SETTLED_S) + 4)
    hips = run.positions_m[:, skeleton.index("Hips"), 1]
    head = run.positions_m[:, skeleton.index("Head"), 1]
    standing = slice(_frame(STAND_S - 0.5), _frame(STAND_S))
    return after_row(hips, head, run.speeds_mps, standing, _frame(ended_s))


def after_actions(model, skeleton) -> dict:
    """{"jump from a stand": row, "stop from a walk": row} for one MotionModel."""
    jump_end = STAND_S + JUMP_HOLD_S
    walk_end = STAND_S + WALK_S
    return {
        "jump from a stand": _after(
            model,
            skeleton,
            lambda t: 0.0,
            lambda t: "jump" if STAND_S <= t < jump_end else "idle",
            jump_end,
        ),
        "stop from a walk": _after(
            model,
            skeleton,
            lambda t: WALK_MPS if STAND_S <= t < walk_end else 0.0,
            lambda t: "move" if STAND_S <= t < walk_end else "idle",
            walk_end,
        ),
    }


def markdown(results: dict) -> str:
    lines = [
        "",
        f"A second after the action (the network alone): hips and head heights as a share of "
        f"the standing pose's, the root's speed, and its mean over the {SETTLED_S:g} s after; "
        f"passed within {HEIGHT_TOLERANCE:.0%} and under {STILL_MPS} m/s.",
        "",
        f"| model | after | hips | head | root m/s | root m/s, next {SETTLED_S:g} s | passed |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for name, rows in results.items():
        for what, row in rows.items():
            lines.append(
                f"| {name} | {what} | {row['hips_share']:.0%} | {row['head_share']:.0%} | "
                f"{row['root_speed_mps']:.3f} | {row['settled_speed_mps']:.3f} | "
                f"{'yes' if row['passed'] else '**no**'} |"
            )
    return "\n".join(lines) + "\n"

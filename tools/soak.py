"""`canis soak`: characters driven headless, faster than real time, by random but valid
commands over every action, speeds up to a canter, turns and all built-in terrains, watching
for anything that degrades over a long run.

Reported: non-finite network outputs and displayed poses, the worst bone-length error of the
displayed pose (relative), the worst paw penetration below the terrain, the root's speed
error against the command while moving steadily, memory growth after warm-up, and frame-time
p50/p99.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
from canis.runtime.actions import action_index
from canis.runtime.control import load_speed_calibration
from canis.runtime.controller import DT_S, Controller
from canis.runtime.features import ACTIONS
from canis.runtime.inference import MotionModel
from canis.runtime.machine import describe_machine, model_used
from canis.runtime.poses import KEYFRAME_ACTIONS
from canis.runtime.profiler import Histogram, Profiler
from canis.runtime.root import yaw_direction_xz
from canis.runtime.terrain import PROCEDURAL, procedural
from canis.runtime.trajectory import ControlState
from canis.runtime.transition import TransitionModel, shipped_transition_model_path
from canis.runtime.transition_frames import MAX_TRANSITION_FRAMES, MIN_TRANSITION_FRAMES

COMMAND_SECONDS = (1.0, 4.0)  # each new command lasts this long (uniform)
TERRAIN_SECONDS = 30.0  # the terrain changes this often
SETTLE_S = 2.0  # speed error counts after a command has had this long to take effect
ACTION_WEIGHTS = {"move": 0.55, "idle": 0.15, "sit": 0.08, "beg": 0.07, "lie": 0.07, "jump": 0.08}
# With a transition model, this share of new commands is instead a transition to a random
# keyframe of random length, from whatever the dog was doing.
TRANSITION_SHARE = 0.12
# The speed tracking the dogs run with: the Controller's default (a PI cruise control on the
# 50-frame mean speed since issue 23; an integral one that settled over a minute before); the
# demo's, with the model's own speed curve (within 10% about 3 s after a change); or none,
# the network's own speed.
SPEED_TRACKING = ("default", "calibrated", "off")


# What a soak must hold to pass (`canis soak` prints each with what was measured and exits 1
# when one fails). The worst paw penetration is the target set by issue 20: the shipped model's
# one-hour soak meets it (1.00 cm, from 63.9 cm before the IK's fixes; docs/RELIABILITY.md). Speed
# error and frame time are reported, not judged: the first was mostly the old default integral
# speed tracking overshooting commands that change every 1-4 s (docs/RELIABILITY.md), the
# second depends on the machine.
LIMITS = {
    "non_finite": 0,  # network outputs and displayed poses
    "bone_length_error": 1e-3,  # relative: 0.1%
    "penetration_p99_cm": 5.0,
    "penetration_worst_cm": 5.0,
    "memory_growth_mb": 5.0,
}


def verdicts(summary: dict) -> list[tuple[bool, str]]:
    """(passed, what was measured against what limit) for each judged measure."""
    depth = summary["paw_penetration_cm"]
    non_finite = summary["non_finite_model_outputs"] + summary["non_finite_poses"]
    return [
        (
            non_finite <= LIMITS["non_finite"],
            f"non-finite network outputs / displayed poses: {summary['non_finite_model_outputs']}"
            f" / {summary['non_finite_poses']} (needs 0)",
        ),
        (
            summary["max_bone_length_error"] <= LIMITS["bone_length_error"],
            f"worst bone-length error of the displayed pose: "
            f"{summary['max_bone_length_error']:.3%} (needs <= {LIMITS['bone_length_error']:.1%})",
        ),
        (
            depth["p99"] <= LIMITS["penetration_p99_cm"],
            f"paw penetration p99: {depth['p99']:.2f} cm "
            f"(needs <= {LIMITS['penetration_p99_cm']} cm)",
        ),
        (
            depth["worst"] <= LIMITS["penetration_worst_cm"],
            f"worst paw penetration: {depth['worst']:.2f} cm "
            f"(needs <= {LIMITS['penetration_worst_cm']} cm){where(depth.get('worst_at'))}",
        ),
        (
            summary["memory_growth_mb"] <= LIMITS["memory_growth_mb"],
            f"memory growth after warm-up: {summary['memory_growth_mb']:.2f} MB "
            f"(needs <= {LIMITS['memory_growth_mb']} MB)",
        ),
    ]


def worst_paw_frame(controller: Controller, frame: int, dog: int, paw: int, terrain: str):
    """Where the deepest paw so far was: to trace it (docs/RELIABILITY.md)."""
    shown = controller.state.action_weights[dog].argmax()
    return {
        "time_s": round(frame * DT_S, 3),
        "dog": dog,
        "paw": controller.skeleton.joint_names[controller.skeleton.group("paws")[paw]],
        "terrain": terrain,
        "action_shown": ACTIONS[shown],
        "in_transition": bool(controller.in_transition()[dog]),
    }


def where(worst_at: dict | None) -> str:
    if not worst_at:
        return ""
    state = "in a transition" if worst_at["in_transition"] else f"shown {worst_at['action_shown']}"
    return (
        f"; {worst_at['paw']} of dog {worst_at['dog']} at {worst_at['time_s']:.1f} s on "
        f"{worst_at['terrain']}, {state}"
    )


def rss_mb() -> float:
    """Resident memory of this process (Linux /proc; 0 elsewhere)."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return 0.0
    import os

    return pages * os.sysconf("SC_PAGE_SIZE") / 1e6


def soak(
    model_path,
    seconds: float,
    characters: int = 4,
    seed: int = 0,
    progress=None,
    transition_model_path: Path | None | bool = None,
    speed_tracking: str = "default",
) -> dict:
    """`transition_model_path` None: the shipped RTN when present; False: no transitions.
    `speed_tracking` (SPEED_TRACKING): the Controller's default cruise control, the
    demo's (with the model's speed calibration), or none."""
    if speed_tracking not in SPEED_TRACKING:
        raise ValueError(
            f"speed_tracking must be one of {', '.join(SPEED_TRACKING)}, got {speed_tracking!r}"
        )
    calibration = None
    if speed_tracking == "calibrated":
        calibration = load_speed_calibration(model_path)
        if calibration is None:
            raise ValueError(f"{model_path}: has no speed calibration beside it")
    rng = np.random.default_rng(seed)
    model = MotionModel(model_path)
    profiler = Profiler()
    transitions = None
    if transition_model_path is not False and (
        transition_model_path is not None or shipped_transition_model_path().is_file()
    ):
        transitions = TransitionModel(transition_model_path or None)
    controller = Controller(
        model,
        count=characters,
        profiler=profiler,
        transition_model=transitions,
        speed_tracking=speed_tracking != "off",
        speed_calibration=calibration,
    )
    keyframe_names = list(controller.keyframes)
    transition_count = 0
    skeleton = controller.skeleton
    bones = skeleton.bone_lengths_m()[1:]
    real_bones = bones > 1e-6  # Hips to Spine has no length
    paws = skeleton.group("paws")
    frames = int(round(seconds / DT_S))
    names = list(ACTION_WEIGHTS)
    odds = np.array([ACTION_WEIGHTS[n] for n in names])
    until = np.zeros(characters)
    since = np.zeros(characters)
    velocity, facing = np.zeros((characters, 2)), np.zeros(characters)
    turn, action = np.zeros(characters), np.zeros(characters, dtype=int)
    worst_bone, worst_penetration, worst_paw = 0.0, 0.0, None
    speed_errors = Histogram(bin_width=0.01, maximum=20.0)  # m/s
    speed_signed_sum = 0.0  # m/s, over the same dog-frames: faster than asked is positive
    penetration = Histogram(bin_width=0.001, maximum=1.0)  # m, paw-frames below the ground
    non_finite_poses, terrains_seen = 0, []
    memory_start = None
    # Memory is compared from after every terrain has been used once (first uses allocate).
    warm_up_frames = min(frames // 2, int((len(PROCEDURAL) * TERRAIN_SECONDS + 10) / DT_S))
    started = time.perf_counter()
    for frame in range(frames):
        t = frame * DT_S
        if frame % int(TERRAIN_SECONDS / DT_S) == 0:
            name = PROCEDURAL[(frame // int(TERRAIN_SECONDS / DT_S)) % len(PROCEDURAL)]
            controller.terrain = None if name == "flat" else procedural(name)
            profiler.instant("terrain", name=name)
            terrains_seen.append(name)
        renew = t >= until
        for c in np.flatnonzero(renew):
            if transitions is not None and rng.uniform() < TRANSITION_SHARE:
                to = str(rng.choice(keyframe_names))
                length = int(rng.integers(MIN_TRANSITION_FRAMES, MAX_TRANSITION_FRAMES + 1))
                begun = controller.transition_to(to, length, characters=[c])
                action[c] = ACTIONS.index(KEYFRAME_ACTIONS[to])
                velocity[c], turn[c] = 0.0, 0.0
                facing[c] = begun.final_yaw_rad[0]
                until[c] = t + begun.frames * DT_S + rng.uniform(*COMMAND_SECONDS)
                since[c] = t
                transition_count += 1
                continue
            action[c] = action_index(str(rng.choice(names, p=odds)))
            speed = rng.uniform(0.3, 3.5) if ACTIONS[action[c]] == "move" else 0.0
            heading = rng.uniform(-np.pi, np.pi)
            turn[c] = rng.uniform(-1.0, 1.0) * (ACTIONS[action[c]] == "move")
            facing[c] = heading
            velocity[c] = speed * yaw_direction_xz(heading)
            until[c] = t + rng.uniform(*COMMAND_SECONDS)
            since[c] = t
        facing += turn * DT_S
        speed_now = np.linalg.norm(velocity, axis=1)
        velocity = speed_now[:, None] * yaw_direction_xz(facing)
        controller.step(ControlState(velocity, facing, action))
        profiler.end_frame()
        positions = controller.display_positions.astype(np.float64)
        if not np.all(np.isfinite(positions)):
            non_finite_poses += 1
            continue
        lengths = np.linalg.norm(positions[:, 1:] - positions[:, skeleton.parents[1:]], axis=-1)
        error = np.abs(lengths[:, real_bones] - bones[real_bones]) / bones[real_bones]
        worst_bone = max(worst_bone, float(error.max()))
        ground = (
            np.zeros((characters, 4))
            if controller.terrain is None
            else controller.terrain.sample(positions[:, paws][..., [0, 2]])[0]
        )
        depth = np.maximum(ground - positions[:, paws, 1], 0.0)
        penetration.add_many(depth.reshape(-1))
        if depth.max() > worst_penetration:
            worst_penetration = float(depth.max())
            dog, paw = np.unravel_index(int(depth.argmax()), depth.shape)
            worst_paw = worst_paw_frame(controller, frame, int(dog), int(paw), name)
        steady = (action == ACTIONS.index("move")) & (t - since >= SETTLE_S)
        if steady.any():
            actual = np.linalg.norm(controller.root_velocity_xz_mps[steady], axis=1)
            speed_errors.add_many(np.abs(actual - speed_now[steady]))
            speed_signed_sum += float(np.sum(actual - speed_now[steady]))
        if memory_start is None and frame >= warm_up_frames:
            memory_start = rss_mb()
        if progress is not None and frame % 600 == 0:
            progress(frame, frames)
    speed_stats, depth_stats = speed_errors.percentiles(), penetration.percentiles()
    stats = profiler.summary()["stages"]["frame"]
    return {
        "report": "canis soak",
        "model": str(model_path),
        "machine": describe_machine(**model_used(model)),
        "simulated_seconds": seconds,
        "characters": characters,
        "frames": frames,
        "steps_per_character": frames,
        "seed": seed,
        "wall_seconds": round(time.perf_counter() - started, 1),
        "terrains": sorted(set(terrains_seen)),
        "transitions": transition_count,
        "non_finite_model_outputs": controller.non_finite_events,
        "non_finite_poses": non_finite_poses,
        "max_bone_length_error": worst_bone,
        "paw_penetration_cm": {
            "worst": worst_penetration * 100,
            "mean": depth_stats["mean"] * 100,
            "p99": depth_stats["p99"] * 100,
            "worst_at": worst_paw,
        },
        "speed_tracking": speed_tracking,
        "speed_error_mps": {
            "mean": speed_stats["mean"],
            "p95": speed_stats["p95"],
            "signed_mean": speed_signed_sum / max(len(speed_errors), 1),
        },
        "memory_growth_mb": (rss_mb() - memory_start) if memory_start else 0.0,
        "frame_ms": {"p50": stats["p50_ms"], "p99": stats["p99_ms"], "max": stats["max_ms"]},
        "frame_time": profiler.summary(),
    }

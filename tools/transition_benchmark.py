"""Timings of the transition network for `canis bench`: one generation step, the hidden-state
initialiser, a whole transition as Controller.transition_to generates it (context and every
frame, one dog), and the per-frame cost of playing it back inside the controller."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from canis.runtime.transition import INIT_OUTPUTS, STEP_INPUTS, STEP_OUTPUTS, TransitionModel
from canis.runtime.transition_frames import CONTEXT_FRAMES, FRAME_SIZE
from canis.tools.benchmark import time_calls

STEP_BATCHES = (1, 8, 64)
TRANSITION_LENGTHS = (15, 30, 60)


def benchmark_transitions(step_path: Path, motion_model_path: Path, seconds_per_case=1.0) -> dict:
    model = TransitionModel(step_path, device="cpu", threads=1)
    rng = np.random.default_rng(0)
    steps = []
    for batch in STEP_BATCHES:
        values = (
            rng.normal(size=(batch, FRAME_SIZE)),  # frame
            np.tile([0.5, -1.0, 0.0, 1.0], (batch, 1)),  # placement
            rng.normal(size=(batch, FRAME_SIZE)),  # target
            np.full((batch, 1), 20.0),  # frames to arrival
            np.zeros((batch, 512)),  # h
            np.zeros((batch, 512)),  # c
        )
        feeds = {n: v.astype(np.float32) for n, v in zip(STEP_INPUTS, values, strict=True)}

        def call(feeds=feeds):
            return model.step_session.run(STEP_OUTPUTS, feeds)

        once = time_calls(call, repeats=5, warmup=3)
        repeats = int(np.clip(seconds_per_case / max(once["mean_ms"] / 1e3, 1e-6), 50, 3000))
        steps.append({"batch": batch} | time_calls(call, repeats))
    first = {"first_frame": rng.normal(size=(1, FRAME_SIZE)).astype(np.float32)}
    initialiser = time_calls(lambda: model.init_session.run(INIT_OUTPUTS, first), 200)
    whole = []
    context = rng.normal(size=(1, CONTEXT_FRAMES, FRAME_SIZE)).astype(np.float32)
    placements = np.tile(np.float32([0.5, -1.0, 0.0, 1.0]), (1, CONTEXT_FRAMES, 1))
    target = rng.normal(size=(1, FRAME_SIZE)).astype(np.float32)
    for length in TRANSITION_LENGTHS:
        result = time_calls(
            lambda length=length: model.generate(context, placements, target, length), 30, 3
        )
        whole.append({"frames": length, "steps": CONTEXT_FRAMES - 1 + length + 1} | result)
    return {
        "file": Path(step_path).name,
        "parameter_bytes": int(model.metadata.get("canis.parameter_bytes", 0)),
        "step": steps,
        "initialiser": initialiser,
        "generate_one_dog": whole,
        "playback": playback_cost(model, motion_model_path),
    }


def playback_cost(model: TransitionModel, motion_model_path: Path, length: int = 45) -> dict:
    """The controller's 'transition' stage while a transition plays (after it was generated)
    and in the frame that generates it, one dog, repeated over several transitions."""
    from canis.runtime.controller import Controller
    from canis.runtime.features import ACTIONS
    from canis.runtime.inference import MotionModel
    from canis.runtime.profiler import Profiler
    from canis.runtime.trajectory import ControlState

    controller = Controller(MotionModel(motion_model_path, device="cpu"), transition_model=model)
    idle = ControlState(np.zeros((1, 2)), np.zeros(1), np.array([ACTIONS.index("idle")]))
    generate, play = [], []
    for target in ("sit", "stand", "lie", "beg") * 3:
        controller.profiler = Profiler(keep_trace=True)
        controller.transition_to(target, length)
        controller.profiler.end_frame()
        for _ in range(length + 1):
            controller.step(idle)
            controller.profiler.end_frame()
        events = [e for e in controller.profiler.events if e["name"] == "transition"]
        generate.append(events[0]["dur"] / 1e3)
        play += [e["dur"] / 1e3 for e in events[1:]]
    return {
        "frames": length,
        "generate_p50_ms": float(np.median(generate)),
        "play_p50_ms": float(np.median(play)),
        "play_p99_ms": float(np.percentile(play, 99)),
    }


def markdown(report: dict) -> str:
    steps = report["step"]
    lines = [
        "",
        f"## Transitions (RTN, `{report['file']}`, one thread)",
        "",
        f"Parameters: {report['parameter_bytes'] / 1e6:.2f} MB (float32). One generation step "
        "(one LSTM step for every character in the batch):",
        "",
        "| batch | p50 ms | p99 ms |",
        "|---|---|---|",
    ]
    lines += [f"| {s['batch']} | {s['p50_ms']:.3f} | {s['p99_ms']:.3f} |" for s in steps]
    init = report["initialiser"]
    lines += [
        "",
        f"Hidden-state initialiser: p50 {init['p50_ms']:.3f} ms. A whole transition as "
        "`Controller.transition_to` generates it for one dog (context steps, every frame and the "
        "predicted target, before the target blend can be applied):",
        "",
        "| transition frames | steps | p50 ms | p99 ms |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| {w['frames']} | {w['steps']} | {w['p50_ms']:.2f} | {w['p99_ms']:.2f} |"
        for w in report["generate_one_dog"]
    ]
    play = report["playback"]
    lines += [
        "",
        f"Inside the controller ({play['frames']}-frame transitions): the frame that asks for "
        f"one spends {play['generate_p50_ms']:.2f} ms (p50) generating it, over the 2 ms "
        "budget for long transitions, once; each frame that plays it back spends "
        f"{play['play_p50_ms']:.3f} ms (p50, p99 {play['play_p99_ms']:.3f}) on top of the "
        "motion network's step, which keeps running for the batch.",
        "",
    ]
    return "\n".join(lines)

"""Timings of the transition network for `canis bench`: one generation step, the hidden-state
initialiser, a whole transition generated at once (context and every frame, one dog: what the
offline tools do, and what the controller did before it streamed them), and the per-frame cost
inside the controller, which generates a transition over the frames that play it, beside the
frames without one.

`python -m canis.tools.transition_benchmark` prints the in-controller tables alone."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
from canis.runtime.profiler import percentiles_ms
from canis.runtime.transition import INIT_OUTPUTS, STEP_OUTPUTS, TransitionModel
from canis.runtime.transition_frames import CONTEXT_FRAMES, FRAME_SIZE
from canis.tools.benchmark import time_calls

STEP_BATCHES = (1, 8, 64)
TRANSITION_LENGTHS = (15, 30, 60)


def benchmark_transitions(step_path: Path, motion_model_path: Path, seconds_per_case=1.0) -> dict:
    model = TransitionModel(step_path, device="cpu", threads=1)
    rng = np.random.default_rng(0)
    steps = []
    for batch in STEP_BATCHES:
        feeds = step_feeds(model, batch, rng)

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
        "streamed": streamed_cases(model, motion_model_path),
    }


def step_feeds(model: TransitionModel, batch: int, rng: np.random.Generator) -> dict:
    """Random step inputs for `batch` rows, fed as the runtime feeds them
    (TransitionModel.step_feeds: the model's own hidden width, zero target noise for a model
    trained with it)."""
    hidden = np.zeros((batch, model.hidden_units))
    return model.step_feeds(
        rng.normal(size=(batch, FRAME_SIZE)),  # frame
        np.tile([0.5, -1.0, 0.0, 1.0], (batch, 1)),  # placement
        rng.normal(size=(batch, FRAME_SIZE)),  # target
        20.0,  # frames to arrival
        hidden,
        hidden,
    )


GAP_MS = 4.0  # a game's thread drawing between steps (a 60 Hz frame has 16.7 ms)


def streamed_cases(model: TransitionModel, motion_model_path: Path) -> list[dict]:
    """In the step and on the worker, 1 and 4 dogs, back to back; and both with a gap."""
    return [
        streamed_cost(model, motion_model_path, dogs, worker=worker, gap_ms=gap)
        for gap in (0.0, GAP_MS)
        for worker in (False, True)
        for dogs in (1, 4)
        if not (gap and dogs > 1)
    ]


PLAIN_FRAMES = 20  # frames without a transition after each hand-back, timed beside them
KINDS = ("ask", "transition", "plain")
STATS = ("p50", "p99", "max")


def streamed_cost(
    model: TransitionModel,
    motion_model_path: Path,
    dogs: int,
    length: int = 45,
    cycles: int = 3,
    worker: bool = False,
    gap_ms: float = 0.0,
) -> dict:
    """The controller's 'transition' stage and the whole step (wall and thread CPU time) of
    every frame of a transition, `dogs` dogs asked together, over `cycles` x 4 transitions,
    by kind: the frame that asks (the request is made in the frame it is timed with, as
    `canis run` does), the other frames of the transition (lead and playback), and the
    PLAIN_FRAMES frames without one after each hand-back, timed in the same loop. `worker`:
    the RTN steps run on the transition worker's thread (Controller(transition_worker=True));
    its CPU time, not in the step's thread CPU, is given per frame of a transition. `gap_ms`:
    the thread sleeps that long between steps, as a game's thread is busy elsewhere (drawing)
    between two simulation steps; back to back (0) the worker has only the next step's own
    stages before its result is waited for."""
    from canis.runtime.controller import Controller
    from canis.runtime.features import ACTIONS
    from canis.runtime.inference import MotionModel
    from canis.runtime.profiler import Profiler
    from canis.runtime.trajectory import ControlState

    controller = Controller(
        MotionModel(motion_model_path, device="cpu"),
        count=dogs,
        transition_model=model,
        transition_worker=worker,
    )
    idle = ControlState(np.zeros((dogs, 2)), np.zeros(dogs), np.full(dogs, ACTIONS.index("idle")))
    for _ in range(PLAIN_FRAMES):  # the first frames of a controller pay for its warm-up
        controller.step(idle)
    stage = {"ask": [], "transition": []}
    wall = {kind: [] for kind in KINDS}
    cpu = {kind: [] for kind in KINDS}
    worker_cpu = {"ask": [], "transition": []}
    for target in ("sit", "stand", "lie", "beg") * cycles:
        controller.profiler = profiler = Profiler()
        profiler.begin_frame()  # the request is timed with the frame that makes it
        started = controller.transition_to(target, length)
        for frame in range(started.frames + PLAIN_FRAMES):
            if frame:
                profiler.begin_frame()
            controller.step(idle)
            profiler.end_frame()
            if gap_ms:
                time.sleep(gap_ms / 1e3)
            record = profiler.ring[-1]
            kind = KINDS[0 if frame == 0 else 1 if frame < started.frames else 2]
            if kind in stage:
                stage[kind].append(record.stages.get("transition", 0.0))
            wall[kind].append(record.wall_ms)
            cpu[kind].append(record.cpu_ms)
            if kind in worker_cpu:  # the worker's steps settled in this frame
                worker_cpu[kind].append(controller.transition_worker_cpu_ms)
            controller.transition_worker_cpu_ms = 0.0
    controller.close()
    report = {"dogs": dogs, "frames": length, "frames_with_lead": started.frames}
    report["worker"] = worker
    report["gap_ms"] = gap_ms
    for kind, values in worker_cpu.items():
        report |= {f"{kind}_worker_cpu_{k}": v for k, v in percentiles_ms(values, STATS).items()}
    report |= {f"ask_stage_{k}": v for k, v in percentiles_ms(stage["ask"], STATS).items()}
    report |= {f"stage_{k}": v for k, v in percentiles_ms(stage["transition"], STATS).items()}
    for kind in KINDS:
        report |= {f"{kind}_wall_{k}": v for k, v in percentiles_ms(wall[kind], STATS).items()}
        report |= {f"{kind}_cpu_{k}": v for k, v in percentiles_ms(cpu[kind], STATS).items()}
    return report


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
        f"Hidden-state initialiser: p50 {init['p50_ms']:.3f} ms. A whole transition generated "
        "at once for one dog (context steps, every frame and the predicted target, before the "
        "target blend can be applied), as the offline tools do and as "
        "`Controller.transition_to` did in one frame before it streamed transitions:",
        "",
        "| transition frames | steps | p50 ms | p99 ms |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| {w['frames']} | {w['steps']} | {w['p50_ms']:.2f} | {w['p99_ms']:.2f} |"
        for w in report["generate_one_dog"]
    ]
    lines += streamed_lines(report["streamed"])
    lines.append("")
    return "\n".join(lines)


def streamed_lines(streamed: list[dict]) -> list[str]:
    """The in-controller tables of streamed_cost's reports (one per dog count)."""
    lines = [
        "",
        "Inside the controller a transition is generated over the frames that play it "
        "(runtime/transition_player.py): one RTN step a frame, one call for every dog that "
        "needs one, after a lead in which the motion network keeps the dogs going while the RTN "
        f"reads their context. {streamed[0]['frames']}-frame transitions asked for in the frame "
        "timed with them, and the frames without a transition after each, in one loop. The "
        "transition stage (ms): the frame that asks p50 / max, the others p50 / p99:",
        "",
        "| RTN steps | dogs | frame that asks | other transition frames |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| {_where(r)} | {r['dogs']} | {r['ask_stage_p50_ms']:.3f} / "
        f"{r['ask_stage_max_ms']:.3f} | {r['stage_p50_ms']:.3f} / {r['stage_p99_ms']:.3f} |"
        for r in streamed
    ]
    lines += [
        "",
        "The whole step, p50 / p99 / max (ms), wall and the thread's CPU time (with the "
        "worker, its thread's CPU time per frame of a transition is given beside):",
        "",
        "| RTN steps | dogs | frames | wall | CPU | worker CPU |",
        "|---|---|---|---|---|---|",
    ]
    names = {"ask": "that ask", "transition": "of a transition", "plain": "without one"}
    for r in streamed:
        for kind in KINDS:
            cells = [
                " / ".join(f"{r[f'{kind}_{clock}_{k}_ms']:.3f}" for k in STATS)
                for clock in ("wall", "cpu")
            ]
            worker = (
                " / ".join(f"{r[f'{kind}_worker_cpu_{k}_ms']:.3f}" for k in STATS)
                if r.get("worker") and kind != "plain"
                else ""
            )
            lines.append(
                f"| {_where(r)} | {r['dogs']} | {names[kind]} | {cells[0]} | {cells[1]} "
                f"| {worker} |"
            )
    return lines


def _where(report: dict) -> str:
    where = "worker thread" if report.get("worker") else "in the step"
    gap = report.get("gap_ms", 0.0)
    return f"{where}, {gap:g} ms between steps" if gap else where


if __name__ == "__main__":
    from canis.runtime.assets import shipped_model_path
    from canis.runtime.transition import shipped_transition_model_path

    rtn = TransitionModel(shipped_transition_model_path(), device="cpu", threads=1)
    rows = streamed_cases(rtn, shipped_model_path())
    print("\n".join(streamed_lines(rows)))

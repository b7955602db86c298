"""The transition worker (Controller(transition_worker=True)): the RTN's steps on a thread of
their own between the controller's steps play the same transitions as the in-step ones, bit
for bit, through restarts, resets, snapshots and resizes; and a frame in which every dog plays
a transition frame runs no motion-network inference (issue 15 item 2)."""

from pathlib import Path

import numpy as np
import pytest
from canis.runtime.assets import shipped_model_path
from canis.runtime.controller import Controller
from canis.runtime.features import ACTIONS
from canis.runtime.inference import MotionModel
from canis.runtime.trajectory import ControlState
from canis.runtime.transition import TransitionModel
from canis.runtime.transition_player import LEAD_FRAMES

NOISY_RTN = Path(__file__).resolve().parent / "fixtures" / "tiny_rtn_noise_step.onnx"


def controller(tiny_rtn, count: int, worker: bool) -> Controller:
    return Controller(
        MotionModel(shipped_model_path()),
        count=count,
        transition_model=TransitionModel(tiny_rtn),
        transition_worker=worker,
        seed=3,
    )


def moving(count: int) -> ControlState:
    velocity = np.column_stack([np.linspace(0.0, 0.4, count), np.linspace(1.2, 0.8, count)])
    return ControlState(velocity, np.zeros(count), np.full(count, ACTIONS.index("move")))


def scripted_run(tiny_rtn, worker: bool, variation: float = 0.0) -> list[np.ndarray]:
    """Three dogs: transitions for all and for some, one replaced while it plays, a dog reset
    in its lead, a snapshot taken mid-transition and restored, and a dog added and removed,
    each at a frame where the worker has steps under way."""
    c = controller(tiny_rtn, 3, worker)
    shown = []
    snapshot = None
    for frame in range(150):
        if frame == 20:
            c.transition_to("sit", 30, variation=variation)
        if frame == 25:
            c.transition_to("lie", 12, characters=[0], variation=variation)
        if frame == 38:  # dog 0 is playing its lie: replaced
            c.transition_to("beg", 20, characters=[0])
        if frame == 60:
            c.transition_to("stand", 25, characters=[1, 2])
        if frame == 63:
            c.reset(root_xz_m=[[2.0, 1.0]], yaw_rad=[0.3], characters=[2])
        if frame == 75:
            snapshot = c.get_state()
        if frame == 80:
            c.set_state(snapshot)  # back five frames, mid-transition
        if frame == 95:
            c.add(1, root_xz_m=[[-1.0, 0.0]])
            c.transition_to("lie", 20)
        if frame == 110:
            c.remove([1])
        c.step(moving(c.count))
        shown.append(c.display_pose()[0].copy())
    c.close()
    return shown


@pytest.mark.parametrize("variation", [0.0, 1.0])
def test_the_worker_plays_the_same_transitions(tiny_rtn, variation):
    """With a variation, each dog's target noise goes with its steps to the worker. Dogs
    whose steps share a call in one mode and not in the other get their frames from ONNX
    Runtime computed in other batches, which may round the last bit of a float32
    differently (TransitionPlayer's docstring): the three dogs' shown poses agree to a
    hundredth of a millimetre (a last bit near zero, seen as 5e-7 m), one dog's bit for bit
    (below)."""
    model = tiny_rtn if variation == 0 else NOISY_RTN
    in_step = scripted_run(model, False, variation)
    worker = scripted_run(model, True, variation)
    assert len(in_step) == len(worker)
    for frame, (a, b) in enumerate(zip(in_step, worker, strict=True)):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-5, err_msg=f"frame {frame}")


def test_one_dogs_transitions_are_the_same_bit_for_bit(tiny_rtn):
    """One dog: every call has the same rows in both modes, so nothing may differ at all."""

    def run(worker: bool) -> list[np.ndarray]:
        c = controller(tiny_rtn, 1, worker)
        shown = []
        for frame in range(120):
            if frame == 10:
                c.transition_to("sit", 30)
            if frame == 45:  # replaced while it plays
                c.transition_to("lie", 20)
            if frame == 90:
                c.transition_to("stand", 15)
            c.step(moving(1))
            shown.append(c.display_pose()[0].copy())
        c.close()
        return shown

    in_step, worker = run(False), run(True)
    for frame, (a, b) in enumerate(zip(in_step, worker, strict=True)):
        assert np.array_equal(a, b), f"frame {frame} differs"
    assert not np.array_equal(in_step[30], in_step[60])  # it moved: the test can fail


def test_the_worker_thread_runs_the_steps_and_stops(tiny_rtn):
    import threading

    c = controller(tiny_rtn, 1, True)
    threads = []
    step = c.transition_model.step
    c.transition_model.step = lambda *a: threads.append(threading.get_ident()) or step(*a)
    c.transition_to("sit", 10)
    for _ in range(LEAD_FRAMES + 11):
        c.step(moving(1))
    assert not c.in_transition().any()
    assert threads and threading.get_ident() not in threads
    c.close()
    c.reset()  # a closed controller stays without the worker
    assert not any(t.name.startswith("canis-rtn") for t in threading.enumerate())
    c.transition_to("lie", 10)  # closed: the steps run in the caller's thread
    for _ in range(LEAD_FRAMES + 11):
        c.step(moving(1))
    assert not c.in_transition().any() and threads[-1] == threading.get_ident()


def test_a_failing_worker_step_surfaces_in_the_next_step(tiny_rtn):
    c = controller(tiny_rtn, 1, True)

    def broken(*args):
        raise RuntimeError("RTN step failed")

    c.transition_model.step = broken
    c.transition_to("sit", 10)
    c.step(moving(1))  # submits the first step
    with pytest.raises(RuntimeError, match="RTN step failed"):
        c.step(moving(1))
    c.close()


@pytest.mark.parametrize("worker", [False, True])
def test_no_motion_inference_while_every_dog_plays(tiny_rtn, worker):
    """The motion network's output is read by nothing in a frame where every dog plays a
    transition frame: it is not run, and the dogs move as when it was."""
    runs = []
    for skip in (True, False):
        c = controller(tiny_rtn, 2, worker)
        if not skip:
            c._motion_network_idle = lambda: False
        calls = []
        run_bound = c.model.run_bound
        c.model.run_bound = lambda b, c=c, calls=calls, run=run_bound: (
            calls.append(c.frame) or run(b)
        )
        for _ in range(30):
            c.step(moving(2))
        started = c.transition_to("sit", 20)
        poses = []
        for _ in range(started.frames + 10):
            c.step(moving(2))
            poses.append(c.display_pose()[0].copy())
        c.close()
        runs.append((poses, calls))
    (skipped, skipped_calls), (ran, ran_calls) = runs
    playback = started.frames - LEAD_FRAMES
    assert len(ran_calls) - len(skipped_calls) == playback
    for a, b in zip(skipped, ran, strict=True):
        np.testing.assert_array_equal(a, b)


def test_the_worker_s_cpu_is_a_counter_in_the_trace(tiny_rtn, tmp_path):
    """Its CPU is in no stage of the frame's thread: the trace shows it as a counter track."""
    import json

    from canis.runtime.profiler import Profiler

    profiler = Profiler(keep_trace=True)
    c = Controller(
        MotionModel(shipped_model_path()),
        transition_model=TransitionModel(tiny_rtn),
        transition_worker=True,
        profiler=profiler,
    )
    started = c.transition_to("sit", 10)
    for _ in range(started.frames + 2):
        profiler.begin_frame()
        c.step(moving(1))
        profiler.end_frame()
    c.close()
    profiler.write_trace(tmp_path / "trace.json")
    events = json.loads((tmp_path / "trace.json").read_text())
    events = events["traceEvents"] if isinstance(events, dict) else events
    worker = [e["args"]["cpu_ms"] for e in events if e.get("name") == "transition worker"]
    assert len(worker) >= started.frames - 1 and max(worker) > 0

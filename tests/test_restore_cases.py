"""Save and restore mid-game: for each case a game met, a controller restored from a pickled
get_state() into fresh objects (a new Controller and PostureRequests; one case in a fresh
process) steps on exactly as the unbroken one does: the network's input and the shown pose
bit for bit, 300 steps after the restore.

1. dogs driven by follow_path (ControlState.future_xz_m); 2. a waiting posture request, then
a remove; 3. a remove and an add in one frame; 4. a posture request waiting across the save
(in a fresh process); 5. transition_to(variation=1) without a seed after the restore."""

from __future__ import annotations

import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from canis.runtime.actions import Action
from canis.runtime.control import follow_path
from canis.runtime.controller import Controller
from canis.runtime.inference import MotionModel
from canis.runtime.trajectory import ControlState
from canis.runtime.transition import TransitionModel
from canis.runtime.transition_requests import PostureRequests
from conftest import FIXTURES

STEPS_AFTER = 300
PATH = np.array([[0.0, 0.0], [0.0, 3.0], [2.0, 5.0], [5.0, 5.0], [6.0, 1.0]])


def trotting(dogs: Controller, frame: int) -> ControlState:
    """Every dog asked to trot, its heading turning slowly (so the dogs keep moving)."""
    n = dogs.count
    yaw = np.full(n, 0.01 * frame) + 0.5 * dogs.ids
    velocity = 1.5 * np.stack([np.sin(yaw), np.cos(yaw)], axis=1)
    return ControlState(velocity, yaw, np.full(n, int(Action.MOVE)))


def on_path(dogs: Controller, frame: int) -> ControlState:
    """Each dog kept on PATH (shifted sideways by its id) with follow_path."""
    controls = [
        follow_path(PATH + [1.5 * dog, 0.0], 1.2, xz, yaw, loop=True)
        for dog, xz, yaw in zip(dogs.ids, dogs.root_xz_m, dogs.root_yaw_rad, strict=True)
    ]
    return ControlState(
        np.array([c.velocity_mps for c in controls]),
        np.array([c.facing_yaw_rad for c in controls]),
        np.full(dogs.count, int(Action.MOVE)),
        np.array([c.future_xz_m for c in controls]),
    )


def case_events(case: int):
    """(what happens at each frame before the save and after it, the frame of the save,
    the control): the events change the dogs through the API a game calls."""

    def path_case(dogs, postures, frame):
        if frame == 10:
            dogs.look_at([3.0, 0.5, 4.0], ids=[1])  # mid-fade at the save

    def request_then_remove(dogs, postures, frame):
        if frame == 30:
            postures.request("sit", 20, ids=[1, 2])
        if frame == 32:
            dogs.remove(ids=[0])
            dogs.look_at([0.0, 0.3, 3.0], 0.7)

    def remove_and_add(dogs, postures, frame):
        if frame == 20:
            postures.request("lie", 25, ids=[2])
        if frame == 30:
            dogs.remove(ids=[1])
            dogs.add(1, root_xz_m=[[2.0, -1.0]])
            postures.request("sit", 20, ids=[3])

    def waiting_across(dogs, postures, frame):
        if frame == 34:
            postures.request("sit", 30, ids=[0], variation=0.5)
            postures.request("lie", 20, ids=[2], seed=4)

    def sampled_after(dogs, postures, frame):
        if frame == 50:  # after the restore, from the restored generator
            dogs.transition_to("sit", 20, variation=1.0)
        if frame == 150:
            dogs.transition_to("lie", 25, ids=[1], variation=1.0)

    return {
        1: (path_case, 25, on_path),
        2: (request_then_remove, 34, trotting),
        3: (remove_and_add, 31, trotting),
        4: (waiting_across, 36, trotting),
        5: (sampled_after, 40, trotting),
    }[case]


def make(tiny_model, count: int = 3):
    """A controller as a game builds it to load a save: the same model, settings and count."""
    rtn = FIXTURES / "tiny_rtn_noise_step.onnx"  # samples transitions (variation)
    dogs = Controller(MotionModel(tiny_model), count=count, transition_model=TransitionModel(rtn))
    return dogs, PostureRequests(dogs)


def step(dogs, postures, events, control, frame) -> tuple:
    events(dogs, postures, frame)
    postures.step(control(dogs, frame))
    x = dogs._buffers.inputs["x"].copy()  # the network's input this step
    return x, dogs.display_positions.copy(), dogs.display_rotations.copy()


@pytest.mark.parametrize("case", [1, 2, 3, 5])
def test_a_restored_game_steps_on_bit_for_bit(tiny_model, case):
    events, save_at, control = case_events(case)
    unbroken, unbroken_postures = make(tiny_model)
    for frame in range(save_at):
        step(unbroken, unbroken_postures, events, control, frame)
    saved = pickle.dumps(unbroken.get_state())
    if case in (2, 3):
        assert unbroken_postures.waiting().any()  # a request is waiting in the save
    restored, restored_postures = make(tiny_model, unbroken.count)
    for frame in range(7):  # a controller that went elsewhere first
        restored_postures.step(trotting(restored, frame + 99))
    restored.set_state(pickle.loads(saved))
    for frame in range(save_at, save_at + STEPS_AFTER):
        a = step(unbroken, unbroken_postures, events, control, frame)
        b = step(restored, restored_postures, events, control, frame)
        for one, other in zip(a, b, strict=True):
            assert np.array_equal(one, other), f"frame {frame}"
    assert np.array_equal(unbroken.ids, restored.ids)
    assert unbroken.get_state()["sha256"] == restored.get_state()["sha256"]


def test_a_waiting_posture_request_survives_a_restore_in_a_fresh_process(tiny_model, tmp_path):
    events, save_at, control = case_events(4)
    unbroken, postures = make(tiny_model)
    for frame in range(save_at):
        step(unbroken, postures, events, control, frame)
    assert postures.waiting().tolist() == [True, False, True]
    (tmp_path / "save.pickle").write_bytes(pickle.dumps(unbroken.get_state()))
    shown = []
    started = 0
    for frame in range(save_at, save_at + STEPS_AFTER):
        events(unbroken, postures, frame)
        started += len(postures.step(control(unbroken, frame)))
        shown.append(unbroken.display_positions.copy())
    assert started == 2  # the sit and the lie both started after the save
    np.save(tmp_path / "unbroken.npy", np.array(shown))
    script = textwrap.dedent(
        f"""
        import pickle, sys
        import numpy as np
        sys.path.insert(0, {str(FIXTURES.parent)!r})
        from test_restore_cases import case_events, make
        from pathlib import Path
        events, save_at, control = case_events(4)
        dogs, postures = make(Path({str(tiny_model)!r}))
        dogs.set_state(pickle.loads(Path({str(tmp_path / "save.pickle")!r}).read_bytes()))
        assert postures.waiting().tolist() == [True, False, True]
        shown = []
        for frame in range(save_at, save_at + {STEPS_AFTER}):
            events(dogs, postures, frame)
            postures.step(control(dogs, frame))
            shown.append(dogs.display_positions.copy())
        np.save({str(tmp_path / "restored.npy")!r}, np.array(shown))
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, cwd=tmp_path)
    restored = np.load(tmp_path / "restored.npy")
    assert np.array_equal(restored, np.load(tmp_path / "unbroken.npy"))


def test_a_snapshot_with_a_bad_waiting_request_is_refused(tiny_model):
    """The waiting requests are checked field by field like the rest, before anything
    changes."""
    from canis.runtime import snapshot

    events, save_at, control = case_events(4)
    dogs, postures = make(tiny_model)
    for frame in range(save_at):
        step(dogs, postures, events, control, frame)
    keys = ("layout", "scalars", "arrays", "rng", "postures")
    for field, value, message in [
        ("dog_id", 9, "postures.dog_id names a dog not in the snapshot"),
        ("frames", 500, "postures.frames must be"),
        ("target_name", "fly", r"postures.target_name names no keyframe of the library: \['fly'\]"),
        ("variation", np.nan, "postures.variation holds non-finite values"),
        ("action", 17, "postures.action is not an action index"),
    ]:
        bad = dogs.get_state()
        bad["postures"][field][0] = value
        bad["sha256"] = snapshot._digest(*(bad[k] for k in keys))
        before = dogs.get_state()["sha256"]
        with pytest.raises(ValueError, match=message):
            dogs.set_state(bad)
        assert dogs.get_state()["sha256"] == before and postures.waiting().any()


def test_a_waiting_request_seeded_by_a_generator_cannot_be_saved(tiny_model):
    """A Generator has no place in a plain snapshot: get_state names the dog, and the seed
    to give instead; nothing changes."""
    dogs, postures = make(tiny_model)
    for frame in range(30):
        postures.step(trotting(dogs, frame))
    postures.request("sit", 20, ids=[1], seed=np.random.default_rng(0))
    assert postures.waiting().tolist() == [False, True, False]
    with pytest.raises(ValueError, match=r"get_state: dog 1's waiting posture request has seed"):
        dogs.get_state()
    postures.cancel(ids=[1])
    postures.request("sit", 20, ids=[1], seed=2**40)
    assert dogs.get_state()["postures"]["seed"].tolist() == [2**40]

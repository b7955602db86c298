"""Stable dog ids (runtime/dog_ids.py): add() returns ids that survive every remove and are
never reused; per-dog calls take ids= as they take rows; an unknown id is a one-line error
with nothing changed; ids are in the snapshot and in events(); what follows a dog (its
waiting posture request, its transition, its foot locks) follows it through add and remove."""

from __future__ import annotations

import re

import numpy as np
import pytest
from canis.runtime.controller import Controller
from canis.runtime.dog_ids import UnknownDogIdError
from canis.runtime.inference import MotionModel
from canis.runtime.transition import TransitionModel
from canis.runtime.transition_requests import PostureRequests
from conftest import moving


@pytest.fixture(scope="module")
def model(tiny_model):
    return MotionModel(tiny_model)


def test_ids_survive_removes_and_are_never_reused(model):
    dogs = Controller(model, count=3)
    assert dogs.ids.tolist() == [0, 1, 2] and dogs.ids.dtype == np.int64
    dogs.remove(ids=[1])
    assert dogs.ids.tolist() == [0, 2]
    added = dogs.add(2)
    assert added.dtype == np.int64 and added.tolist() == [3, 4]  # 1 is not given again
    dogs.remove([0])  # by row, as before
    assert dogs.ids.tolist() == [2, 3, 4]
    assert dogs.rows([4, 2]).tolist() == [2, 0] and dogs.rows(3).tolist() == [1]
    dogs.remove(ids=dogs.ids[:2])
    assert dogs.add(1).tolist() == [5] and dogs.ids.tolist() == [4, 5]
    with pytest.raises(ValueError, match="read-only"):
        dogs.ids[0] = 9  # ids are given, not set


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda d: d.rows([7]), "rows: no dog has id 7 (removed, or never given"),
        (lambda d: d.remove(ids=[0, 7]), "remove: no dog has id 7 "),
        (lambda d: d.transition_to("sit", ids=[1]), "transition_to: no dog has id 1 "),
        (lambda d: d.reset(ids=[1]), "reset: no dog has id 1 "),
        (lambda d: d.look_at([0, 0, 1], ids=[1, 8]), "look_at: no dog has id 1, 8 "),
        (lambda d: PostureRequests(d).request("sit", ids=[1]), "request: no dog has id 1 "),
        (lambda d: PostureRequests(d).cancel(ids=[1]), "cancel: no dog has id 1 "),
    ],
)
def test_an_unknown_id_is_a_one_line_error_and_nothing_changes(model, tiny_rtn, call, message):
    dogs = Controller(model, count=3, transition_model=TransitionModel(tiny_rtn), seed=1)
    dogs.remove(ids=[1])
    for _ in range(5):
        dogs.step(moving(2))
    before = dogs.get_state()["sha256"]
    with pytest.raises(UnknownDogIdError, match="^" + re.escape(message)) as error:
        call(dogs)
    assert isinstance(error.value, KeyError) and isinstance(error.value, ValueError)
    assert "\n" not in str(error.value) and not str(error.value).startswith("'")
    assert dogs.get_state()["sha256"] == before


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda d: d.rows([0, 0]), r"rows: ids \[0, 0\] names a dog twice"),
        (lambda d: d.rows([0.5]), r"rows: ids must be dog ids \(whole numbers\)"),
        (lambda d: d.remove(), r"remove: indices must be dog indices or a boolean mask"),
        (
            lambda d: d.transition_to("sit", characters=[0], ids=[0]),
            r"transition_to: give characters \(rows\) or ids, not both",
        ),
        (lambda d: d.remove(ids=[0, 1, 2]), r"remove: \[0, 1, 2\] would leave no dog"),
    ],
)
def test_bad_ids_are_refused_with_nothing_changed(model, tiny_rtn, call, message):
    dogs = Controller(model, count=3, transition_model=TransitionModel(tiny_rtn))
    before = dogs.get_state()["sha256"]
    with pytest.raises(ValueError, match=message):
        call(dogs)
    assert dogs.get_state()["sha256"] == before


def test_calls_by_id_do_what_the_same_calls_by_row_do(model, tiny_rtn):
    """reset, transition_to, look_at, PostureRequests.request/cancel and remove by ids leave
    the same state as by the rows those ids are at (after a remove has moved them)."""

    def run(by_id: bool):
        dogs = Controller(model, count=5, transition_model=TransitionModel(tiny_rtn), seed=2)
        postures = PostureRequests(dogs)
        dogs.remove([1])  # ids [0, 2, 3, 4] at rows [0, 1, 2, 3]
        for _ in range(10):
            postures.step(moving(4, 1.5))
        name = (
            (lambda ids, rows: {"ids": ids}) if by_id else (lambda ids, rows: {"characters": rows})
        )
        dogs.reset(root_xz_m=[[1.0, 2.0]], **name([3], [2]))
        start = dogs.transition_to("sit", 20, **name([2], [1]))
        assert start.ids.tolist() == [2] and start.characters.tolist() == [1]
        dogs.look_at([1.0, 0.4, 2.0], 0.8, **name([4, 0], [3, 0]))
        postures.request("lie", 20, **name([4, 0], [3, 0]))
        postures.cancel(**name([0], [0]))
        for _ in range(5):
            postures.step(moving(4, 1.5))
        if by_id:
            dogs.remove(ids=[3])
        else:
            dogs.remove([2])
        return dogs.get_state()["sha256"], postures.waiting().tolist()

    assert run(True) == run(False)


def test_ids_and_the_next_id_are_in_the_snapshot(model):
    unbroken = Controller(model, count=3)
    unbroken.remove(ids=[0])
    unbroken.add(1)
    saved = unbroken.get_state()
    restored = Controller(model, count=3)  # ids [0, 1, 2], next 3
    restored.set_state(saved)
    assert restored.ids.tolist() == unbroken.ids.tolist() == [1, 2, 3]
    assert restored.add(1).tolist() == unbroken.add(1).tolist() == [4]


@pytest.mark.parametrize(
    "tamper, message",
    [
        (lambda s: s["arrays"]["state.dog_id"].__setitem__(0, 2), "dog ids must increase"),
        (lambda s: s["scalars"].__setitem__("next_dog_id", 2), r"each in \[0, 2\)"),
        (lambda s: s["scalars"].__setitem__("next_dog_id", -1), "next_dog_id must be a whole"),
        (lambda s: s["arrays"]["state.dog_id"].__setitem__(0, -3), "dog ids must increase"),
    ],
)
def test_a_snapshot_with_bad_ids_is_refused(model, tamper, message):
    from canis.runtime import snapshot

    dogs = Controller(model, count=3)
    bad = dogs.get_state()
    tamper(bad)
    keys = ("layout", "scalars", "arrays", "rng", "postures")
    bad["sha256"] = snapshot._digest(*(bad[k] for k in keys))
    before = dogs.get_state()["sha256"]
    with pytest.raises(ValueError, match=message):
        dogs.set_state(bad)
    assert dogs.get_state()["sha256"] == before


def test_events_name_each_dog_by_row_and_id_and_match_dogs_through_add_and_remove(model, tiny_rtn):
    """A removed dog's row taken by the next dog did not make a gait or transition event for
    it: events() matches the last call's readouts by id."""
    dogs = Controller(model, count=3, transition_model=TransitionModel(tiny_rtn))
    seen_ids = set()
    for frame in range(150):
        if frame == 60:
            dogs.transition_to("sit", 20, ids=[2])
        if frame == 62:
            dogs.remove(ids=[0])  # dog 2 (in transition) moves to row 1
            dogs.add(1)
        dogs.step(moving(dogs.count, 1.5))
        events = dogs.events()
        for kind in ("footfalls", "transitions", "gaits"):
            records = events[kind]
            assert np.array_equal(records["id"], dogs.ids[records["dog"]])
            seen_ids |= set(records["id"].tolist())
        if frame == 62:  # no dog's readouts changed by the renumbering itself
            assert not len(events["transitions"])
        if frame == 60:
            assert events["transitions"]["id"].tolist() == [2]
    assert {1, 2, 3} <= seen_ids  # the dog added has its footfalls too


def test_a_transition_and_foot_locks_follow_their_dog_through_remove_and_add(model, tiny_rtn):
    """Dog 2's transition and its foot locks stay its own when dog 0 goes and a dog comes:
    it moves as a controller that never had them moves it."""

    from canis.runtime.assets import shipped_model_path

    shipped = MotionModel(shipped_model_path())  # the tiny model's paws hardly touch down

    def dogs(count):
        return Controller(shipped, count=count, transition_model=TransitionModel(), foot_lock=True)

    changed, reference = dogs(3), dogs(2)
    reference.reset(root_xz_m=changed.root_xz_m[1:])
    removed_at = None
    for frame in range(90):
        if frame == 30:
            changed.transition_to("lie", 30, ids=[2])
            reference.transition_to("lie", 30, characters=[1])
        # Dog 0 goes at the first frame from 40 on that dog 1 (trotting) holds a paw, while
        # dog 2's transition plays (to frame 60).
        if removed_at is None and 40 <= frame < 55 and changed.foot_lock.rows.holding[1].any():
            removed_at, rows = frame, changed.foot_lock.rows
            locks = rows.locked_xz_m[1].copy(), rows.holding[1].copy()
            changed.remove(ids=[0])
            changed.add(1, root_xz_m=[[4.0, 0.0]])
            assert changed.in_transition()[changed.rows(2)].all()
            now = changed.rows(1)[0]
            assert np.array_equal(changed.foot_lock.rows.locked_xz_m[now], locks[0])
            assert np.array_equal(changed.foot_lock.rows.holding[now], locks[1])
        n = changed.count
        changed.step(moving(n))
        reference.step(moving(2))
        kept = changed.rows([1, 2]) if removed_at is not None else [1, 2]
        assert np.allclose(changed.display_positions[kept], reference.display_positions, atol=1e-4)
        assert np.array_equal(changed.in_transition()[kept], reference.in_transition())
    assert removed_at is not None, "dog 1 trotted frames 40-54 without a paw held"

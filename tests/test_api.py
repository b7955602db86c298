"""The API a game uses (issue 23): dogs added and removed, per-dog reset, named actions, and
shape errors that name the argument and the number of dogs (issue 20 defect 7)."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
from canis.runtime.actions import Action, action_indices
from canis.runtime.controller import Controller
from canis.runtime.inference import MotionModel
from canis.runtime.trajectory import ControlState
from canis.runtime.transition import TransitionModel
from canis.runtime.transition_player import LEAD_FRAMES
from conftest import moving


@pytest.fixture(scope="module")
def model(tiny_model):
    return MotionModel(tiny_model)


def test_count_zero_is_a_one_line_error(model):
    with pytest.raises(ValueError, match=r"count must be a whole number of dogs >= 1, got 0"):
        Controller(model, count=0)


@pytest.mark.parametrize(
    "field, value, expected",
    [
        ("velocity_mps", np.zeros((4, 2)), r"velocity_mps must have shape \(3, 2\) for 3 dog"),
        ("facing_yaw_rad", np.zeros(2), r"facing_yaw_rad must have shape \(3,\) for 3 dog"),
        ("action", np.zeros(4, dtype=int), r"action must have shape \(3,\) for 3 dog"),
    ],
)
def test_control_of_the_wrong_shape_names_the_argument_and_n(model, field, value, expected):
    controller = Controller(model, count=3)
    control = moving(3)
    setattr(control, field, value)
    with pytest.raises(ValueError, match=expected):
        controller.step(control)
    assert controller.frame == 0


def test_actions_by_name_enum_or_index_and_stand_is_a_deprecated_beg():
    assert action_indices(["idle", Action.MOVE, 3, "beg", "get_up"]).tolist() == [0, 1, 3, 4, 0]
    with pytest.warns(DeprecationWarning, match="'beg'"):
        assert action_indices(["stand"]).tolist() == [4]
    with pytest.raises(ValueError, match="unknown action 'fly'"):
        action_indices(["fly"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ControlState.single((0, 1), 0.0, "beg").validated(1).action.tolist() == [4]


def test_named_actions_step(model):
    controller = Controller(model, count=2)
    controller.step(ControlState(np.zeros((2, 2)), np.zeros(2), np.array(["sit", "move"])))
    assert controller.frame == 1


def test_added_dogs_move_like_dogs_that_were_there_from_the_start(model):
    grown, whole = Controller(model, count=1), Controller(model, count=3)
    indices = grown.add(2, root_xz_m=[[0, 0], [0, 0]])
    assert indices.tolist() == [1, 2] and grown.count == 3
    for _ in range(20):
        grown.step(moving(3))
        whole.step(moving(3))
    assert np.allclose(grown.display_positions, whole.display_positions, atol=1e-4)


def test_removed_dogs_leave_the_others_unchanged(model):
    smaller, reference = Controller(model, count=3), Controller(model, count=2)
    control = ControlState(np.array([[0, 1.0], [1.0, 0], [0, 2.0]]), np.zeros(3), np.ones(3, int))
    kept = [0, 2]
    for _ in range(10):
        smaller.step(control)
        reference.step(ControlState(control.velocity_mps[kept], np.zeros(2), np.ones(2, int)))
    smaller.remove([1])
    assert smaller.count == 2 and smaller.display_positions.shape[0] == 2
    for _ in range(10):
        smaller.step(ControlState(control.velocity_mps[kept], np.zeros(2), np.ones(2, int)))
        reference.step(ControlState(control.velocity_mps[kept], np.zeros(2), np.ones(2, int)))
    assert np.allclose(smaller.display_positions, reference.display_positions, atol=1e-4)


def test_buffers_grow_by_capacity_not_per_add(model):
    controller = Controller(model, count=1)
    storages = set()
    for _ in range(7):
        controller.add(1)
        storages.add(id(controller._buffers.storage["x"]))
        controller.step(moving(controller.count))
    assert controller.count == 8 and len(storages) <= 3  # 2, 4, 8: doubled, not per dog
    controller.remove(np.arange(1, 8))
    controller.step(moving(1))
    assert controller._buffers.inputs["x"].shape == (1, 480)


def test_bad_add_and_remove_are_one_line_errors_and_change_nothing(model):
    controller = Controller(model, count=2, max_dogs=3)
    controller.step(moving(2))
    before = controller.state.copy()
    with pytest.raises(ValueError, match=r"names a dog that does not exist \(there are 2"):
        controller.remove([5])
    with pytest.raises(ValueError, match="would leave no dog"):
        controller.remove([0, 1])
    with pytest.raises(ValueError, match="past max_dogs 3"):
        controller.add(2)
    with pytest.raises(ValueError, match=r"add: root_xz_m must have shape \(1, 2\) for 1 dog"):
        controller.add(1, root_xz_m=[1.0, 2.0, 3.0])
    assert controller.count == 2
    assert np.array_equal(controller.state.root_xz_m, before.root_xz_m)


def test_reset_of_some_dogs_by_index_or_mask(model):
    controller = Controller(model, count=3)
    for _ in range(10):
        controller.step(moving(3))
    others = controller.state.root_xz_m.copy()
    controller.reset(root_xz_m=[[5.0, 5.0]], characters=np.array([False, True, False]))
    assert np.allclose(controller.state.root_xz_m[1], [5, 5])
    assert np.array_equal(controller.state.root_xz_m[[0, 2]], others[[0, 2]])
    with pytest.raises(ValueError, match=r"characters as a mask must have shape \(3,\) for 3"):
        controller.reset(characters=[True, False])


def test_add_and_remove_during_a_transition(model, tiny_rtn):
    controller = Controller(model, count=2, transition_model=TransitionModel(tiny_rtn))
    for _ in range(30):
        controller.step(moving(2))
    controller.transition_to("sit", 20, characters=[1])
    controller.add(1)
    for _ in range(3):
        controller.step(moving(3))
    controller.remove([0])
    assert controller.in_transition().tolist() == [True, False]
    for _ in range(40):
        controller.step(moving(2))
    assert not controller.in_transition().any()
    assert np.all(np.isfinite(controller.display_positions))


def test_transition_after_a_nan_recovery(model, tiny_rtn):
    """Issue 20 defect 6: after a dog's network output turned NaN and it kept its last good
    state, its transition context must not hold the bad frame, so transition_to works."""

    class Faulty:
        def __init__(self, inner):
            self.inner, self.calls = inner, 0
            self.kind, self.experts = inner.kind, inner.experts

        def bind(self, batch, reuse=None):
            return self.inner.bind(batch, reuse)

        def run_bound(self, buffers):
            self.calls += 1
            outputs = self.inner.run_bound(buffers)
            if self.calls == 12:
                outputs["y"][1] = np.nan
            return outputs

    controller = Controller(Faulty(model), count=2, transition_model=TransitionModel(tiny_rtn))
    for _ in range(13):
        controller.step(moving(2))
    assert controller.non_finite_events == 1
    assert np.all(np.isfinite(controller.state.frame_history))
    controller.transition_to("sit", 20)
    for _ in range(40):
        controller.step(moving(2))
    assert np.all(np.isfinite(controller.display_positions))


def test_a_restored_snapshot_continues_bit_for_bit(model, tiny_rtn):
    import copy
    import pickle

    def run(controller, frames, start=0):
        for frame in range(start, start + frames):
            turn = np.array([[np.sin(frame / 20), 1.0], [1.0, 0.0]])
            controller.step(ControlState(turn, np.zeros(2), np.array([1, 1])))

    unbroken = Controller(model, count=2, transition_model=TransitionModel(tiny_rtn))
    run(unbroken, 30)
    unbroken.transition_to("sit", 20, characters=[1])
    into = LEAD_FRAMES + 5  # saved in the transition's playback, its generation under way
    run(unbroken, into, 30)
    saved = pickle.loads(pickle.dumps(unbroken.get_state()))
    copy.deepcopy(saved)
    run(unbroken, 40, 30 + into)

    restored = Controller(model, count=2, transition_model=TransitionModel(tiny_rtn))
    run(restored, 5)  # somewhere else entirely
    restored.set_state(saved)
    run(restored, 40, 30 + into)
    assert restored.frame == unbroken.frame
    assert np.array_equal(restored.display_positions, unbroken.display_positions)
    assert np.array_equal(restored.state.root_xz_m, unbroken.state.root_xz_m)


def test_a_snapshot_for_another_controller_or_corrupted_is_refused(model):
    three = Controller(model, count=3)
    saved = Controller(model, count=2).get_state()
    before = three.get_state()
    with pytest.raises(ValueError, match=r"another controller: dogs 2 \(here 3\)"):
        three.set_state(saved)
    good = Controller(model, count=3).get_state()
    good["arrays"]["state.root_xz_m"][0, 0] = 7.0
    with pytest.raises(ValueError, match="corrupted"):
        three.set_state(good)
    with pytest.raises(ValueError, match="not a canis controller snapshot"):
        three.set_state({"hello": 1})
    older = {**Controller(model, count=3).get_state(), "format": 1}
    with pytest.raises(
        ValueError,
        match=r"format 1 \(an older runtime saved it\); this runtime reads format 5 only$",
    ):
        three.set_state(older)
    after = three.get_state()
    assert after["sha256"] == before["sha256"]


def test_readouts_gait_footfalls_ground_bounds_and_actions():
    """The shipped dog (the tiny test model barely lifts a paw) trotting on hills."""
    from canis.runtime.assets import shipped_model_path
    from canis.runtime.readouts import GAIT_LATENCY_S, PAW_ORDER
    from canis.runtime.terrain import procedural

    terrain = procedural("hills")
    controller = Controller(MotionModel(shipped_model_path()), count=2, terrain=terrain)
    assert controller.gaits() == ("none", "none") and PAW_ORDER == ("LF", "RF", "LH", "RH")
    downs = lifts = 0
    for _ in range(90):
        controller.step(moving(2, 1.5))
        touch_down, lift_off = controller.footfalls()
        downs, lifts = downs + touch_down.sum(), lifts + lift_off.sum()
        assert touch_down.shape == (2, 4) and not np.any(touch_down & lift_off)
    assert downs > 0 and lifts > 0 and GAIT_LATENCY_S == 0.5
    assert all(g in ("walk", "pace", "trot", "canter") for g in controller.gaits())
    heights = controller.ground_height_m()
    assert np.allclose(heights, terrain.sample(controller.root_xz_m)[0], atol=1e-6)
    assert np.allclose(controller.root_world_m()[:, 1], heights)
    box = controller.bounds_m()
    shown, _ = controller.display_pose()
    assert box.shape == (2, 2, 3) and np.all(box[:, :1] <= shown) and np.all(shown <= box[:, 1:])
    assert np.allclose(controller.actions().sum(axis=1), 1.0, atol=1e-6)


def test_display_pose_interpolates_between_steps(model):
    from canis.runtime.rotations import quat_angle_rad

    controller = Controller(model, count=1)
    for _ in range(5):
        controller.step(moving(1))
    before = controller.display_pose()
    controller.step(moving(1))
    after = controller.display_pose()
    for alpha, pose in ((0.0, before), (1.0, after)):
        positions, rotations = controller.display_pose(alpha)
        # Slerp takes the shortest path: a rotation may come back as its negative.
        assert np.allclose(positions, pose[0]) and np.all(quat_angle_rad(rotations, pose[1]) < 1e-5)
    positions, rotations = controller.display_pose(alpha=0.5)
    assert np.allclose(positions, 0.5 * (before[0] + after[0]))
    half = quat_angle_rad(before[1], rotations)
    assert np.allclose(half, quat_angle_rad(rotations, after[1]), atol=1e-6)
    with pytest.raises(ValueError, match=r"alpha must be within \[0, 1\], got 1.5"):
        controller.display_pose(alpha=1.5)


def test_transition_to_takes_an_action_by_name(model, tiny_rtn):
    controller = Controller(model, transition_model=TransitionModel(tiny_rtn))
    controller.step(moving(1))
    controller.transition_to("beg", 20, action=Action.BEG)
    with pytest.raises(ValueError, match="unknown action 'fly'"):
        controller.transition_to("sit", 20, action="fly")


def test_the_small_game_example_runs():
    """examples/small_game.py, as a game programmer runs it (docs/EMBEDDING.md)."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    result = subprocess.run(
        [sys.executable, "examples/small_game.py", "4.5"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=root,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "dog [2] joined" in result.stdout and "reloaded the save of step 120" in result.stdout
    assert "DeprecationWarning" not in result.stderr


NAN = float("nan")
MASK_3 = np.array([True, False, True])  # a right mask: two dogs


def control(**fields) -> ControlState:
    base = dict(velocity_mps=np.zeros((3, 2)), facing_yaw_rad=np.zeros(3), action=np.ones(3, int))
    return ControlState(**{**base, **fields})


# (call on a 3-dog controller with transitions, what the one-line message must say)
BAD_CALLS = {
    "step velocity (4, 2)": (
        lambda c: c.step(control(velocity_mps=np.zeros((4, 2)))),
        r"^step: ControlState.velocity_mps must have shape \(3, 2\) for 3 dog\(s\); got \(4, 2\)$",
    ),
    "step velocity (3,)": (
        lambda c: c.step(control(velocity_mps=np.zeros(3))),
        r"ControlState.velocity_mps must have shape \(3, 2\) for 3 dog\(s\); got \(3,\)",
    ),
    "step velocity NaN": (
        lambda c: c.step(control(velocity_mps=[[0, 1], [NAN, 0], [0, 0]])),
        r"^step: ControlState.velocity_mps is not finite \(NaN or inf\) in row\(s\) \[1\]$",
    ),
    "step facing (2,)": (
        lambda c: c.step(control(facing_yaw_rad=np.zeros(2))),
        r"ControlState.facing_yaw_rad must have shape \(3,\) for 3 dog\(s\); got \(2,\)",
    ),
    "step facing inf": (
        lambda c: c.step(control(facing_yaw_rad=[0, 0, np.inf])),
        r"ControlState.facing_yaw_rad is not finite \(NaN or inf\) in row\(s\) \[2\]",
    ),
    "step action (4,)": (
        lambda c: c.step(control(action=np.ones(4, int))),
        r"ControlState.action must have shape \(3,\) for 3 dog\(s\); got \(4,\)",
    ),
    "step action name": (
        lambda c: c.step(control(action=["move", "fly", "sit"])),
        r"^step: ControlState.action: unknown action 'fly'",
    ),
    "step future (3, 5, 2)": (
        lambda c: c.step(control(future_xz_m=np.zeros((3, 5, 2)))),
        r"ControlState.future_xz_m must have shape \(3, 6, 2\) for 3 dog\(s\); got \(3, 5, 2\)",
    ),
    "reset root (2, 2)": (
        lambda c: c.reset(root_xz_m=np.zeros((2, 2))),
        r"^reset: root_xz_m must have shape \(3, 2\) for 3 dog\(s\); got \(2, 2\)$",
    ),
    "reset root for a mask": (
        lambda c: c.reset(root_xz_m=np.zeros((3, 2)), characters=MASK_3),
        r"^reset: root_xz_m must have shape \(2, 2\) for 2 dog\(s\); got \(3, 2\)$",
    ),
    "reset yaw NaN": (
        lambda c: c.reset(yaw_rad=[0, NAN, 0]),
        r"^reset: yaw_rad is not finite \(NaN or inf\) in row\(s\) \[1\]$",
    ),
    "reset mask (2,)": (
        lambda c: c.reset(characters=[True, False]),
        r"^reset: characters as a mask must have shape \(3,\) for 3 dog\(s\); got \(2,\)$",
    ),
    "reset index 3": (
        lambda c: c.reset(characters=[3]),
        r"^reset: characters \[3\] names a dog that does not exist \(there are 3",
    ),
    "reset start pose": (
        lambda c: c.reset(start_pose="fly"),
        r"^reset: no start pose 'fly'",
    ),
    "add root (1, 2) for 2": (
        lambda c: c.add(2, root_xz_m=np.zeros((1, 2))),
        r"^add: root_xz_m must have shape \(2, 2\) for 2 dog\(s\); got \(1, 2\)$",
    ),
    "add yaw NaN": (
        lambda c: c.add(1, yaw_rad=[NAN]),
        r"^add: yaw_rad is not finite",
    ),
    "add count 1.5": (lambda c: c.add(1.5), r"^add: count must be a whole number of dogs"),
    "remove index 3": (
        lambda c: c.remove([3]),
        r"^remove: indices \[3\] names a dog that does not exist \(there are 3",
    ),
    "remove mask (4,)": (
        lambda c: c.remove(np.zeros(4, bool)),
        r"^remove: indices as a mask must have shape \(3,\) for 3 dog\(s\); got \(4,\)$",
    ),
    "remove twice": (lambda c: c.remove([1, 1]), r"^remove: indices \[1, 1\] names a dog twice$"),
    "remove floats": (
        lambda c: c.remove([0.5]),
        r"^remove: indices must be dog indices or a boolean mask of 3",
    ),
    "transition mask (2,)": (
        lambda c: c.transition_to("sit", characters=[True, True]),
        r"^transition_to: characters as a mask must have shape \(3,\) for 3 dog\(s\)",
    ),
    "transition at (3, 2) for a mask": (
        lambda c: c.transition_to("sit", characters=MASK_3, at_xz_m=np.zeros((3, 2))),
        r"^transition_to: at_xz_m must have shape \(2, 2\) for 2 dog\(s\) \(or \(2,\) for all",
    ),
    "transition yaw NaN": (
        lambda c: c.transition_to("sit", yaw_rad=[0, 0, NAN]),
        r"^transition_to: yaw_rad is not finite",
    ),
    "complex velocity": (
        lambda c: c.step(ControlState(np.ones((3, 2)) * (1 + 1j), np.zeros(3), np.ones(3, int))),
        r"^step: ControlState.velocity_mps must be real numbers, got complex ones$",
    ),
    "string velocity": (
        lambda c: c.step(ControlState(np.full((3, 2), "a"), np.zeros(3), np.ones(3, int))),
        r"^step: ControlState.velocity_mps must be numbers, got \(3, 2\) of 'U'$",
    ),
    "infinite path": (
        lambda c: c.step(
            ControlState(np.zeros((3, 2)), np.zeros(3), np.ones(3, int), np.full((3, 6, 2), np.inf))
        ),
        r"^step: ControlState.future_xz_m has an infinite value",
    ),
    "transition variation 1e39": (
        lambda c: c.transition_to("sit", variation=1e39),
        r"^transition_to: variation must be a finite number within \[0, 1\], got 1e\+39$",
    ),
    "add 10**8 dogs": (
        lambda c: c.add(10**8),
        r"^add: 100000000 more dog\(s\) would make 100000003, past MAX_DOGS \(100000\)$",
    ),
    "transition frames 30.5": (
        lambda c: c.transition_to("sit", frames=30.5),
        r"^transition_to: frames must be a whole number, got 30.5$",
    ),
    "transition variation -1": (
        lambda c: c.transition_to("sit", variation=-1),
        r"^transition_to: variation must be a finite number within \[0, 1\], got -1$",
    ),
    "transition variation on a model without target noise": (
        lambda c: c.transition_to("sit", variation=0.5),
        r"^transition_to: variation 0.5 needs a transition model trained with target noise; "
        r".*tiny_rtn_step.onnx has no 'target_noise' input",
    ),
    "display alpha NaN": (
        lambda c: c.display_pose(alpha=NAN),
        r"^display_pose: alpha must be a finite number, got nan$",
    ),
    "display alpha 2": (
        lambda c: c.display_pose(alpha=2.0),
        r"^display_pose: alpha must be within \[0, 1\], got 2.0$",
    ),
}


BAD_TYPES = {
    "step(None)": (lambda c: c.step(None), r"^step: control must be a ControlState, got NoneType$"),
    "step(dict)": (lambda c: c.step({"velocity_mps": 1}), r"^step: control must be a ControlState"),
    "transition_to(5)": (
        lambda c: c.transition_to(5),
        r"^transition_to: target must be a keyframe's name \(stand, sit, lie, beg\) or a Keyframe",
    ),
}


@pytest.mark.parametrize("case", list(BAD_TYPES))
def test_calls_of_the_wrong_type_are_one_line_type_errors_and_change_nothing(model, case):
    """step(None) and transition_to(5) were AttributeErrors from deep inside."""
    call, message = BAD_TYPES[case]
    controller = Controller(model, count=3)
    controller.step(moving(3))
    before = controller.get_state()
    with pytest.raises(TypeError, match=message):
        call(controller)
    assert controller.get_state()["sha256"] == before["sha256"]


def test_a_step_that_fails_in_the_network_leaves_every_dog_as_it_was(model, monkeypatch):
    """An exception inside inference left the step half-applied (the commands advanced), and
    the motion then differed by 3 mm; now the step is all or nothing."""
    import canis.runtime.controller as controller_module

    controller = Controller(model, count=2)
    for _ in range(20):
        controller.step(moving(2))
    before = controller.get_state()

    def failing(*args, **kwargs):
        raise RuntimeError("the inference provider failed")

    monkeypatch.setattr(controller_module, "infer", failing)
    with pytest.raises(RuntimeError):
        controller.step(moving(2, 2.5))
    assert controller.get_state()["sha256"] == before["sha256"]


@pytest.mark.parametrize(
    "corrupt, message",
    [
        (lambda s: s["arrays"]["state.root_xz_m"].__setitem__((0, 0), np.nan), "non-finite"),
        (lambda s: s["scalars"].__setitem__("count", 5), "scalars must be exactly"),
        (lambda s: s["scalars"].__setitem__("frame", "abc"), "scalar frame must be a whole"),
        (
            lambda s: s["arrays"].__setitem__(
                "state.root_xz_m", s["arrays"]["state.root_xz_m"].astype(np.float16)
            ),
            "state.root_xz_m must be (3, 2) float64, got (3, 2) float16",
        ),
    ],
)
def test_a_snapshot_is_checked_field_by_field_not_trusted_for_its_digest(model, corrupt, message):
    """set_state trusted anything whose SHA-256 matched, and anyone can recompute it: a NaN
    root was accepted, and any scalar was set as an attribute (count=5, model=None)."""
    from canis.runtime import snapshot

    three = Controller(model, count=3)
    three.step(moving(3))
    before = three.get_state()
    bad = Controller(model, count=3).get_state()
    corrupt(bad)
    bad["sha256"] = snapshot._digest(
        *(bad[k] for k in ("layout", "scalars", "arrays", "rng", "postures"))
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        three.set_state(bad)
    assert three.get_state()["sha256"] == before["sha256"]


def test_a_snapshot_of_dogs_on_a_path_loads_into_a_fresh_controller(model):
    """A save from dogs driven with future_xz_m (what follow_path gives) said "set_state:
    path_future_xz_m is in the snapshot but not here" in a fresh controller."""
    walked = Controller(model, count=2)
    path = np.cumsum(np.full((2, 6, 2), 0.1), axis=1)
    for _ in range(5):
        walked.step(ControlState(np.zeros((2, 2)), np.zeros(2), np.ones(2, int), path))
    saved = walked.get_state()
    fresh = Controller(model, count=2)
    fresh.set_state(saved)
    assert fresh.get_state()["sha256"] == saved["sha256"]


@pytest.mark.parametrize("case", list(BAD_CALLS))
def test_bad_arguments_are_one_line_errors_naming_them_and_change_nothing(model, tiny_rtn, case):
    """Issue 23 item 6: every public call's array argument is checked (runtime/arguments.py,
    runtime/state.py); the message names the call, the argument and the number of dogs,
    and the controller is exactly as it was."""
    call, message = BAD_CALLS[case]
    controller = Controller(model, count=3, transition_model=TransitionModel(tiny_rtn))
    for _ in range(12):
        controller.step(moving(3))
    before = controller.get_state()
    with pytest.raises(ValueError, match=message) as raised:
        call(controller)
    assert "\n" not in str(raised.value)
    assert controller.count == 3 and controller.get_state()["sha256"] == before["sha256"]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"count": 0}, r"^Controller: count must be a whole number of dogs >= 1, got 0$"),
        (
            {"count": 3, "max_dogs": 2},
            r"^Controller: max_dogs must be None or a whole number >= count \(3\)",
        ),
        ({"tau": NAN}, r"^Controller: tau must be a finite number within \[0, 1\], got nan$"),
        ({"tau": 1.5}, r"^Controller: tau must be a finite number within \[0, 1\], got 1.5$"),
        ({"start_pose": "fly"}, r"^reset: no start pose 'fly'"),
        ({"count": 10**9}, r"^Controller: count 1000000000 is past MAX_DOGS \(100000\)$"),
        ({"terrain": 3}, r"^Controller: terrain must be None \(flat\), a Heightmap or a terrain"),
        ({"transition_model": 1}, r"^Controller: transition_model must be a TransitionModel"),
    ],
)
def test_bad_controller_arguments_are_one_line_errors(model, kwargs, message):
    """count=10**9 was numpy's allocation error; a terrain or transition model of another
    type failed at the first step."""
    with pytest.raises((ValueError, TypeError), match=message):
        Controller(model, **kwargs)


def test_a_terrain_can_be_given_by_name(model):
    dogs = Controller(model, terrain="hills")
    assert dogs.terrain is not None and dogs.terrain.heights_m.std() > 0


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ([[0, 0]], 1.0, [0, 0], 0.0),
            r"^follow_path: points must hold at least 2 \[x, z\] points",
        ),
        (
            ([[0, 0, 0], [1, 1, 1]], 1.0, [0, 0], 0.0),
            r"^follow_path: points must have shape \(any, 2\)",
        ),
        (
            ([[0, 0], [NAN, 1]], 1.0, [0, 0], 0.0),
            r"^follow_path: points is not finite \(NaN or inf\) in row\(s\) \[1\]$",
        ),
        (([[0, 0], [0, 1]], NAN, [0, 0], 0.0), r"^follow_path: speed_mps must be a finite number"),
        (
            ([[0, 0], [0, 1]], 1.0, [[0, 0]], 0.0),
            r"^follow_path: root_xz_m must have shape \(2,\) \(one dog's",
        ),
        (
            ([[0, 0], [0, 1]], 1.0, [0, 0], [0.0, 1.0]),
            r"^follow_path: root_yaw_rad must be a finite number",
        ),
    ],
)
def test_follow_path_names_a_bad_argument(args, message):
    from canis.runtime.control import follow_path

    with pytest.raises(ValueError, match=message):
        follow_path(*args)
    assert follow_path([[0, 0], [0, 5]], 1.0, np.array([0.1, 0.0]), np.float64(0.0)).gap_m > 0


def test_a_boolean_mask_works_wherever_indices_do(model, tiny_rtn):
    """reset, remove, transition_to and PostureRequests.request/cancel with a mask do what
    they do with the same dogs' indices."""
    from canis.runtime.transition_requests import PostureRequests

    def run(characters):
        controller = Controller(model, count=3, transition_model=TransitionModel(tiny_rtn), seed=0)
        for _ in range(12):
            controller.step(moving(3))
        controller.reset(root_xz_m=[[1.0, 2.0], [3.0, 4.0]], characters=characters)
        start = controller.transition_to("sit", 20, characters=characters)
        postures = PostureRequests(controller)
        postures.request("lie", 20, characters=characters)
        postures.cancel(characters)
        for _ in range(5):
            postures.step(moving(3))
        controller.remove(characters)
        return controller, start

    by_mask, mask_start = run(MASK_3)
    by_index, index_start = run([0, 2])
    assert by_mask.count == by_index.count == 1
    assert mask_start.characters.tolist() == index_start.characters.tolist() == [0, 2]
    assert by_mask.get_state()["sha256"] == by_index.get_state()["sha256"]


def test_bounds_hold_the_body_mesh_by_a_measured_margin():
    """bounds_m() pads the joints' box by readouts.BOUNDS_MARGIN_M: re-measured here from the
    shipped mesh (tools/bounds_margin.py), it must hold every vertex and be no more than
    the measurement rounded up to the cm."""
    from canis.runtime.readouts import BOUNDS_MARGIN_M
    from canis.tools.bounds_margin import measure

    measured = measure(seconds=3.0)
    assert np.all(measured <= BOUNDS_MARGIN_M), measured
    assert np.all(np.array(BOUNDS_MARGIN_M) - measured < 0.011), measured


def test_bounds_margin_is_checked_and_zero_gives_the_joints_box(model):
    controller = Controller(model, count=2)
    joints, _ = controller.display_pose()
    box = controller.bounds_m(margin_m=(0, 0, 0))
    assert np.allclose(box[:, 0], joints.min(axis=1)) and np.allclose(box[:, 1], joints.max(axis=1))
    padded = controller.bounds_m()
    assert np.allclose(padded[:, 1, 1] - box[:, 1, 1], 0.22)
    with pytest.raises(ValueError, match=r"bounds_m: margin_m must have shape \(3,\) \(below"):
        controller.bounds_m(margin_m=0.1)


def test_the_gait_readout_does_not_flicker_near_the_canter_speed():
    """A dog cantering at 1.53 m/s on average, its speed rising and falling by 0.2 m/s within
    each stride: this frame's speed against the classifier's 1.5 m/s flips the readout
    between walk and canter every half stride; the window's mean speed with the hysteresis
    band (readouts.canter_latch) holds it."""
    from canis.runtime.control import SPEED_TRACKING_WINDOW_FRAMES
    from canis.runtime.readouts import CANTER_MIN_SPEED_MPS, GAIT_WINDOW_FRAMES, canter_latch, gaits

    stride = 20
    frame = np.arange(GAIT_WINDOW_FRAMES)
    # Paws down 40% of the stride, a quarter stride apart: no trot or pace pairing.
    down = [(frame + offset) % stride < 8 for offset in (0, 5, 10, 15)]
    contacts = np.stack(down, axis=1)[None]
    assert gaits(contacts, np.array([True]), np.array([True])) == ("canter",)
    assert gaits(contacts, np.array([False]), np.array([True])) == ("walk",)

    t = np.arange(600)
    speeds = CANTER_MIN_SPEED_MPS + 0.03 + 0.2 * np.sin(2 * np.pi * t / stride)
    per_frame = [gaits(contacts, np.array([s >= CANTER_MIN_SPEED_MPS]), [True])[0] for s in speeds]
    latched, shown = np.array([False]), []
    for end in range(SPEED_TRACKING_WINDOW_FRAMES, len(t)):
        window = speeds[end - SPEED_TRACKING_WINDOW_FRAMES : end].mean()
        latched = canter_latch(latched, np.array([window]))
        shown.append(gaits(contacts, latched, [True])[0])
    changes = lambda names: sum(a != b for a, b in zip(names[:-1], names[1:], strict=True))  # noqa: E731
    assert changes(per_frame) > 50 and changes(shown) == 0
    # Past the band it changes, once.
    latched = canter_latch(latched, np.array([CANTER_MIN_SPEED_MPS + 0.11]))
    assert gaits(contacts, latched, [True]) == ("canter",)
    assert canter_latch(latched, np.array([CANTER_MIN_SPEED_MPS - 0.05])).tolist() == [True]


def test_a_restore_keeps_the_generator_sampled_transitions_draw_from(model, tiny_rtn):
    """transition_to(variation=1) without a seed after a restore differed by 7 cm from the
    unbroken run: the controller's random state was not in the snapshot."""
    from conftest import FIXTURES

    rtn = FIXTURES / "tiny_rtn_noise_step.onnx"

    def dogs():
        return Controller(model, count=2, transition_model=TransitionModel(rtn), seed=3)

    unbroken = dogs()
    for _ in range(10):
        unbroken.step(moving(2))
    saved = unbroken.get_state()
    unbroken.transition_to("sit", 20, variation=1.0)
    restored = dogs()
    restored.transition_to("lie", 20, variation=1.0)  # draws from its own generator
    restored.set_state(saved)
    restored.transition_to("sit", 20, variation=1.0)
    for _ in range(40):
        unbroken.step(moving(2))
        restored.step(moving(2))
    assert np.array_equal(unbroken.display_pose()[0], restored.display_pose()[0])
    bad = unbroken.get_state()
    bad["rng"] = {"bit_generator": "MT19937", "state": {}}
    from canis.runtime import snapshot

    bad["sha256"] = snapshot._digest(
        *(bad[k] for k in ("layout", "scalars", "arrays", "rng", "postures"))
    )
    with pytest.raises(ValueError, match="set_state: the snapshot's rng is not a PCG64 state"):
        unbroken.set_state(bad)


@pytest.mark.parametrize(
    "other, named",
    [
        ({"tau": 0.7}, "tau 0.5 (here 0.7)"),
        ({"foot_lock": True}, "foot_lock False (here True)"),
        ({"terrain": "hills"}, "terrain 'flat' (here 'heightmap"),
        ({"speed_tracking": False}, "speed_tracking True (here False)"),
    ],
)
def test_a_snapshot_names_the_setting_a_controller_differs_in(model, other, named):
    """A snapshot held no terrain, foot lock or tau, and loaded silently into a controller
    that differed in them (issue 63): it would not have continued as it did."""
    saved = Controller(model, count=2).get_state()
    differs = Controller(model, count=2, **other)
    before = differs.get_state()
    with pytest.raises(ValueError, match=re.escape(named)):
        differs.set_state(saved)
    assert differs.get_state()["sha256"] == before["sha256"]


def test_waiting_posture_requests_follow_their_dogs_through_add_and_remove(model, tiny_rtn):
    """add() or remove() dropped every waiting request (ask dog 2 to sit, remove dog 0, and
    nobody sat), and remove([0]); add(1) left the request on row 2, so the former dog 3 sat."""
    from canis.runtime.transition_requests import PostureRequests

    dogs = Controller(model, count=4, transition_model=TransitionModel(tiny_rtn))
    postures = PostureRequests(dogs)
    for _ in range(30):
        postures.step(moving(4, 1.5))
    postures.request("sit", 20, characters=[2])
    assert postures.waiting().tolist() == [False, False, True, False]
    dogs.remove([0])
    assert postures.waiting().tolist() == [False, True, False]  # the same dog, now row 1
    dogs.add(1)
    assert postures.waiting().tolist() == [False, True, False, False]
    dogs.remove([1])
    assert not postures.waiting().any()  # its dog is gone, and so is its request


def test_the_embedding_api_is_listed_and_named_in_units():
    """dir(canis.runtime) was empty (the exports are lazy), and ControlState.single took
    velocity_xz where every other call says velocity_mps."""
    import canis.runtime

    assert {"Controller", "ControlState", "MotionModel", "TransitionModel"} <= set(
        dir(canis.runtime)
    )
    single = ControlState.single(velocity_mps=(0.0, 1.1), action="move")
    assert single.velocity_mps.tolist() == [[0.0, 1.1]]
    with pytest.warns(DeprecationWarning, match="now velocity_mps"):
        old = ControlState.single(velocity_xz=(0.0, 1.1), action="move")
    assert old.velocity_mps.tolist() == [[0.0, 1.1]]


def test_gaits_for_all_dogs_at_once_read_as_the_classifier_does_dog_by_dog():
    """gaits() ran the mocap's classifier once per dog (150 us each, 39 ms for 256 dogs, five
    times the step); it now reads every dog in one pass, with the same answers."""
    from canis.runtime.readouts import (
        CANTER_MIN_SPEED_MPS,
        GAIT_LATENCY_FRAMES,
        GAIT_WINDOW_FRAMES,
        GAITS,
        NO_GAIT,
        NO_GAIT_NAME,
        classify_gaits,
        gaits,
    )

    rng = np.random.default_rng(8)
    n = 256
    phases = rng.uniform(0, 1, (n, 1, 4))
    duty = rng.uniform(0.2, 0.8, (n, 1, 1))
    t = np.arange(GAIT_WINDOW_FRAMES)[None, :, None] / rng.uniform(15, 40, (n, 1, 1))
    history = ((t + phases) % 1.0) < duty  # periodic footfalls, every paw its own phase
    history[::7] = rng.random((len(history[::7]), GAIT_WINDOW_FRAMES, 4)) < 0.5
    fast, moving = rng.random(n) < 0.5, rng.random(n) < 0.9
    expected = []
    for h, quick, on in zip(history, fast, moving, strict=True):
        speed = np.full(len(h), CANTER_MIN_SPEED_MPS if quick else 0.0)
        index = classify_gaits(h, speed, np.full(len(h), on))[GAIT_LATENCY_FRAMES]
        expected.append(NO_GAIT_NAME if index == NO_GAIT else GAITS[index])
    got = gaits(history, fast, moving)
    assert got == tuple(expected) and len(set(got)) >= 4


def test_events_give_footfalls_transitions_and_gait_changes_as_arrays():
    """Footfalls had to be polled, and nothing told a game a transition began or ended, or a
    gait changed (issue 63): events() gives each as records, once a step."""
    from canis.runtime.assets import shipped_model_path
    from canis.runtime.readouts import PAW_ORDER

    dogs = Controller(
        MotionModel(shipped_model_path()), count=2, transition_model=TransitionModel()
    )
    downs = started = ended = 0
    changes = []
    for frame in range(240):
        if frame == 120:
            dogs.transition_to("sit", 20, characters=[1])
        dogs.step(moving(2, 1.5))
        events = dogs.events()
        feet = events["footfalls"]
        touch_down, lift_off = dogs.footfalls()
        assert len(feet) == touch_down.sum() + lift_off.sum()
        assert np.array_equal(touch_down[feet["dog"], feet["paw"]], feet["touch_down"])
        paws = dogs.skeleton.group("paws")[feet["paw"]]
        assert np.array_equal(feet["position_m"], dogs.display_positions[feet["dog"], paws])
        downs += int(feet["touch_down"].sum())
        started += int(events["transitions"]["started"].sum())
        ended += int((~events["transitions"]["started"]).sum())
        assert set(events["transitions"]["dog"]) <= {1}
        changes += events["gaits"].tolist()
    assert downs > 20 and started == 1 and ended == 1 and len(PAW_ORDER) == 4
    assert any(previous == "none" and gait != "none" for *_, gait, previous in changes)


def test_removing_no_dogs_changes_nothing(model):
    """remove([]) changed the state hash (issue 62)."""
    dogs = Controller(model, count=3, seed=0)
    dogs.step(moving(3))
    before = dogs.get_state()["sha256"]
    dogs.remove([])
    assert dogs.count == 3 and dogs.get_state()["sha256"] == before

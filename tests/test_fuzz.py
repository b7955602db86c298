"""Property-based tests: malformed or extreme input is either accepted and gives finite
results, or refused with the module's own clear error, never a stray library exception."""

import json
import math

import numpy as np
from canis.runtime.actions import ACTION_NAMES, ALIASES
from canis.runtime.controller import DT_S
from canis.runtime.trajectory import MAX_SPEED_MPS, ControlState, extrapolate
from canis.tools.script import ScriptDriver, load_script
from canis.training.bvh import BvhError, read_bvh
from conftest import TINY_BVH, write_tiny_bvh
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

FUZZ = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
TOKENS = TINY_BVH.replace("\n", " \n ").split(" ")


@FUZZ
@given(
    edits=st.lists(
        st.tuples(
            st.integers(0, len(TOKENS) - 1),
            st.sampled_from(["delete", "replace", "duplicate"]),
            st.sampled_from(
                [
                    "{",
                    "}",
                    "nan",
                    "1e999",
                    "-",
                    "JOINT",
                    "End",
                    "CHANNELS",
                    "7",
                    "Xrotation",
                    "",
                    "\n",
                ]
            ),
        ),
        max_size=6,
    ),
    cut=st.integers(0, len(TINY_BVH)),
)
def test_bvh_reader_accepts_or_names_the_problem(tmp_path, edits, cut):
    tokens = list(TOKENS)
    for index, kind, token in edits:
        index = min(index, len(tokens) - 1)
        if kind == "delete" and tokens:
            del tokens[index]
        elif kind == "replace":
            tokens[index] = token
        else:
            tokens.insert(index, tokens[index])
    text = " ".join(tokens).replace(" \n ", "\n")[: max(cut, 1)]
    path = write_tiny_bvh(tmp_path, text, "fuzz.bvh")
    try:
        motion = read_bvh(path)
    except BvhError as error:
        assert str(path) in str(error)
        return
    assert np.all(np.isfinite(motion.local_rotations))
    assert np.all(np.isfinite(motion.root_positions_cm))


json_values = st.recursive(
    st.none() | st.booleans() | st.floats(allow_nan=True) | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)
events = st.lists(
    st.fixed_dictionaries(
        {"t": st.floats(0, 5)},
        optional={
            "move": st.lists(st.floats(-2, 2), min_size=2, max_size=2),
            "speed": st.floats(0, 10),
            "turn": st.floats(-5, 5),
            "facing": st.floats(-10, 10),
            "action": st.sampled_from(ACTION_NAMES + tuple(ALIASES)),
        },
    ),
    min_size=1,
    max_size=6,
).map(lambda e: sorted(e, key=lambda v: v["t"]))


@FUZZ
@given(document=json_values | events)
def test_script_reader_accepts_or_names_the_problem(tmp_path, document):
    path = tmp_path / "script.json"
    path.write_text(json.dumps(document))
    try:
        loaded = load_script(path)
    except ValueError as error:
        assert str(path) in str(error)
        return
    driver = ScriptDriver(loaded)
    for frame in range(30):
        control = driver.control(frame * DT_S, None).validated(1)
        assert np.all(np.isfinite(control.velocity_mps))


finite_or_not = st.floats(allow_nan=True, allow_infinity=True, width=64)


@FUZZ
@given(vx=finite_or_not, vz=finite_or_not, yaw=finite_or_not, action=st.integers(-3, 9))
def test_control_is_validated_before_it_reaches_the_trajectory(vx, vz, yaw, action):
    control = ControlState(np.array([[vx, vz]]), np.array([yaw]), np.array([action]))
    finite = all(map(math.isfinite, (vx, vz, yaw)))
    try:
        checked = control.validated(1)
    except ValueError as error:
        assert not finite or not 0 <= action < 6, error
        return
    assert finite and 0 <= action < 6
    assert np.linalg.norm(checked.velocity_mps) <= MAX_SPEED_MPS * (1 + 1e-9)
    future = extrapolate(
        np.zeros((1, 2)),
        np.zeros((1, 2)),
        np.zeros(1),
        np.eye(6)[[0]],
        checked.velocity_mps,
        checked.facing_yaw_rad,
        np.eye(6)[[1]],
    )
    for array in (future.positions_xz_m, future.directions_xz, future.velocities_xz_mps):
        assert np.all(np.isfinite(array))


NUMBERS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, width=64),
    st.sampled_from([0.0, 1.1, -3.3, 1e39, 1e300, float("nan")]),
    st.integers(-5, 10**9),
)
CALLS = st.one_of(
    st.tuples(st.just("step"), st.lists(NUMBERS, min_size=2, max_size=2), NUMBERS, NUMBERS),
    st.tuples(st.just("add"), st.one_of(st.integers(-2, 3), st.sampled_from([10**5, 10**9]))),
    st.tuples(st.just("remove"), st.lists(st.integers(-3, 5), max_size=3)),
    st.tuples(
        st.just("transition_to"),
        st.sampled_from(["sit", "lie", "beg", "stand", "fly", 5, None]),
        st.one_of(st.integers(-5, 100), st.floats(allow_nan=True)),
        NUMBERS,
    ),
    st.tuples(st.just("set_state"), st.sampled_from(["nan root", "extra scalar", "half"]), NUMBERS),
)


def _call(controller, call):
    name = call[0]
    n = controller.count
    if name == "step":
        _, velocity, yaw, action = call
        return controller.step(
            ControlState(np.tile(velocity, (n, 1)), np.full(n, yaw), np.full(n, action))
        )
    if name == "add":
        return controller.add(call[1])
    if name == "remove":
        return controller.remove(call[1])
    if name == "transition_to":
        _, target, frames, variation = call
        return controller.transition_to(target, frames, variation=variation)
    _, how, value = call
    saved = controller.get_state()
    if how == "nan root":
        saved["arrays"]["state.root_xz_m"][0, 0] = value
    elif how == "extra scalar":
        saved["scalars"]["count"] = value
    else:
        saved["arrays"].pop("state.root_xz_m")
    from canis.runtime import snapshot

    saved["sha256"] = snapshot._digest(
        saved["layout"], saved["scalars"], saved.get("arrays"), saved.get("rng"), saved["postures"]
    )
    return controller.set_state(saved)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calls=st.lists(CALLS, min_size=1, max_size=6))
# Found by it: a save's root past float32's range was taken, and the next add showed inf.
@example(calls=[("set_state", "nan root", 3.4028235677973366e38), ("add", 1)])
def test_the_api_refuses_in_one_line_with_nothing_changed_or_stays_finite(calls):
    """step, add, remove, transition_to and set_state under any arguments: either a one-line
    ValueError or TypeError and the state exactly as before, or the call goes through and
    every dog is finite."""
    from canis.runtime import Controller, MotionModel, TransitionModel
    from conftest import FIXTURES

    controller = Controller(
        MotionModel(FIXTURES / "tiny_mann4.onnx"),
        count=2,
        transition_model=TransitionModel(FIXTURES / "tiny_rtn_noise_step.onnx"),
    )
    for call in calls:
        before = controller.get_state()
        try:
            _call(controller, call)
        except (ValueError, TypeError) as error:
            assert "\n" not in str(error), call
            assert controller.get_state()["sha256"] == before["sha256"], call
            continue
        if controller.count:
            positions, _ = controller.display_pose()
            assert np.all(np.isfinite(positions)), call

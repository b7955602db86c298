"""Property-based tests: malformed or extreme input is either accepted and gives finite
results, or refused with the module's own clear error, never a stray library exception."""

import json
import math

import numpy as np
from canis.runtime.actions import ACTION_NAMES, ALIASES
from canis.runtime.controller import DT_S
from canis.runtime.trajectory import MAX_SPEED_MPS, ControlState, extrapolate
from canis.tools.run import ScriptDriver, load_script
from canis.training.bvh import BvhError, read_bvh
from conftest import TINY_BVH, write_tiny_bvh
from hypothesis import HealthCheck, given, settings
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

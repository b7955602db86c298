"""The per-frame rework of issue 15 item 3 changes no behaviour: the network input x, the
shown pose and the root over 240 frames (walking, trotting past the speed limit, turning,
following a path, sitting and standing up through transitions; flat ground and hills with
the foot lock) are those recorded with the runtime before it (tests/fixtures/
record_step_trace.py says how). On the CPU and library versions the trace was recorded with
they are bit-identical; elsewhere numpy's and ONNX Runtime's kernels round differently in the
last bits, so there they are compared to 1e-4 (a 1e-7 relative perturbation of y every frame
moves them by under 1e-5; a wrong field or formula by far more). The trace holds the numpy
definition of the per-frame math (tests/reference_frame.py); tests/test_native_frame.py holds
the native core, the runtime's one path, to it."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

FIXTURES = Path(__file__).resolve().parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
import record_step_trace  # noqa: E402

TRACE = np.load(FIXTURES / "step_trace.npz")
SAME_ENVIRONMENT = str(TRACE["environment"]) == record_step_trace.environment()


@pytest.mark.parametrize("terrain_name", ["flat", "hills"])
def test_the_runtime_reproduces_the_recorded_trace(terrain_name):
    got = record_step_trace.run_scenario(terrain_name)
    assert set(got) == {k for k in TRACE.files if k.startswith(f"{terrain_name}_")}
    for name, values in got.items():
        recorded = TRACE[name]
        assert values.shape == recorded.shape, name
        if SAME_ENVIRONMENT:
            assert np.array_equal(values, recorded), f"{name}: not bit-identical to the trace"
        else:
            assert np.allclose(values, recorded, rtol=0, atol=1e-4), name


def test_norm_xz_is_numpys_norm_bit_for_bit(rng):
    vectors = rng.normal(size=(500, 7, 2)) * np.exp(rng.uniform(-30, 30, size=(500, 7, 1)))
    vectors[0, 0] = (0.0, -0.0)
    vectors[0, 1] = (1e200, 1e200)  # overflows in both
    from canis.runtime.root import norm_xz

    with np.errstate(over="ignore"):
        assert np.array_equal(norm_xz(vectors), np.linalg.norm(vectors, axis=-1))


def test_validated_skips_only_scalings_that_are_exactly_one(rng):
    """The fast path (no component above 4 m/s) gives the bits of the two scalings it skips;
    faster commands still go through them."""
    from canis.runtime.trajectory import MAX_SPEED_MPS, ControlState

    velocity = rng.uniform(-4.0, 4.0, size=(256, 2))
    velocity[:8] = [
        [4.0, 4.0],
        [-4.0, 4.0],
        [0, 0],
        [-0.0, 0.0],
        [5, 0],
        [6, 6],
        [1e300, 0],
        [0, 7],
    ]
    control = ControlState(velocity, np.zeros(256), np.ones(256, int)).validated(256)
    largest = np.abs(velocity).max(axis=1, keepdims=True)
    expected = velocity / np.maximum(1.0, largest / MAX_SPEED_MPS)
    speed = np.linalg.norm(expected, axis=1, keepdims=True)
    expected = expected * np.minimum(1.0, MAX_SPEED_MPS / np.maximum(speed, 1e-9))
    assert np.array_equal(control.velocity_mps, expected)
    assert control.velocity_mps is not velocity and np.all(velocity[8:] == control.velocity_mps[8:])


def test_x_written_through_cached_views_is_the_layouts(rng):
    """write_input through input_views and joint_fields put every field where the layout
    (features.INPUT / OUTPUT) says it is."""
    from canis.runtime.features import (
        INPUT,
        JOINT_FIELDS,
        OUTPUT,
        LocalPose,
        LocalTrajectory,
        input_views,
        joint_fields,
        write_input,
    )

    n = 3
    trajectory = LocalTrajectory(*(rng.normal(size=(n, 12, k)) for k in (2, 2, 2)),
                                 rng.normal(size=(n, 12)), rng.normal(size=(n, 12, 6)))  # fmt: skip
    pose = LocalPose(*(rng.normal(size=(n, 27, 3)) for _ in range(4)))
    x = np.zeros((n, INPUT.size), np.float32)
    assert write_input(trajectory, pose, x, input_views(x)) is x
    field = lambda block, name: INPUT.field(x, block, name)  # noqa: E731
    assert np.array_equal(field("trajectory", "position"), trajectory.positions_xz_m.astype("f4"))
    assert np.array_equal(field("trajectory", "speed")[..., 0], trajectory.speeds_mps.astype("f4"))
    assert np.array_equal(field("trajectory", "action"), trajectory.actions.astype("f4"))
    assert np.array_equal(field("joints", "up"), pose.ups.astype("f4"))
    assert np.array_equal(field("joints", "velocity"), pose.velocities_mps.astype("f4"))
    y = rng.normal(size=(n, OUTPUT.size))
    for k, (name, _) in enumerate(JOINT_FIELDS):
        assert np.array_equal(joint_fields(y)[k], OUTPUT.field(y, "joints", name))

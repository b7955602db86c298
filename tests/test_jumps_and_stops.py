"""The jumps and stops of the controllers evaluation: the stop's controls, the largest joint
step and which joint, what counts as a pop, the mocap's jumps, and a short run of a shipped
network."""

from types import SimpleNamespace

import numpy as np
import pytest
from canis.evaluation import jumps_and_stops as js
from canis.runtime.actions import action_index
from canis.runtime.assets import shipped_models_dir
from canis.runtime.inference import MotionModel
from canis.runtime.transition_requests import SLOW_DOWN_S
from canis.training.labels import ACTIONS
from synthetic_dog import SKELETON


def test_the_stop_slows_to_zero_over_the_slow_down_then_idles():
    control_at = js.stopping_control(2.0, ask_frame=100)
    speeds = [float(np.linalg.norm(control_at(f).velocity_mps[0])) for f in range(90, 140)]
    actions = [int(control_at(f).action[0]) for f in range(90, 140)]
    assert speeds[:11] == pytest.approx([2.0] * 11)  # until the request, and at it
    assert speeds[11] == pytest.approx(2.0 * (1 - (1 / 60) / SLOW_DOWN_S))
    stopped = 100 + round(SLOW_DOWN_S * 60) - 90
    assert speeds[stopped:] == pytest.approx([0.0] * (50 - stopped))
    assert set(actions[:stopped]) == {action_index("move")}
    assert set(actions[stopped:]) == {action_index("idle")}


def test_the_largest_step_names_its_frame_and_joint():
    positions = np.zeros((6, 4, 3))
    positions[4:, 2, 0] = 0.3  # joint 2 moves 30 cm between frames 3 and 4
    positions[1:, 1, 1] = 0.1
    assert js.largest_step(positions) == pytest.approx((30.0, 4, 2))


def test_a_pop_is_a_stop_that_outruns_its_gait():
    stops = {
        "1.1": {"stop_cm_per_frame": 9.7, "gait_cm_per_frame": 9.6, "joint": "RightHandSite"},
        "1.9": {"stop_cm_per_frame": 27.7, "gait_cm_per_frame": 11.4, "joint": "LeftForeArm"},
    }
    assert js.pops(stops) == ["from 1.9 m/s: 27.7 cm/frame (LeftForeArm), its gait's own 11.4"]


def test_the_mocap_jumps_rise_from_the_second_before():
    hips = np.full(300, 0.45)
    hips[100:130] = 0.45 + np.sin(np.linspace(0, np.pi, 30)) * 0.25
    action = np.full(300, ACTIONS.index("move"))
    action[95:140] = ACTIONS.index("jump")
    action[5:20] = ACTIONS.index("jump")  # too early to tell what it rose from: left out
    labels = SimpleNamespace(hips_height_m=hips, action_index=action)
    rises = js.mocap_jump_rises_m([SimpleNamespace(labels=labels)])
    assert rises == pytest.approx([0.25], abs=1e-3)


def test_a_shipped_network_jumps_and_stops(monkeypatch):
    monkeypatch.setattr(js, "PHASES_FRAMES", (0, 9))
    monkeypatch.setattr(js, "JUMP_FROM_MPS", (1.1,))
    monkeypatch.setattr(js, "STOP_FROM_MPS", (1.9,))
    found = js.measure(MotionModel(shipped_models_dir() / "mann8.int8.onnx"), SKELETON)
    assert set(found["jump_rise_m"]) == {"1.1"} and found["jump_rise_m"]["1.1"] > 0.05
    stop = found["stops"]["1.9"]
    assert stop["joint"] in SKELETON.joint_names and stop["phase_frames"] in (0, 9)
    assert 0 < stop["gait_cm_per_frame"] and 0 < stop["stop_cm_per_frame"] < 100

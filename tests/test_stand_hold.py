"""The stand hold (runtime/pose.py hold_standing_root): a dog asked to stand does not drift
with its network's slow root motion; a dog asked to move, a turn and anything faster than a
drift keep the network's root motion."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from canis.runtime.controller import Controller
from canis.runtime.features import Prediction
from canis.runtime.inference import MotionModel
from canis.runtime.pose import (
    STAND_HOLD_BELOW_MPS,
    STAND_HOLD_FULL_MPS,
    STAND_HOLD_TURN_RADPS,
    hold_standing_root,
)
from canis.runtime.trajectory import ControlState


def prediction(root_velocity_mps, yaw_radps) -> Prediction:
    n = len(root_velocity_mps)
    empty = np.zeros((n, 0, 3))
    return Prediction(
        *(np.zeros((n, 6, 2)) for _ in range(3)),
        empty,
        empty,
        empty,
        empty,
        np.asarray(root_velocity_mps, dtype=float),
        np.asarray(yaw_radps, dtype=float),
    )


def test_only_a_standing_dogs_drift_is_taken_out():
    middle = (STAND_HOLD_BELOW_MPS + STAND_HOLD_FULL_MPS) / 2
    velocity = [[0.0, 0.03], [0.0, middle], [0.0, 0.3], [0.03, 0.0], [0.0, 0.03]]
    yaw = [0.0, 0.0, 0.0, 2 * STAND_HOLD_TURN_RADPS, 0.0]
    asked = np.array([0.0, 0.0, 0.0, 0.0, 1.0])
    held = hold_standing_root(prediction(velocity, yaw), asked).root_velocity_mps
    np.testing.assert_allclose(held[0], 0.0)  # a drift, asked to stand: held
    np.testing.assert_allclose(held[1], [0.0, middle / 2])  # half way up the ramp: halved
    np.testing.assert_allclose(held[2:], np.asarray(velocity)[2:])  # a stop, a turn, a move
    p = prediction([[0.0, 0.3]], [0.0])
    assert hold_standing_root(p, np.zeros(1)) is p  # nothing held: the prediction as it is


@pytest.fixture(scope="module")
def model(tiny_model):
    return MotionModel(tiny_model)


def test_a_dog_asked_to_stand_stays_where_it_is_and_the_setting_is_in_its_saves(model, monkeypatch):
    """The network asks a standing dog to drift 3 cm/s: held, it stays; with
    stand_hold=False (the network alone) it drifts; a save names the setting, and one made
    with it is refused by a controller without it."""
    apply = Controller._apply

    def drifting(self, p, speed_now_mps):
        p = dataclasses.replace(
            p,
            root_velocity_mps=np.tile([0.0, 0.03], (self.count, 1)),
            root_yaw_velocity_radps=np.zeros(self.count),
        )
        apply(self, p, speed_now_mps)

    monkeypatch.setattr(Controller, "_apply", drifting)
    stand = ControlState(np.zeros((1, 2)), np.zeros(1), ["idle"])
    moved = []
    for controller in (Controller(model), Controller(model, stand_hold=False)):
        start = controller.root_xz_m.copy()
        for _ in range(60):
            controller.step(stand)
        moved.append(float(np.linalg.norm(controller.root_xz_m - start)))
        saved = controller.get_state()
    assert moved[0] < 1e-9 and moved[1] == pytest.approx(0.03, rel=0.05)  # 1 s at 3 cm/s
    assert saved["layout"]["stand_hold"] is False
    with pytest.raises(ValueError, match="stand_hold False"):
        Controller(model).set_state(saved)

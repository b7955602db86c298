"""The readouts a game calls every step, made cheaper (evaluation/readout_benchmark.py): the
gait readout's last answer is reused only while what it was read from is unchanged, and the
bounds are the joints' box as before."""

from __future__ import annotations

import numpy as np
from canis.runtime.actions import Action
from canis.runtime.controller import Controller
from canis.runtime.inference import MotionModel
from canis.runtime.readouts import gaits
from canis.runtime.trajectory import ControlState


def fresh_gaits(dogs) -> tuple:
    s = dogs.state
    moving = s.action_weights.argmax(axis=1) == int(Action.MOVE)
    return gaits(s.contact_history, s.canter_speed, moving)


def test_the_gait_readout_is_read_again_whenever_its_inputs_change(tiny_model):
    dogs = Controller(MotionModel(tiny_model), count=3)
    control = ControlState(np.tile([0.0, 1.5], (3, 1)), np.zeros(3), np.full(3, 1))
    answers = set()
    for frame in range(90):
        dogs.step(control)
        assert dogs.gaits() == fresh_gaits(dogs), frame
        answers.add(dogs.gaits())
        if frame == 40:
            saved = dogs.get_state()
        if frame == 60:
            dogs.reset(characters=[1])  # in place: the same arrays, other contents
            assert dogs.gaits() == fresh_gaits(dogs) and dogs.gaits()[1] == "none"
            dogs.set_state(saved)
            assert dogs.gaits() == fresh_gaits(dogs)
            dogs.remove([0])
            assert dogs.gaits() == fresh_gaits(dogs) and len(dogs.gaits()) == 2
            control = ControlState(np.tile([0.0, 1.5], (2, 1)), np.zeros(2), np.full(2, 1))
    assert len(answers) > 1  # the readout did change over the run


def test_the_bounds_are_the_joints_box_padded(tiny_model):
    dogs = Controller(MotionModel(tiny_model), count=4, terrain="hills")
    for _ in range(10):
        dogs.step(ControlState(np.tile([0.3, 1.0], (4, 1)), np.zeros(4), np.full(4, 1)))
    joints = dogs.display_positions.astype(np.float64)
    box = dogs.bounds_m(margin_m=(0.1, 0.2, 0.3))
    assert np.array_equal(box[:, 0], joints.min(axis=1) - [0.3, 0.1, 0.3])
    assert np.array_equal(box[:, 1], joints.max(axis=1) + [0.3, 0.2, 0.3])

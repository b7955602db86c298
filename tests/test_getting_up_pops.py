"""The getting-up-pops term: its dogs' kept inputs are the runtime's for a dog taken to a posture
and back up through the transition network, from the first step after the hand-back; the option
is checked and named; the evaluation's getting-up table finds the worst step after it."""

import numpy as np
import pytest
from test_placed_speed import _reproduce_line


def test_getting_up_dogs_inputs_are_the_runtimes_after_the_hand_back(tiny_model):
    from canis.runtime.controller import Controller
    from canis.runtime.features import ACTIONS
    from canis.runtime.inference import MotionModel
    from canis.runtime.poses import KEYFRAME_ACTIONS
    from canis.runtime.trajectory import ControlState
    from canis.runtime.transition import TransitionModel
    from canis.training.getting_up_pops import (
        KEPT_FRAMES,
        TRANSITION_FRAMES,
        getting_up_inputs,
        getting_up_plan,
    )

    xs, asked = getting_up_inputs(tiny_model, None, 3, np.random.default_rng(4))
    assert xs.shape == (3, KEPT_FRAMES, 480) and asked.tolist() == [0, 0, 0]
    rtn = TransitionModel(None)
    plan = getting_up_plan(3, np.random.default_rng(4), bool(rtn.noise_width))
    dog = 2
    controller = Controller(MotionModel(tiny_model, threads=1), transition_model=rtn)
    facing, action, steps, in_transition = (
        controller.root_yaw_rad.copy(),
        ACTIONS.index("idle"),
        [],
        [],
    )
    for frame in range(plan.asked_up[dog] + 60 + KEPT_FRAMES):
        for target, asked_at, seed in (
            (str(plan.posture[dog]), plan.asked_down[dog], plan.seeds[dog, 0]),
            ("stand", plan.asked_up[dog], plan.seeds[dog, 1]),
        ):
            if frame == asked_at:
                started = controller.transition_to(
                    target, TRANSITION_FRAMES, variation=float(plan.variation[dog]), seed=int(seed)
                )
                facing = started.final_yaw_rad.copy()
                action = ACTIONS.index(KEYFRAME_ACTIONS[target])
        in_transition.append(bool(controller.in_transition()[0]))  # before this step
        steps.append(
            controller.step(ControlState(np.zeros((1, 2)), facing, np.array([action])))[0].copy()
        )
    # The kept steps start with the first one the motion network drives after getting up.
    first = int(np.flatnonzero(in_transition[plan.asked_up[dog] :])[-1]) + 1 + plan.asked_up[dog]
    np.testing.assert_allclose(xs[dog], np.array(steps[first : first + KEPT_FRAMES]), atol=1e-4)
    assert not any(in_transition[first:])


def test_the_getting_up_pops_weight_is_checked_and_named():
    from canis.training.closed_loop_training import ClosedLoopConfig

    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="--getting-up-pops-weight .*: must be a finite"):
            ClosedLoopConfig(getting_up_pops_weight=bad)
    loop = ClosedLoopConfig(getting_up_pops_weight=3.0)
    assert loop.identity()["getting_up_pops_weight"] == 3.0
    assert "--getting-up-pops-weight 3" in _reproduce_line(loop)
    assert "--getting-up-pops-weight" not in _reproduce_line(ClosedLoopConfig())


def test_the_getting_up_dogs_leave_the_epochs_draws_to_the_other_terms(monkeypatch):
    """Their draws come from children of the epoch's seed (placed_speed.OwnDraws), which draw
    nothing from it: a run with the term and one without give the other terms the same dogs
    and batches."""
    from canis.training.getting_up_pops import GettingUpDogs
    from canis.training.placed_speed import MovingDogs, OwnDraws

    monkeypatch.setattr(MovingDogs, "refresh", lambda self, generator: generator.random())
    dogs = GettingUpDogs.__new__(GettingUpDogs)  # the refresh alone: no network to drive
    dogs.draws = OwnDraws()
    epoch = np.random.default_rng(3)
    first = dogs.refresh(epoch)
    assert epoch.random() == np.random.default_rng(3).random()
    assert first != np.random.default_rng(3).random()
    assert dogs.refresh(epoch) != first  # the epoch's next refresh: new dogs
    assert dogs.refresh(np.random.default_rng(3)) == first  # and a resumed epoch the same
    # The children SeedSequence.spawn gave the term before, in order.
    spawned = np.random.default_rng(3).bit_generator.seed_seq.spawn(2)
    epoch = np.random.default_rng(3)
    for child in spawned:
        assert dogs.refresh(epoch) == np.random.default_rng(child).random()

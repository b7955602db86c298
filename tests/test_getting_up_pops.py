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
    from canis.training.finetune_config import ClosedLoopConfig

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


def test_settling_dogs_are_kept_after_the_way_down_and_never_stood_up(tiny_model):
    """--getting-up-settling: the share kept from the first step the motion network drives after
    the posture's hand-back, holding the posture; without a share the draws are as before."""
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

    varied = bool(TransitionModel(None).noise_width)
    before = getting_up_plan(5, np.random.default_rng(4), varied)
    assert not before.settling.any()
    mixed = getting_up_plan(400, np.random.default_rng(4), varied, settling_share=0.25)
    assert 0.15 < mixed.settling.mean() < 0.35
    assert (mixed.asked_up[mixed.settling] == -1).all()
    assert (mixed.asked_up[~mixed.settling] > mixed.asked_down[~mixed.settling]).all()
    for field in ("posture", "asked_down", "variation", "seeds"):  # the same dogs otherwise
        np.testing.assert_array_equal(
            getattr(getting_up_plan(400, np.random.default_rng(4), varied), field),
            getattr(mixed, field),
        )

    xs, _ = getting_up_inputs(tiny_model, None, 2, np.random.default_rng(6), settling_share=1.0)
    plan = getting_up_plan(2, np.random.default_rng(6), varied, settling_share=1.0)
    dog = 1
    controller = Controller(MotionModel(tiny_model, threads=1), transition_model=TransitionModel())
    facing, action = controller.root_yaw_rad.copy(), ACTIONS.index("idle")
    steps, in_transition = [], []
    for frame in range(plan.asked_down[dog] + 60 + KEPT_FRAMES):
        if frame == plan.asked_down[dog]:
            target = str(plan.posture[dog])
            started = controller.transition_to(
                target,
                TRANSITION_FRAMES,
                variation=float(plan.variation[dog]),
                seed=int(plan.seeds[dog, 0]),
            )
            facing = started.final_yaw_rad.copy()
            action = ACTIONS.index(KEYFRAME_ACTIONS[target])
        in_transition.append(bool(controller.in_transition()[0]))
        steps.append(
            controller.step(ControlState(np.zeros((1, 2)), facing, np.array([action])))[0].copy()
        )
    first = int(np.flatnonzero(in_transition)[-1]) + 1
    np.testing.assert_allclose(xs[dog], np.array(steps[first : first + KEPT_FRAMES]), atol=1e-4)
    assert not any(in_transition[first:])


def test_the_getting_up_settling_share_is_checked_and_named():
    from canis.training.finetune_config import ClosedLoopConfig

    for bad in (-0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="--getting-up-settling .*: must be a share"):
            ClosedLoopConfig(getting_up_pops_weight=1.0, getting_up_settling=bad)
    with pytest.raises(ValueError, match="--getting-up-settling: needs --getting-up-pops"):
        ClosedLoopConfig(getting_up_settling=0.5)
    loop = ClosedLoopConfig(getting_up_pops_weight=3.0, getting_up_settling=0.5)
    assert loop.identity()["getting_up_settling"] == 0.5
    assert "--getting-up-pops-weight 3 --getting-up-settling 0.5" in _reproduce_line(loop)
    assert "--getting-up-settling" not in _reproduce_line(
        ClosedLoopConfig(getting_up_pops_weight=3.0)
    )

"""The posture-stillness term: its dogs' kept inputs are the runtime's for a dog taken to a
posture through the transition network and left there, for the first 3 s after the hand-back;
its draws are its own; the option is checked and named."""

import numpy as np
import pytest
from test_placed_speed import _reproduce_line


def test_posture_dogs_inputs_are_the_settling_dogs_held_for_longer(tiny_model):
    """The getting-up term's settling dogs (tests/test_getting_up_pops.py follows them through
    the Controller), kept for KEPT_FRAMES steps after the hand-back instead of its second, each
    step asking the posture's action."""
    from canis.runtime.features import ACTIONS, INPUT, TRAJECTORY_OFFSETS_FRAMES
    from canis.runtime.poses import KEYFRAME_ACTIONS
    from canis.runtime.transition import TransitionModel
    from canis.training import getting_up_pops
    from canis.training.getting_up_pops import getting_up_inputs, getting_up_plan
    from canis.training.posture_stillness import KEPT_FRAMES

    assert KEPT_FRAMES > getting_up_pops.KEPT_FRAMES
    held, _ = getting_up_inputs(tiny_model, None, 3, np.random.default_rng(6), None, 1.0, 150)
    settled, _ = getting_up_inputs(tiny_model, None, 3, np.random.default_rng(6), None, 1.0)
    assert held.shape == (3, 150, INPUT.size)
    np.testing.assert_allclose(held[:, : settled.shape[1]], settled, atol=1e-5)
    plan = getting_up_plan(3, np.random.default_rng(6), bool(TransitionModel().noise_width), 1.0)
    # The action the input carries (the trajectory's present sample) is the posture's throughout.
    action = INPUT.field(held, "trajectory", "action")[:, :, TRAJECTORY_OFFSETS_FRAMES.index(0)]
    for dog in range(3):
        asked = ACTIONS.index(KEYFRAME_ACTIONS[str(plan.posture[dog])])
        assert (action[dog].argmax(-1) == asked).all()


def test_the_posture_dogs_draw_their_own_dogs(monkeypatch):
    """Their own key (placed_speed.OwnDraws): not the getting-up term's dogs again, and nothing
    drawn from the epoch's generator, so a run with the term gives the others the same dogs."""
    from canis.training.getting_up_pops import GettingUpDogs
    from canis.training.placed_speed import MovingDogs, OwnDraws
    from canis.training.posture_stillness import DRAWS_KEY, PostureDogs

    monkeypatch.setattr(MovingDogs, "refresh", lambda self, generator: generator.random())
    posture = PostureDogs.__new__(PostureDogs)  # the refresh alone: no network to drive
    posture.draws = OwnDraws(DRAWS_KEY)
    getting_up = GettingUpDogs.__new__(GettingUpDogs)
    getting_up.draws = OwnDraws()
    epoch = np.random.default_rng(3)
    first = posture.refresh(epoch)
    assert epoch.random() == np.random.default_rng(3).random()
    assert first != getting_up.refresh(np.random.default_rng(3))
    assert posture.refresh(np.random.default_rng(3)) == first  # a resumed epoch: the same


def test_the_posture_stillness_weight_is_checked_and_named():
    from canis.training.finetune_config import ClosedLoopConfig

    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="--posture-stillness-weight .*: must be a finite"):
            ClosedLoopConfig(posture_stillness_weight=bad)
    with pytest.raises(ValueError, match="--placed-dogs 0: needs 1 or more"):
        ClosedLoopConfig(posture_stillness_weight=1.0, placed_dogs=0)
    loop = ClosedLoopConfig(posture_stillness_weight=2.0)
    assert loop.identity()["posture_stillness_weight"] == 2.0
    assert "--posture-stillness-weight 2" in _reproduce_line(loop)
    assert "--posture-stillness-weight" not in _reproduce_line(ClosedLoopConfig())

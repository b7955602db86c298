"""training/scenario_cadence.py: the runs a scenario's frames come in and a leg's cycles a
second, which split the leg stiffness into cadence and the angle travelled a cycle."""

import numpy as np
from canis.training.labels import true_runs
from canis.training.scenario_cadence import HYSTERESIS_DEG, cycles_per_s


def test_runs_of_frames_as_the_labels_find_them():
    mask = np.array([0, 1, 1, 0, 0, 1, 1, 1, 0, 1], bool)
    assert true_runs(mask) == [(1, 3), (5, 8), (9, 10)]
    assert true_runs(np.zeros(4, bool)) == []


def test_cycles_a_second_of_a_swing_and_none_of_noise():
    t_s = np.arange(240) / 60.0  # 4 s at 60 fps
    swing = -30.0 * np.sin(2 * np.pi * 1.5 * t_s)  # six upward crossings, none at an end
    assert cycles_per_s(swing) == 1.5
    assert cycles_per_s(swing + np.random.default_rng(0).normal(0, 1.0, t_s.shape)) == 1.5
    # jitter smaller than the hysteresis is not a cycle, however fast
    jitter = (HYSTERESIS_DEG - 1) * np.sign(np.sin(2 * np.pi * 10 * t_s))
    assert cycles_per_s(jitter) == 0.0

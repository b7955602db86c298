"""tools/handback_compare.py: two transition networks' hand-back and postures figures, figure
by figure."""

import copy

import pytest
from canis.tools.handback_compare import compare, report_lines


def report(after_cm=2.0, at_once_cm=8.0, stopped_first_cm=3.0):
    handback = [
        {
            "start": "standing",
            "target": "sit",
            "transition_cm_per_frame": 1.5,
            "after_cm_per_frame": after_cm,
        },
        {
            "start": "trotting",
            "target": "lie",
            "transition_cm_per_frame": 2.0,
            "after_cm_per_frame": 1.0,
        },
    ]
    postures = [
        {
            "ground": "flat",
            "start": "walking",
            "target": "sit",
            "at_once_cm_per_frame": at_once_cm,
            "stopped_first_cm_per_frame": stopped_first_cm,
            "stopping_cm_per_frame": 7.0,
        },
    ]
    return {"handback": {"runs": handback}, "postures": {"runs": postures}}


def test_figures_worse_and_better_beyond_the_threshold_and_the_demos_limits():
    result = compare(report(), report(after_cm=2.2, at_once_cm=7.0, stopped_first_cm=3.1))
    assert result["count"] == 6
    assert list(result["worse"]) == [("hand-back", "standing", "sit", "after_cm_per_frame")]
    assert list(result["better"]) == [
        ("postures", "flat", "walking", "sit", "at_once_cm_per_frame")
    ]
    assert result["demo_limits"] == {
        "after the hand-back": (2.0, 2.2),
        "stopping first": (3.0, 3.1),
    }
    lines = report_lines(result, 0.05)
    assert lines[0] == "6 figures: 1 more than 5% worse, 1 more than 5% better"
    assert "2.00 -> 2.20 (+10%)" in lines[1]


def test_evaluations_of_different_runs_are_refused():
    other = copy.deepcopy(report())
    other["handback"]["runs"][0]["target"] = "beg"
    with pytest.raises(ValueError, match="different runs"):
        compare(report(), other)

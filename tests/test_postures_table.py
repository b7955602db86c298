"""The postures table of `canis evaluate transitions --handback-only`: each posture's root speed
held after the hand-back is a column, and the fastest is named in a line under the table."""


def _posture(ground, start, target, held_mps, stopped_first_cm=3.0):
    return {
        "ground": ground, "start": start, "target": target, "gait_cm_per_frame": 5.0,
        "at_once_cm_per_frame": 8.0, "at_once_where": "target blend", "at_once_phase_frames": 6,
        "stop_frames": 30,
        "stopping_cm_per_frame": 4.0, "stopped_first_cm_per_frame": stopped_first_cm,
        "stopped_first_where": "after", "stopped_first_phase_frames": 0,
        "stopped_first_held_mps": held_mps,
    }  # fmt: skip


def test_the_held_speed_is_a_column_and_the_fastest_is_named():
    from canis.evaluation.handback import HELD_BAR_MPS, handback_markdown

    results = {
        "handback": {
            "transition_frames": 45,
            "watch_frames": 10,
            "runs": [
                {
                    "start": "standing",
                    "target": "sit",
                    "transition_cm_per_frame": 1.5,
                    "after_cm_per_frame": 2.0,
                },
            ],  # fmt: skip
        },
        "postures": {
            "transition_frames": 45,
            "after_seconds": 2,
            "request_phases_frames": [0, 6],
            "runs": [
                _posture("flat", "walking", "sit", 0.012),
                _posture("hills", "walking", "beg", 0.116, stopped_first_cm=2.0),
                _posture("hills", "trotting", "lie", 0.004, stopped_first_cm=9.0),
            ],
        },
    }
    text = handback_markdown(results, "canis evaluate transitions --handback-only")
    assert "| at once | where | phase | stop frames |" in text
    assert "| stopping first | where | phase | held |" in text
    row = (
        "| hills | walking | beg | 5.00 | 8.00 | target blend | 6 | 30 | 4.00 | 2.00 | after | 0 |"
    )
    assert row + " 0.116 |" in text
    assert (
        f"Fastest held: 0.116 m/s (hills, walking -> beg). tests/test_demo.py allows "
        f"{HELD_BAR_MPS:g} m/s." in text
    )
    # The worst stopping first is still the largest joint step, not the fastest held.
    assert "Worst stopping first: 9.00 cm/frame (hills, trotting -> lie, in the after)." in text

"""`canis evaluate ablation`: a term counts only when turning it off moves a held-out figure by
more than the recipe's own spread between seeds."""

import pytest
from canis.evaluation import ablation


def _model(skating: float, reached: float, head_deg: float) -> dict:
    row = {
        "skating_vs_mocap": skating,
        "speed_reached": reached,
        "pose_p10_p50_p90": {"head_pitch_deg": [head_deg - 20, head_deg, head_deg + 20]},
    }
    return dict.fromkeys(("walk", "turn", "canter", "moving"), row)


def _results(rows: dict) -> dict:
    after = {"head_share": 0.9}
    results = {
        "clips": ["a", "b"],
        "models": list(rows),
        "GT": _model(1.0, 1.0, -16),
        "after_actions": {m: {"jump from a stand": after, "stop from a walk": after} for m in rows},
    }
    return results | {name: _model(*figures) for name, figures in rows.items()}


def test_a_change_counts_only_beyond_the_spread_between_seeds():
    results = _results(
        {
            "every term@1": (1.5, 0.80, -16),
            "every term@2": (1.6, 0.84, -10),  # spread: 0.1 skating, 4% speed, 6 deg
            "no skating@1": (2.4, 0.82, -12),  # +0.9 skating: counts; speed and head do not
            "no speed@2": (1.65, 0.95, -40),  # +0.05 skating: noise; +11% and -30 deg count
        }
    )
    rows = {(r["row"], r["seed"]): r for r in ablation.table(results)}
    assert rows["every term", "1"]["change"] is None
    skating = rows["no skating", "1"]
    assert skating["change"]["moving skating x"] == pytest.approx(0.9)
    assert set(skating["beyond"]) == {
        "walk skating x", "turn skating x", "canter skating x", "moving skating x"
    }  # fmt: skip
    speed = rows["no speed", "2"]
    assert set(speed["beyond"]) == {"moving speed reached", ablation.HEAD}
    text = ablation.markdown(results, "canis evaluate ablation", "a CPU")
    assert "| no skating | 1 | 2.40 (**+0.90**)" in text
    assert "| spread of every term | | 0.10 |" in text


def test_with_one_seed_there_is_no_spread_and_nothing_is_judged():
    results = _results({"every term@1": (1.5, 0.8, -16), "no skating@1": (2.4, 0.8, -16)})
    (reference, off) = ablation.table(results)
    assert off["change"]["moving skating x"] == pytest.approx(0.9)
    assert off["beyond"] is None
    assert "spread of" not in ablation.markdown(results, "c", "m")


def test_row_names_carry_their_seed():
    assert ablation.parse_row("no moving skating@2") == ("no moving skating", "2")
    assert ablation.parse_row("plain") == ("plain", "")


def test_the_generalisation_section_names_its_rows_as_settings_changed():
    results = _results({"recipe@1": (1.5, 0.8, -16), "balanced@1": (2.2, 0.77, -17)})
    text = ablation.markdown(results, "c", "m", section="generalisation")
    assert text.startswith("## The recipe's settings (held-out replay)")
    assert "with one setting changed" in text
    assert "`recipe` is the recipe with `sniffing = true`" in text
    assert "| balanced | 1 | 2.20 (+0.70)" in text
    with pytest.raises(KeyError):
        ablation.markdown(results, "c", "m", section="unknown")

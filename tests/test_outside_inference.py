"""tools/outside_inference.py: the side-by-side table of `canis run --csv` files."""

from __future__ import annotations

import pytest
from canis.tools.outside_inference import file_figures, side_by_side

HEADER = "frame,start_ms,wall_ms,cpu_ms,other_ms,steps,input_ms,trajectory_ms,features_ms,"
HEADER += "inference_ms,decode_ms,ik_ms,transition_ms\n"


def write_run(path, scale: float, frames: int = 101):
    rows = []
    for f in range(frames):
        transition = "5.0" if f % 10 == 0 else ""  # the RTN ran in some frames only
        stages = [0.1 * scale, 0.2 * scale, 0.01 * scale, 1.0, 0.3 * scale, 0.4 * scale]
        wall = sum(stages) + (5.0 if transition else 0.0)
        rows.append(
            f"{f},{f},{wall},{wall},0,1," + ",".join(f"{s}" for s in stages) + f",{transition}"
        )
    path.write_text(HEADER + "\n".join(rows) + "\n")
    return path


def test_outside_is_the_per_frame_sum_of_the_work_besides_the_networks(tmp_path):
    figures = file_figures(write_run(tmp_path / "a.csv", 1.0))
    assert figures["outside"][0] == pytest.approx(0.1 + 0.2 + 0.01 + 0.3 + 0.4)
    assert figures["transition"] == (5.0, 5.0)  # only the frames where it ran
    assert figures["inference"][0] == pytest.approx(1.0)


def test_the_table_gives_after_over_before(tmp_path):
    before = [write_run(tmp_path / f"a{i}.csv", 1.0) for i in range(2)]
    after = [write_run(tmp_path / f"b{i}.csv", 0.5) for i in range(2)]
    table = side_by_side(before, after)
    outside = next(line for line in table.splitlines() if line.startswith("| outside "))
    assert "| 1.010 | 0.505 | 0.50x | 0.50-0.50 |" in outside
    assert "| inference | 1.000 | 1.000 | 1.00x |" in table


def test_bad_files_are_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="nothere.csv: no such file"):
        file_figures(tmp_path / "nothere.csv")
    other = tmp_path / "other.csv"
    other.write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="other.csv: not a `canis run --csv` file"):
        file_figures(other)
    with pytest.raises(ValueError, match="at least one --before"):
        side_by_side([], [other])

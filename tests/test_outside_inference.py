"""tools/outside_inference.py: the side-by-side table of `canis run --csv` files."""

from __future__ import annotations

import pytest
from canis.tools.outside_inference import (
    file_figures,
    frame_kinds,
    kinds_side_by_side,
    side_by_side,
)

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


def test_frames_are_pooled_by_kind(tmp_path):
    """Frames 0, 10, ... have a transition stage, each alone: each is a frame that asks."""
    runs = [write_run(tmp_path / f"a{i}.csv", 1.0) for i in range(2)]
    kinds = frame_kinds(runs)
    assert kinds["that ask"].size == 22 and kinds["of a transition"].size == 0
    assert kinds["without one"].size == 180 and kinds["all"].size == 202
    assert kinds["that ask"].min() > kinds["without one"].max()  # the 5 ms stage
    path = tmp_path / "run.csv"
    # Frame 1 was descheduled: 7 ms wall, 2 ms on the CPU.
    path.write_text(HEADER + "0,0,1,1,0,1,0,0,0,0,0,0,\n1,1,7,2,0,1,0,0,0,0,0,0,5\n"
                    "2,2,6,6,0,1,0,0,0,0,0,0,4\n")  # fmt: skip
    kinds = frame_kinds([path])
    assert kinds["that ask"].tolist() == [7.0] and kinds["of a transition"].tolist() == [6.0]
    assert frame_kinds([path], "cpu_ms")["that ask"].tolist() == [2.0]
    table = kinds_side_by_side(runs, [path])
    assert "| of a transition | 0 | 1 | - | 6.00 / 6.00 / 6.00 | - | 6.00 / 6.00 / 6.00 |" in table
    assert "| that ask | 22 | 1 |" in table and "| 7.00 / 7.00 / 7.00 | " in table
    assert table.splitlines()[2].endswith("| 2.00 / 2.00 / 2.00 |")  # that ask, after, CPU

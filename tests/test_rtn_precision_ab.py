"""tools/rtn_precision_ab.py prints a p50 and p99 for each RTN and case."""

import re

from canis.tools import rtn_precision_ab


def test_prints_both_cases_for_each_model(tiny_rtn, capsys):
    rtn_precision_ab.main([str(tiny_rtn), str(tiny_rtn)], repeats=30)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2  # one path given twice: one model, two cases
    for line in lines:
        assert re.search(r"p50 \d+\.\d{3} ms, p99 \d+\.\d{3} ms$", line)

"""A pytest plugin that writes each test's CPU time, to find what makes the suite slow where
wall time misleads (a loaded machine, a CPU quota, two workers sharing the cores):

    CANIS_TEST_CPU_OUT=/tmp/cpu ./run test -q -p tests.cpu_times

writes /tmp/cpu.<worker> per test process (gw0, gw1, ...; main for the one that hands out
the tests, or runs them with -n 0): a first line `#total SELF CHILDREN` for the whole
process, then one line per test `NODEID SELF CHILDREN WALL` in seconds, tab-separated.
SELF is the process's own user + system time (all its threads), CHILDREN that of the
subprocesses it waited for (canis commands, pip, torchrun, the X11 demo); both include setup
and teardown. docs/RELIABILITY.md, "The test suite's time".
"""

from __future__ import annotations

import os
import resource
import time

import pytest

_rows: list[tuple[str, float, float, float]] = []


def _cpu_s() -> tuple[float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    own, children = _cpu_s()
    start = time.perf_counter()
    yield
    own_after, children_after = _cpu_s()
    wall = time.perf_counter() - start
    _rows.append((item.nodeid, own_after - own, children_after - children, wall))


def pytest_sessionfinish(session):
    out = os.environ.get("CANIS_TEST_CPU_OUT")
    if not out:
        return
    own, children = _cpu_s()
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    lines = [f"#total\t{own:.2f}\t{children:.2f}"]
    lines += [f"{name}\t{a:.3f}\t{b:.3f}\t{w:.3f}" for name, a, b, w in _rows]
    with open(f"{out}.{worker}", "w") as file:
        file.write("\n".join(lines) + "\n")

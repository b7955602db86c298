"""The python blocks of docs/EMBEDDING.md run as written (issue 23 item 8): each is executed
in a fresh namespace in a scratch folder; the main loop's `frame` function is then called
for a few frames with stand-in input and drawing."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

EMBEDDING = Path(__file__).resolve().parents[1] / "docs" / "EMBEDDING.md"
BLOCKS = re.findall(r"```python\n(.*?)```", EMBEDDING.read_text(), flags=re.DOTALL)


def test_the_embedding_guide_has_python_blocks():
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_an_embedding_guide_block_runs(index, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # a block may write files (a trace)
    namespace: dict = {"__name__": "embedding_guide"}
    block = BLOCKS[index]
    if "def frame(" in block:
        # The loop's frame function is defined before the end-of-game lines run; call it
        # in between, as a game would, with two dogs' stand-in input.
        body, marker, ending = block.partition("# ... at the end")
        ending = marker + ending
        exec(compile(body, f"EMBEDDING.md block {index}", "exec"), namespace)
        inputs = SimpleNamespace(
            velocities=np.array([[0.0, 1.0], [0.5, 0.0]]),
            facings=np.zeros(2),
            actions=["move", "idle"],
        )
        drawn = []
        for _ in range(3):
            namespace["frame"](1 / 60, inputs, lambda p, r: drawn.append(p.shape))
        assert drawn == [(2, 27, 3)] * 3
        exec(compile(ending, f"EMBEDDING.md block {index} (end)", "exec"), namespace)
        assert (tmp_path / "trace.json").stat().st_size > 0
    else:
        exec(compile(block, f"EMBEDDING.md block {index}", "exec"), namespace)
    if "ControlState.velocity_mps must have shape (2, 2)" in block:
        assert (
            "ControlState.velocity_mps must have shape (2, 2) for 2 dog(s)"
            in capsys.readouterr().out
        )

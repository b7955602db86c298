"""A `canis run --trace` of 20 s with transitions, read by third-party readers no one here
wrote (tools/trace_check/check_trace.mjs): ajv against a strict JSON Schema of the Chrome
Trace Event Format, @tracerbench/trace-model, and Chrome DevTools' trace engine. Every stage
must nest in its frame, and each transition's generation in the frame whose script event
asked for it. `./run test` installs the readers with npm; without node or npm these tests
are skipped with the reason."""

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from canis.runtime.assets import shipped_model_path
from canis.tools.run import run

CHECKER = Path(__file__).resolve().parent.parent / "tools" / "trace_check"
NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(
    NODE is None or not (CHECKER / "node_modules" / "@tracerbench" / "trace-model").is_dir(),
    reason="the trace readers are not installed: `npm ci --prefix tools/trace_check` "
    "(./run test does it where npm is present)",
)
# Transitions start at these seconds; at 60 Hz the frame that pays for each is 60 x t.
SCRIPT = [
    {"t": 0.0, "move": [0, 1], "speed": 1.1, "action": "move"},
    {"t": 2.0, "transition": {"to": "sit", "frames": 45}},
    {"t": 5.0, "move": [0, 1], "speed": 2.0, "action": "move"},
    {"t": 8.0, "transition": {"to": "lie", "frames": 30}},
    {"t": 11.0, "move": [1, 1], "speed": 1.5, "action": "move"},
    {"t": 14.0, "transition": {"to": "beg", "frames": 60}},
    {"t": 17.0, "move": [0, 1], "speed": 1.0, "action": "move"},
]


def read(trace: Path) -> dict:
    out = subprocess.run(
        [NODE, str(CHECKER / "check_trace.mjs"), str(trace)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.fixture(scope="module")
def twenty_seconds(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("trace")
    (folder / "script.json").write_text(json.dumps(SCRIPT))
    run(
        shipped_model_path(),
        20.0,
        script=folder / "script.json",
        trace=folder / "trace.json",
    )
    return folder / "trace.json"


def test_a_twenty_second_trace_reads_cleanly_with_every_stage_in_its_frame(twenty_seconds):
    report = read(twenty_seconds)
    assert report["schema"] == {"valid": True, "errors": []}
    tb = report["tracerbench"]
    # input, trajectory, features, inference, decode, ik in every frame (a headless run draws
    # nothing, so it times no render stage), transitions besides
    assert tb["frames"] == 1200 and tb["stages"] >= 6 * 1200
    assert tb["orphanStages"] == 0 and tb["stagesInNonFrames"] == 0 and tb["nestedFrames"] == 0
    assert tb["processes"][0]["name"].startswith("canis run")
    assert tb["processes"][0]["threads"][0]
    # 7 script events, 3 transition starts, 3 hand-backs
    assert tb["instants"] == 13
    assert tb["counters"]["speed_mps"] == 1200 and tb["counters"]["expert_weights_dog0"] == 1200
    # Transitions are generated over the frames that play them: each run of frames holding a
    # transition slice starts in the frame whose script event asked for it.
    frames = sorted({t["frame"] for t in tb["transitions"]})
    starts = [f for f in frames if f - 1 not in frames]
    assert starts == [120, 480, 840]
    (devtools,) = report["devtools"]["threads"]
    assert devtools["rootNames"] == {"frame": 1200}
    assert devtools["children"] == tb["stages"] and devtools["maxDepth"] == 2


def test_the_readers_reject_a_trace_without_frames_or_categories(tmp_path):
    """What `canis run --trace` wrote before: stages as top-level slices, no `cat`."""
    events = [
        {"name": name, "ph": "X", "pid": 1, "tid": 1, "ts": 10.0 * i, "dur": 5.0}
        for i, name in enumerate(["input", "inference", "ik"])
    ]
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"traceEvents": events, "displayTimeUnit": "ms"}))
    report = read(path)
    assert not report["schema"]["valid"]
    assert any("cat" in error for error in report["schema"]["errors"])
    # tracerbench fails on an event without a category, as a user found.
    assert "split" in report["tracerbench"]["error"]

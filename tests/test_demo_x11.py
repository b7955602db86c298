"""The real demo end to end, as a user runs it: `canis demo` in its own process on a virtual X
display (Xvfb, Mesa's llvmpipe GL), keys held and pressed through X by xdotool (XTEST, the
events a keyboard makes), and what the user would see read back from the demo's
--status-file (one JSON line per simulated frame) and its own screenshots.

Skipped, saying why, without Xvfb and xdotool (`.ci/run` installs them) or the shipped models.
Waits count simulated frames, not seconds, so a slow machine only makes it take longer.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from canis.runtime.assets import DEFAULT_MOTION_MODEL, SHIPPED_MOTION_MODELS, asset_path
from canis.runtime.transition import shipped_transition_model_path

pytestmark = [
    pytest.mark.skipif(
        not (shutil.which("Xvfb") and shutil.which("xdotool")),
        reason="needs Xvfb and xdotool (Debian: apt-get install xvfb xdotool; .ci/run does)",
    ),
    pytest.mark.skipif(
        not asset_path(SHIPPED_MOTION_MODELS[DEFAULT_MOTION_MODEL], must_exist=False).is_file()
        or not shipped_transition_model_path().is_file(),
        reason="needs the shipped MANN-8 and transition network",
    ),
]
START_TIMEOUT_S = 60.0
FRAME_TIMEOUT_S = 90.0


class VirtualDisplay:
    """Xvfb on a display number it picks itself (-displayfd: no clash with one in use)."""

    def __init__(self):
        read, write = os.pipe()
        self.process = subprocess.Popen(
            ["Xvfb", "-displayfd", str(write), "-screen", "0", "1280x800x24", "-nolisten", "tcp"],
            pass_fds=(write,),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(write)
        with os.fdopen(read) as pipe:
            number = pipe.readline().strip()
        if not number:
            self.process.kill()
            pytest.skip("Xvfb did not start")
        self.name = f":{number}"

    def close(self):
        self.process.terminate()
        self.process.wait(10)


class RunningDemo:
    def __init__(self, display: VirtualDisplay, folder: Path, *args: str):
        self.display, self.folder = display, folder
        self.status_path = folder / "status.jsonl"
        self.out = folder / "out"
        self.env = dict(os.environ, DISPLAY=display.name)
        self.process = subprocess.Popen(
            [sys.executable, "-c", "import sys; from canis.cli import main; sys.exit(main())"]
            + ["demo", "--out", str(self.out), "--status-file", str(self.status_path), *args],
            cwd=folder,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[dict] = []
        self._read = 0
        self.window = None

    def xdotool(self, *args: str) -> str:
        return subprocess.run(
            ["xdotool", *args], env=self.env, check=True, capture_output=True, text=True
        ).stdout

    def start(self) -> None:
        self.wait_for(lambda s: s["frame"] >= 30, START_TIMEOUT_S, "the demo's first frames")
        self.window = self.xdotool("search", "--name", "canis: MANN").split()[0]
        self.xdotool("windowfocus", "--sync", self.window)

    def poll(self) -> list[dict]:
        if self.status_path.exists():
            with self.status_path.open() as file:
                file.seek(self._read)
                chunk = file.read()
            complete = chunk[: chunk.rfind("\n") + 1]
            self._read += len(complete.encode())
            self.lines += [json.loads(line) for line in complete.splitlines()]
        if self.process.poll() is not None and not self.lines:
            raise AssertionError(f"the demo exited: {self.process.stdout.read()}")
        return self.lines

    @property
    def last(self) -> dict:
        return self.poll()[-1]

    def wait_for(self, condition, timeout_s=FRAME_TIMEOUT_S, what="a condition") -> dict:
        deadline = time.monotonic() + timeout_s
        seen = len(self.lines)
        while time.monotonic() < deadline:
            lines = self.poll()
            for line in lines[max(seen - 1, 0) :]:
                if condition(line):
                    return line
            seen = len(lines)
            if self.process.poll() is not None:
                raise AssertionError(f"the demo exited while waiting for {what}")
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what}; last status {self.lines[-1:]}")

    def frames(self, count: int) -> dict:
        """Waits until `count` more frames have been simulated."""
        target = self.last["frame"] + count
        return self.wait_for(lambda s: s["frame"] >= target, what=f"frame {target}")

    def hold(self, keys: list[str], frames: int) -> list[dict]:
        """The frames simulated while `keys` were held: those after the first and up to the
        last seen before the key-up (the demo goes on stepping while the key-up travels)."""
        first = self.last["frame"]
        self.xdotool("keydown", *keys)
        held_until = self.frames(frames)["frame"]
        self.xdotool("keyup", *keys)
        return [s for s in self.poll() if first < s["frame"] <= held_until]

    def press(self, key: str) -> None:
        self.xdotool("key", key)


@pytest.fixture
def demo(tmp_path):
    display = VirtualDisplay()
    # The smallest window the demo opens: still the real window, keys and frames (its
    # screenshots are of it), with fewer pixels for llvmpipe to fill; 17 -> 14 s of CPU.
    running = RunningDemo(display, tmp_path, "--size", "320x200")
    try:
        yield running
    finally:
        if running.process.poll() is None:
            running.process.kill()
            running.process.wait(10)
        display.close()
        keep = os.environ.get("CANIS_E2E_KEEP")  # a folder to keep the screenshots in
        if keep and running.out.exists():
            shutil.copytree(running.out, keep, dirs_exist_ok=True)


def test_the_real_demo_under_x(demo):
    from canis.cli import main

    demo.start()
    start = demo.last
    # W held: forward (the camera looks along +z), at about the walk's 1.1 m/s. The holds
    # and waits are as short as what they check allows (2.5 s of walk went 3.0 m, the canter
    # reached 2.8x the walk's speed): every simulated frame costs
    # the demo about 8 ms of CPU under llvmpipe, the suite's largest single cost (issue 20).
    walk = demo.hold(["w"], 150)
    assert walk[-1]["z_m"] - start["z_m"] > 1.0, "W held did not move the dog forward"
    assert all(s["asked_mps"] == pytest.approx(1.1) for s in walk[-120:])  # W held down
    walk_speed = walk[-1]["speed_mps"]
    demo.press("F12")
    demo.wait_for(lambda s: s["saved"] and s["saved"].endswith(".png"), what="a screenshot")
    # Shift+W: faster.
    canter = demo.hold(["shift", "w"], 150)
    assert canter[-1]["speed_mps"] > 1.8 * walk_speed, (walk_speed, canter[-1]["speed_mps"])
    demo.frames(90)
    # Q: turns on the spot. Not shorter: under a CPU quota of a slow machine's speed the demo
    # simulates several frames per drawn one, the key's press and release reach it a few
    # frames late, and 45 frames of slowing down and 60 of Q turned only 0.20 rad.
    before = demo.last["yaw_rad"]
    turned = demo.hold(["q"], 90)
    assert abs(np.angle(np.exp(1j * (turned[-1]["yaw_rad"] - before)))) > 0.25
    # 2: sits (through the transition network).
    demo.press("2")
    demo.wait_for(lambda s: s["in_transition"], what="the sit transition")
    demo.wait_for(lambda s: s["action"] == "sit" and not s["in_transition"], what="sitting")
    demo.press("F12")
    # W held, then 2 (issue 21 item 4): the dog slows to a stop, then sits, and the held W does
    # not get it up again.
    demo.press("1")
    demo.wait_for(lambda s: s["action"] == "idle" and not s["in_transition"], what="standing")
    demo.xdotool("keydown", "w")
    demo.frames(60)
    demo.press("2")
    demo.wait_for(lambda s: s["stopping"], what="the dog stopping for the sit")
    demo.wait_for(lambda s: s["in_transition"], what="the sit transition after the stop")
    sat = demo.wait_for(lambda s: s["action"] == "sit" and not s["in_transition"], what="sat")
    held = demo.frames(120)  # the HUD's speed is a 2 s mean
    demo.xdotool("keyup", "w")
    assert held["action"] == "sit" and held["asked_mps"] == 0.0 and held["speed_mps"] < 0.2
    assert sat["notice"].startswith("transition to sit")
    # R: stands at the origin again, no longer sitting.
    demo.press("r")
    reset = demo.wait_for(lambda s: abs(s["x_m"]) + abs(s["z_m"]) < 0.05, what="the reset")
    demo.frames(30)
    assert demo.last["action"] == "idle"
    # Space while moving: exactly one jump.
    jumps = reset["jumps"]
    demo.xdotool("keydown", "w")
    demo.frames(60)
    mark = demo.last["frame"]
    demo.press("space")
    demo.hold(["w"], 100)  # w is still down: keydown again is harmless
    during = [s for s in demo.poll() if s["frame"] >= mark]  # from before the press
    asked = np.array([s["asked_action"] == "jump" for s in during])
    assert during[-1]["jumps"] == jumps + 1
    assert not asked[0] and np.sum(np.diff(asked.astype(int)) == 1) == 1 and not asked[-1]
    demo.frames(30)
    # F5, keys, F5: a recording that canis run --script replays on the same ground.
    demo.press("F5")
    demo.wait_for(lambda s: s["recording"], what="recording")
    demo.press("F12")  # the REC indicator in a screenshot
    demo.hold(["w"], 60)
    demo.hold(["e"], 30)
    demo.press("F5")
    saved = demo.wait_for(
        lambda s: s["saved"] and s["saved"].endswith(".json"), what="the saved recording"
    )
    recorded = [s for s in demo.poll() if s["recording"]]
    script = Path(saved["saved"])
    assert script.parent == demo.out and str(script) in saved["notice"]
    header = json.loads(script.read_text())
    assert header["model"] == "MANN-8" and header["terrain"] == "hills"
    summary = demo.folder / "replay.json"
    replay = demo.folder / "replay.npz"
    assert (
        main(["run", "--script", str(script), "--json", str(summary), "--record", str(replay)]) == 0
    )
    assert json.loads(summary.read_text())["terrain"] == "hills"
    roots = np.load(replay)["roots"]
    assert len(roots) == len(recorded)
    final = recorded[-1]
    assert roots[-1][[0, 2]] == pytest.approx([final["x_m"], final["z_m"]], abs=2e-3)
    # Escape: exits cleanly.
    demo.press("Escape")
    assert demo.process.wait(30) == 0
    shots = sorted(demo.out.glob("*.png"))
    assert len(shots) == 3 and all(p.stat().st_size > 0 for p in shots)


def test_no_display_and_no_gl33_each_say_so_in_one_line(tmp_path):
    command = [sys.executable, "-c", "import sys; from canis.cli import main; sys.exit(main())"]
    gone = subprocess.run(
        command + ["demo"],
        env=dict(os.environ, DISPLAY=":4093"),  # nothing listens there
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert gone.returncode == 2
    assert gone.stderr.strip().count("\n") == 0 and "cannot open the display" in gone.stderr
    display = VirtualDisplay()
    try:
        old_gl = subprocess.run(  # Mesa told to offer OpenGL 2.1 at most
            command + ["demo"],
            env=dict(os.environ, DISPLAY=display.name, MESA_GL_VERSION_OVERRIDE="2.1"),
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        display.close()
    assert old_gl.returncode == 2, old_gl.stderr
    assert "no OpenGL 3.3" in old_gl.stderr and old_gl.stderr.strip().count("\n") == 0

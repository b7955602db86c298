"""The HUD's text: one pyglet label per line (a line never wraps, whatever the window's
width), a notice that expires, the frames-per-second figure, the controller's step time against
the frame budget (the render apart) and a recording indicator.

Laying text out is slow in pyglet (milliseconds under Mesa's software renderer), so the
lines are rebuilt a few times a second; the recording indicator only when its seconds change.
Every label (and the plots' titles, which DemoApp adds to `batch`) is drawn by one pyglet
Batch, and labels are moved only when the window's height changes: moving a label re-lays it
out, which costs about 9 ms a frame under llvmpipe when every line is moved and drawn alone.
"""

from __future__ import annotations

import time
from collections import deque

import numpy as np
from canis.runtime.profiler import FRAME_BUDGET_MS, WINDOW_FRAMES

TEXT_COLOUR = (20, 20, 30, 255)
NOTICE_COLOUR = (120, 40, 0, 255)
RECORDING_COLOUR = (200, 20, 20, 255)
FONT_SIZE = 11
LINE_SPACING_PX = 18
NOTICE_SECONDS = 4.0
RECORDING_ROOM_PX = 230  # the top right, kept free for the recording indicator
FPS_WINDOW_S = 1.0
STEP_WINDOW = WINDOW_FRAMES  # the controller's steps its p50/p99 are over (10 s at 60 Hz)


class FrameRate:
    """Frames drawn per second over the last FPS_WINDOW_S of wall time."""

    def __init__(self, clock=time.monotonic):
        self.clock = clock
        self.times: deque[float] = deque()

    def tick(self) -> None:
        now = self.clock()
        self.times.append(now)
        while len(self.times) > 2 and now - self.times[0] > FPS_WINDOW_S:
            self.times.popleft()

    @property
    def fps(self) -> float:
        if len(self.times) < 2 or self.times[-1] <= self.times[0]:
            return 0.0
        return (len(self.times) - 1) / (self.times[-1] - self.times[0])


class StepTimes:
    """The controller's time per simulation step (what a game calls each 60 Hz frame:
    PostureRequests.step, i.e. Controller.step and any transition it starts), against the
    frame budget: the demo's displayed frame also holds the software render (milliseconds
    under Mesa's llvmpipe), which says nothing about what the controller costs a game."""

    def __init__(self, budget_ms: float = FRAME_BUDGET_MS, window: int = STEP_WINDOW):
        self.budget_ms = budget_ms
        self.recent: deque[float] = deque(maxlen=window)
        self.steps = 0
        self.over = 0  # steps over budget_ms since the demo started

    def add(self, ms: float) -> None:
        self.recent.append(ms)
        self.steps += 1
        self.over += ms > self.budget_ms

    def percentile_ms(self, q: float) -> float:
        return float(np.percentile(self.recent, q)) if self.recent else float("nan")


def _ms(value: float, digits: int) -> str:
    return "-" if value != value else f"{value:.{digits}f}"  # NaN: nothing measured yet


def timing_line(steps: StepTimes, render_p50_ms: float) -> str:
    """The HUD's timing line: the controller's step against the budget, the render apart."""
    return (
        f"controller step p50 {_ms(steps.percentile_ms(50), 2)} ms p99 "
        f"{_ms(steps.percentile_ms(99), 2)} ms ({steps.over} over {steps.budget_ms:g} ms)  |  "
        f"render p50 {_ms(render_p50_ms, 1)} ms (not in the budget)"
    )


class Notice:
    """One message on the HUD that disappears NOTICE_SECONDS after it was said."""

    def __init__(self, clock=time.monotonic):
        self.clock = clock
        self.text, self.until = "", 0.0

    def say(self, text: str, seconds: float = NOTICE_SECONDS) -> None:
        self.text, self.until = text, self.clock() + seconds

    @property
    def current(self) -> str:
        if self.text and self.clock() >= self.until:
            self.text = ""
        return self.text


class HudText:
    def __init__(self, pyglet, max_lines: int = 10):
        self.pyglet = pyglet
        self.batch = pyglet.graphics.Batch()
        self.lines = [
            pyglet.text.Label(
                "",
                x=10,
                y=0,
                anchor_y="top",
                font_size=FONT_SIZE,
                color=TEXT_COLOUR,
                batch=self.batch,
            )
            for _ in range(max_lines)
        ]
        self.recording = pyglet.text.Label(
            "",
            y=0,
            anchor_x="right",
            anchor_y="top",
            font_size=14,
            color=RECORDING_COLOUR,
            batch=self.batch,
        )
        self.placed_for = None  # the (width, height) the labels were last placed for

    def set_lines(self, texts: list[tuple[str, tuple]], window_width: int) -> None:
        """(text, colour) per line from the top; missing lines are blanked. A line wider than
        the window leaves (beside the recording indicator) loses its middle to an ellipsis,
        so a long file name keeps its start and its end."""
        texts = (texts + [("", TEXT_COLOUR)] * len(self.lines))[: len(self.lines)]
        room_px = window_width - 20 - RECORDING_ROOM_PX
        for label, (text, colour) in zip(self.lines, texts, strict=True):
            if label.text != text:
                label.text = text
                keep = len(text)
                while label.content_width > room_px and keep > 8:
                    keep = min(keep - 2, int(keep * room_px / label.content_width))
                    label.text = text[: keep // 2] + "\u2026" + text[len(text) - keep // 2 :]
            if tuple(label.color) != tuple(colour):
                label.color = colour

    def set_recording(self, text: str) -> None:
        if self.recording.text != text:
            self.recording.text = text

    def widest_px(self) -> int:
        """The widest line's width in pixels (the test that nothing would wrap reads it)."""
        return max([int(label.content_width) for label in self.lines] + [0])

    def draw(self, width: int, height: int) -> None:
        """Draws every label in the batch (the HUD's lines, the recording indicator and what
        else was added to it) with one call."""
        if self.placed_for != (width, height):
            for i, label in enumerate(self.lines):
                label.y = height - 8 - i * LINE_SPACING_PX
            self.recording.position = (width - 12, height - 8, 0)
            self.placed_for = (width, height)
        self.batch.draw()

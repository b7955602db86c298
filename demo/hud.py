"""HUD plots drawn as 2-D lines in pixel coordinates: per-stage frame time against the 2 ms
budget, the MANN expert weights over the last seconds (the paper's Fig. 9), and the four
paws' footfalls (its Fig. 2)."""

from __future__ import annotations

import numpy as np
from pyglet.gl import GL_LINES
from pyglet.graphics.shader import Shader, ShaderProgram

VERTEX = """#version 330 core
in vec2 position;
in vec4 colour;
uniform vec2 viewport;
out vec4 line_colour;
void main() {
    gl_Position = vec4(position / viewport * 2.0 - 1.0, 0.0, 1.0);
    line_colour = colour;
}
"""
FRAGMENT = """#version 330 core
in vec4 line_colour;
out vec4 fragment;
void main() { fragment = line_colour; }
"""
STAGE_COLOURS = {
    "input": (0.5, 0.5, 0.5),
    "trajectory": (0.2, 0.5, 0.9),
    "features": (0.1, 0.7, 0.7),
    "inference": (0.9, 0.4, 0.1),
    "decode": (0.6, 0.3, 0.8),
    "transition": (0.85, 0.2, 0.55),
    "ik": (0.2, 0.7, 0.2),
    "render": (0.55, 0.45, 0.1),
    "other": (0.3, 0.3, 0.3),  # what no stage timed inside the frame
}
BUDGET_COLOUR = (0.9, 0.1, 0.1)
EXPERT_COLOURS = [
    (0.12, 0.47, 0.71),
    (1.0, 0.5, 0.05),
    (0.17, 0.63, 0.17),
    (0.84, 0.15, 0.16),
    (0.58, 0.4, 0.74),
    (0.55, 0.34, 0.29),
    (0.89, 0.47, 0.76),
    (0.5, 0.5, 0.5),
]
PANEL = (300, 100)  # pixels
# The frame-time plot holds the profiler's window (600 frames, 2 per pixel column, 9 stacked
# lines): llvmpipe draws each segment as a small primitive, so the frames are taken in bins
# of a few, each bin showing its slowest frame (spikes stay visible), at most this many.
FRAME_PLOT_POINTS = PANEL[0] // 2
# The frame-time graph's full height is the first of these above the recent frames' p99 (and
# above the budget, so its line shows): a slow machine's frames are not pinned at the top.
GRAPH_SCALES_MS = (2.5, 4, 5, 8, 10, 15, 20, 30, 50, 100, 200, 500)


def graph_scale_ms(totals_ms: np.ndarray, budget_ms: float) -> float:
    """The graph's full height for frames whose stacked totals are `totals_ms`."""
    top = max(budget_ms * 1.25, float(np.percentile(totals_ms, 99)) * 1.1 if len(totals_ms) else 0)
    return next((s for s in GRAPH_SCALES_MS if s >= top), GRAPH_SCALES_MS[-1])


def _polyline(xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """Segments (K-1, 4) joining consecutive points."""
    return np.stack([xs[:-1], ys[:-1], xs[1:], ys[1:]], axis=1)


def _box(x, y, w, h) -> np.ndarray:
    return np.array(
        [[x, y, x + w, y], [x + w, y, x + w, y + h], [x + w, y + h, x, y + h], [x, y + h, x, y]],
        dtype=float,
    )


class HudPlots:
    """Builds the plots' line segments with numpy when asked (a few times a second) and draws
    the cached vertex list every frame."""

    def __init__(self):
        self.program = ShaderProgram(Shader(VERTEX, "vertex"), Shader(FRAGMENT, "fragment"))
        self.pieces: list[tuple[np.ndarray, tuple]] = []  # (segments (K, 4), rgba)
        self.lines = None

    def _add(self, segments: np.ndarray, colour, alpha: float = 1.0) -> None:
        if len(segments):
            self.pieces.append((segments, (*colour, alpha)))

    def frame_times(self, x, y, stages: dict[str, np.ndarray], budget_ms: float) -> float:
        """Stacked per-stage times of the recent frames (oldest left; arrays aligned by
        frame, 0 where a stage did not run) and the budget line; returns the graph's full
        height in ms."""
        w, h = PANEL
        count = min((len(v) for v in stages.values()), default=0)
        totals = sum((np.asarray(v)[-count:] for v in stages.values()), np.zeros(count))
        scale = graph_scale_ms(totals, budget_ms)
        self._add(_box(x, y, w, h), (0.25, 0.25, 0.3), 0.8)
        level = y + h * budget_ms / scale
        self._add(np.array([[x, level, x + w, level]]), BUDGET_COLOUR)
        if count < 2:
            return scale
        # Each stage's line is the running total up to it, frame by frame (stacked).
        stacked = np.cumsum([np.asarray(v, dtype=float)[-count:] for v in stages.values()], axis=0)
        if count > FRAME_PLOT_POINTS:
            # A bin's maximum of each running total keeps the lines in order, as each frame's are.
            starts = np.linspace(0, count, FRAME_PLOT_POINTS, endpoint=False).astype(int)
            stacked = np.maximum.reduceat(stacked, starts, axis=1)
        xs = x + np.linspace(0, w, stacked.shape[1])
        for name, below in zip(stages, stacked, strict=True):
            self._add(
                _polyline(xs, y + h * np.clip(below / scale, 0, 1)),
                STAGE_COLOURS.get(name, (0, 0, 0)),
            )
        return scale

    def experts(self, x, y, history: np.ndarray) -> None:
        """One line per expert weight over the recent frames."""
        w, h = PANEL
        self._add(_box(x, y, w, h), (0.25, 0.25, 0.3), 0.8)
        if len(history) < 2:
            return
        xs = x + np.linspace(0, w, len(history))
        for k in range(history.shape[1]):
            self._add(_polyline(xs, y + h * history[:, k]), EXPERT_COLOURS[k % len(EXPERT_COLOURS)])

    def footfalls(self, x, y, contacts: np.ndarray) -> None:
        """A bar per paw (rows: left front, right front, left hind, right hind) where down."""
        w, h = PANEL
        self._add(_box(x, y, w, h), (0.25, 0.25, 0.3), 0.8)
        if len(contacts) < 2:
            return
        step = w / len(contacts)
        for paw in range(4):
            row = y + h - (paw + 0.5) * h / 4
            down = np.flatnonzero(contacts[:, paw]).astype(float)
            self._add(
                np.stack(
                    [
                        x + down * step,
                        np.full_like(down, row),
                        x + (down + 1) * step,
                        np.full_like(down, row),
                    ],
                    axis=1,
                ),
                (0.1, 0.1, 0.15),
            )

    def build(self) -> None:
        """Turns the pieces added since the last build into the vertex list draw() shows."""
        if self.lines is not None:
            self.lines.delete()
            self.lines = None
        if not self.pieces:
            return
        positions = np.concatenate([p[0] for p in self.pieces]).reshape(-1).astype(np.float32)
        colours = np.concatenate([np.tile(c, (2 * len(p), 1)) for p, c in self.pieces])
        self.lines = self.program.vertex_list(
            len(positions) // 2,
            GL_LINES,
            position=("f", positions.tolist()),
            colour=("f", colours.astype(np.float32).reshape(-1).tolist()),
        )
        self.pieces = []

    def draw(self, width: int, height: int) -> None:
        if self.lines is None:
            return
        self.program.use()
        self.program["viewport"] = (float(width), float(height))
        self.lines.draw(GL_LINES)
        self.program.stop()

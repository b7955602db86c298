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
    "ik": (0.2, 0.7, 0.2),
}
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
GRAPH_MS = 4.0  # the frame-time graph's full height


class HudPlots:
    def __init__(self):
        self.program = ShaderProgram(Shader(VERTEX, "vertex"), Shader(FRAGMENT, "fragment"))
        self.segments: list[tuple[float, float, float, float, tuple]] = []

    def _line(self, x0, y0, x1, y1, colour, alpha=1.0) -> None:
        self.segments.append((x0, y0, x1, y1, (*colour, alpha)))

    def _polyline(self, xs, ys, colour) -> None:
        for i in range(len(xs) - 1):
            self._line(xs[i], ys[i], xs[i + 1], ys[i + 1], colour)

    def _frame(self, x, y, w, h) -> None:
        grey = (0.25, 0.25, 0.3)
        for x0, y0, x1, y1 in (
            (x, y, x + w, y),
            (x + w, y, x + w, y + h),
            (x + w, y + h, x, y + h),
            (x, y + h, x, y),
        ):
            self._line(x0, y0, x1, y1, grey, 0.8)

    def frame_times(self, x, y, stages: dict[str, np.ndarray], budget_ms: float) -> None:
        """Stacked per-stage times of the recent frames (oldest left) and the budget line."""
        w, h = PANEL
        self._frame(x, y, w, h)
        self._line(
            x, y + h * budget_ms / GRAPH_MS, x + w, y + h * budget_ms / GRAPH_MS, (0.9, 0.1, 0.1)
        )
        count = min((len(v) for v in stages.values()), default=0)
        if count < 2:
            return
        xs = x + np.linspace(0, w, count)
        below = np.zeros(count)
        for name, values in stages.items():
            top = below + np.asarray(values)[-count:]
            self._polyline(
                xs, y + h * np.clip(top / GRAPH_MS, 0, 1), STAGE_COLOURS.get(name, (0, 0, 0))
            )
            below = top

    def experts(self, x, y, history: np.ndarray) -> None:
        """One line per expert weight over the recent frames."""
        w, h = PANEL
        self._frame(x, y, w, h)
        if len(history) < 2:
            return
        xs = x + np.linspace(0, w, len(history))
        for k in range(history.shape[1]):
            self._polyline(xs, y + h * history[:, k], EXPERT_COLOURS[k % len(EXPERT_COLOURS)])

    def footfalls(self, x, y, contacts: np.ndarray) -> None:
        """A bar per paw (rows: left front, right front, left hind, right hind) where down."""
        w, h = PANEL
        self._frame(x, y, w, h)
        if len(contacts) < 2:
            return
        step = w / len(contacts)
        for paw in range(4):
            row = y + h - (paw + 0.5) * h / 4
            down = np.flatnonzero(contacts[:, paw])
            for i in down:
                self._line(x + i * step, row, x + (i + 1) * step, row, (0.1, 0.1, 0.15))

    def draw(self, width: int, height: int) -> None:
        if not self.segments:
            return
        positions, colours = [], []
        for x0, y0, x1, y1, colour in self.segments:
            positions += [x0, y0, x1, y1]
            colours += [*colour, *colour]
        self.program.use()
        self.program["viewport"] = (float(width), float(height))
        lines = self.program.vertex_list(
            len(positions) // 2, GL_LINES, position=("f", positions), colour=("f", colours)
        )
        lines.draw(GL_LINES)
        lines.delete()
        self.program.stop()
        self.segments = []

"""Fixed-timestep stepping decoupled from the display rate.

Real time accumulates; the simulation runs whole 1/60 s steps out of it. A frame that took too
long (a dragged window, a breakpoint) would otherwise demand a burst of catch-up steps that
take long in turn and spiral; at most `max_steps` run per frame and the rest of the backlog is
dropped, so the game slows down for that moment instead of freezing.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from canis.runtime.features import FPS

STEP_S = 1.0 / FPS
MAX_STEPS_PER_FRAME = 4


@dataclass
class FixedTimestep:
    step_s: float = STEP_S
    max_steps: int = MAX_STEPS_PER_FRAME
    accumulator_s: float = 0.0
    dropped_s: float = 0.0  # simulated time given up to stay real-time, in total
    steps_taken: int = 0

    def advance(self, elapsed_s: float) -> int:
        """How many steps to simulate for `elapsed_s` of real time (0 to max_steps)."""
        if not elapsed_s >= 0.0:  # NaN or negative clocks: simulate nothing, keep going
            return 0
        self.accumulator_s += elapsed_s
        steps = int(self.accumulator_s // self.step_s)
        if steps > self.max_steps:
            self.dropped_s += (steps - self.max_steps) * self.step_s
            steps = self.max_steps
            self.accumulator_s = self.accumulator_s % self.step_s
        else:
            self.accumulator_s -= steps * self.step_s
        self.steps_taken += steps
        return steps

    @property
    def alpha(self) -> float:
        """How far real time is between the last step and the next, for interpolated display."""
        return self.accumulator_s / self.step_s


def wait_for_next_tick(tick_s: float, step_s: float = STEP_S) -> float:
    """Sleeps until `tick_s + step_s` (time.perf_counter seconds) and returns it: called before
    each frame, it starts one every `step_s` as a game paced by its display does, the rest of
    the period slept (`canis run --pace`, `canis bench`'s paced frames). A frame that ran late
    is followed by the next at once, until the ticks catch up."""
    tick_s += step_s
    time.sleep(max(0.0, tick_s - time.perf_counter()))
    return tick_s

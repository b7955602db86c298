"""A game-prototype loop with two dogs on rolling hills: one driven by input, one following
a circular path. Headless here (the input is a stand-in for a gamepad); a game would draw
controller.display_pose() where this prints.

    ./run canis --help       (installs everything once), then
    .venv/bin/python examples/two_dogs.py [SECONDS]
"""

import math
import sys
import time

import numpy as np
from canis.runtime import Controller, ControlState, FixedTimestep, MotionModel, procedural
from canis.runtime.assets import shipped_model_path
from canis.runtime.control import follow_path
from canis.runtime.features import ACTIONS

SECONDS = 10.0
CIRCLE = np.array([[3 * math.sin(a), 3 * math.cos(a) - 3] for a in np.linspace(0, 2 * np.pi, 33)])


def gamepad(t_s: float) -> tuple[np.ndarray, float, str]:
    """Stand-in for a gamepad: trot ahead, veer left after 4 s, sit after 8 s."""
    if t_s > 8.0:
        return np.zeros(2), 0.6, "sit"
    facing = 0.0 if t_s < 4.0 else 0.6
    return 1.9 * np.array([math.sin(facing), math.cos(facing)]), facing, "move"


def main(seconds: float = SECONDS) -> None:
    model = MotionModel(shipped_model_path())
    dogs = Controller(model, count=2, terrain=procedural("hills"))
    dogs.reset(root_xz_m=[[0.0, 0.0], [0.0, 0.0]], yaw_rad=[0.0, math.pi / 2])
    loop, clock, t = FixedTimestep(), time.perf_counter(), 0.0
    while t < seconds:
        now = time.perf_counter()
        dogs.profiler.begin_frame()  # one displayed frame: its steps, then drawing it
        for _ in range(loop.advance(now - clock)):
            velocity, facing, action = gamepad(t)
            path = follow_path(CIRCLE, 1.1, dogs.root_xz_m[1], dogs.root_yaw_rad[1], loop=True)
            no_path = np.full_like(path.future_xz_m, np.nan)  # dog 0 is steered, not on a path
            dogs.step(
                ControlState(
                    np.stack([velocity, path.velocity_mps]),
                    np.array([facing, path.facing_yaw_rad]),
                    np.array([ACTIONS.index(action), ACTIONS.index("move")]),
                    np.stack([no_path, path.future_xz_m]),
                )
            )
            t += loop.step_s
        clock = now
        with dogs.profiler.stage("render"):
            positions, _ = dogs.display_pose()  # a game draws these (N, 27, 3) world positions
        dogs.profiler.end_frame()
        time.sleep(0.001)
    frame = dogs.profiler.summary()["stages"]["frame"]
    print(
        f"dog 0 at {np.round(dogs.root_xz_m[0], 2)}, dog 1 at {np.round(dogs.root_xz_m[1], 2)}"
        f"; displayed frame p50 {frame['p50_ms']:.2f} ms, p99 {frame['p99_ms']:.2f} ms, max "
        f"{frame['max_ms']:.2f} ms for two dogs"
    )


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else SECONDS)

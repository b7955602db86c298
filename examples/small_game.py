"""A small game with the whole API (docs/EMBEDDING.md): dogs join and leave at runtime, are
asked by action name, stop to sit and get up again, leave footstep sounds, report their gait,
and the game saves and reloads mid-run. The display runs at 144 Hz over the 60 Hz step and
draws the pose interpolated between steps. Headless: a game draws where this counts.

    ./run canis --help       (installs everything once), then
    .venv/bin/python examples/small_game.py [SECONDS]
"""

import pickle
import sys

import numpy as np
from canis.runtime import Controller, ControlState, FixedTimestep, MotionModel, procedural
from canis.runtime.actions import Action
from canis.runtime.assets import shipped_model_path
from canis.runtime.readouts import PAW_ORDER

SECONDS = 6.0
DISPLAY_HZ = 144.0  # faster than the step: display_pose(alpha) fills the frames between


def commands(dogs: Controller, t_s: float) -> ControlState:
    """Every dog trots ahead at 1.5 m/s, except that dog 0 sits from 2 s and gets up at 3 s."""
    n = dogs.count
    speed = np.full(n, 1.5)
    actions = [Action.MOVE] * n
    if 2.0 <= t_s < 3.0:
        speed[0], actions[0] = 0.0, "sit"
    elif 3.0 <= t_s < 3.5:
        speed[0], actions[0] = 0.0, "get_up"
    velocity = np.stack([np.zeros(n), speed], axis=1)  # world (x, z): all run towards +z
    return ControlState(velocity, np.zeros(n), actions)


def main(seconds: float = SECONDS) -> dict:
    dogs = Controller(MotionModel(shipped_model_path()), count=2, terrain=procedural("hills"))
    dogs.reset(root_xz_m=[[0.0, 0.0], [1.0, 0.0]])
    loop, t_s, steps, drawn = FixedTimestep(), 0.0, 0, 0
    footsteps = dict.fromkeys(PAW_ORDER, 0)
    saved, gaits = None, set()
    display_dt_s = 1.0 / DISPLAY_HZ
    while t_s < seconds:
        for _ in range(loop.advance(display_dt_s)):  # a game passes its measured frame time
            dogs.step(commands(dogs, t_s))
            t_s, steps = t_s + loop.step_s, steps + 1
            touch_downs, _ = dogs.footfalls()  # (N, 4) in PAW_ORDER: play a sound per paw
            for paw, count in zip(PAW_ORDER, touch_downs.sum(axis=0), strict=True):
                footsteps[paw] += int(count)
            if steps == 60:
                joined = dogs.add(1, root_xz_m=[[-1.0, 0.0]])  # a third dog joins
                print(f"dog {joined.tolist()} joined")  # its id
            if steps == 120:
                saved = pickle.dumps(dogs.get_state())  # e.g. to a save file
            if steps == 240:
                dogs.remove(ids=joined)  # and leaves (by id: rows move when dogs go)
            gaits.update(dogs.gaits())
        # The remainder of the accumulator, as a fraction of a step: how far to draw between
        # the last two steps.
        positions, rotations = dogs.display_pose(alpha=loop.alpha)
        drawn += 1
    boxes, ground = dogs.bounds_m(), dogs.ground_height_m()
    print(f"{steps} steps, {drawn} frames drawn at {DISPLAY_HZ:.0f} Hz; footsteps {footsteps}")
    print(f"gaits seen {sorted(gaits)}; ground under the dogs {np.round(ground, 2).tolist()} m")
    print(f"dog 0's box {np.round(boxes[0].astype(float), 2).tolist()} m")
    # Loading a save: the controller must have the same model and as many dogs as then.
    dogs.add(1)
    dogs.set_state(pickle.loads(saved))
    print(f"reloaded the save of step 120: {dogs.count} dogs, frame {dogs.frame}")
    return {"steps": steps, "drawn": drawn, "footsteps": footsteps, "gaits": gaits}


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else SECONDS)

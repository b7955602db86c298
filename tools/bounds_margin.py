"""How far the dog's body mesh reaches past the box around its joints, the margin
Controller.bounds_m() pads that box by (runtime/readouts.py, BOUNDS_MARGIN_M).

`python -m canis.tools.bounds_margin` drives the shipped model through the poses a game
shows (the four keyframes a dog can start in, then walking, trotting, cantering and turning,
each dog facing another way, so the world-aligned box sees the body from several sides),
skins the shipped mesh (runtime/body.py, what the viewer draws) on every frame, and prints
the largest distance by which a vertex lies past the joints' box: below it, above it, and
sideways (x or z).
"""

from __future__ import annotations

import argparse

import numpy as np
from canis.runtime.actions import Action
from canis.runtime.assets import shipped_model_path
from canis.runtime.body import load_body_mesh, skin_vertices, skinning_matrices
from canis.runtime.controller import Controller
from canis.runtime.inference import MotionModel
from canis.runtime.trajectory import ControlState

KEYFRAMES = ("stand", "sit", "lie", "beg")
# (speed m/s, turn rad/s) the moving dogs are asked for.
MOVES = ((0.6, 0.0), (1.9, 0.0), (3.3, 0.0), (1.1, 1.0))


def overshoot_m(positions_m: np.ndarray, vertices_m: np.ndarray) -> np.ndarray:
    """(below, above, sideways) how far the vertices (V, 3) reach past the box of the joints
    (J, 3): 0 where they stay inside."""
    low, high = positions_m.min(axis=0), positions_m.max(axis=0)
    past_low, past_high = low - vertices_m.min(axis=0), vertices_m.max(axis=0) - high
    sideways = max(past_low[0], past_low[2], past_high[0], past_high[2])
    return np.maximum([past_low[1], past_high[1], sideways], 0.0)


def measure(seconds: float = 4.0, every: int = 5) -> np.ndarray:
    """The largest (below, above, sideways) overshoot over the poses (module docstring),
    skinning every `every`-th frame of `seconds` of motion."""
    mesh = load_body_mesh()
    model = MotionModel(shipped_model_path())
    worst = np.zeros(3)

    def look(controller: Controller) -> None:
        nonlocal worst
        positions, rotations = controller.display_pose()
        for dog in range(controller.count):
            matrices = skinning_matrices(mesh, positions[dog], rotations[dog])
            vertices = skin_vertices(mesh, matrices)
            worst = np.maximum(worst, overshoot_m(positions[dog], vertices))

    facings = np.linspace(0.0, np.pi, 4, endpoint=False)  # 0, 45, 90, 135 degrees
    for keyframe in KEYFRAMES:
        still = Controller(model, count=len(facings), start_pose=keyframe)
        still.reset(yaw_rad=facings, start_pose=keyframe)
        look(still)
    n = len(MOVES)
    moving = Controller(model, count=n)
    moving.reset(root_xz_m=np.stack([np.arange(n) * 4.0, np.zeros(n)], 1), yaw_rad=facings[:n])
    speeds = np.array([s for s, _ in MOVES])
    turns = np.array([t for _, t in MOVES])
    for frame in range(round(seconds * 60)):
        facing = facings[:n] + turns * frame / 60
        velocity = speeds[:, None] * np.stack([np.sin(facing), np.cos(facing)], 1)
        moving.step(ControlState(velocity, facing, np.full(n, int(Action.MOVE))))
        if frame % every == 0:
            look(moving)
    return worst


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=4.0)
    args = parser.parse_args(argv)
    below, above, sideways = measure(args.seconds)
    print(
        f"mesh past the joints' box: below {below * 100:.1f} cm, above {above * 100:.1f} cm, "
        f"sideways {sideways * 100:.1f} cm"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""How well a motion network determines its joints' rotations in the demo's hardest stretch:
the demo (headless, its hills) held at W and Shift for 10 s of canter, then walking turns left
and right and a stop, driven by the window's own key events as in tests/test_demo.py.

Prints, for the head and both shoulders, the shortest forward and up axes the network
predicted (a unit axis is 1; an axis near 0 is one the decode cannot trust), and the largest
per-frame turn of the shown head and move of its end site (less the hips' own move). The
mirror's axis conventions (training/mirror.py) were traced with it: docs/EVALUATION.md.

    python -m canis.tools.axis_probe assets/models/mann8.onnx
"""

from __future__ import annotations

import argparse

import numpy as np

JOINTS = ("Head", "LeftShoulder", "RightShoulder")


def probe(model_path: str) -> dict:
    import pyglet

    pyglet.options["headless"] = True
    from canis.demo.app import DemoApp
    from canis.runtime.rotations import quat_angle_rad
    from pyglet.event import EventDispatcher

    app = DemoApp({"MANN-8": model_path}, headless=True, gamepad=False)
    names = app.controller.skeleton.joint_names
    joints = [names.index(n) for n in JOINTS]
    head, site = names.index("Head"), names.index("HeadSite")
    shortest_forward, shortest_up = np.full(3, np.inf), np.full(3, np.inf)
    head_turn_deg = site_move_cm = 0.0
    previous = None

    def key(symbol, release=False):
        event = "on_key_release" if release else "on_key_press"
        EventDispatcher.dispatch_event(app.window, event, symbol, 0)

    def run(frames):
        nonlocal shortest_forward, shortest_up, head_turn_deg, site_move_cm, previous
        for _ in range(frames):
            app.step()
            predicted = app.controller.state.pose  # the network's axes, as the next x takes them
            lengths = np.linalg.norm(predicted.forwards[0, joints], axis=-1)
            shortest_forward = np.minimum(shortest_forward, lengths)
            lengths = np.linalg.norm(predicted.ups[0, joints], axis=-1)
            shortest_up = np.minimum(shortest_up, lengths)
            positions, rotations = (a[0].copy() for a in app.controller.display_pose())
            if previous is not None:
                turn = np.degrees(quat_angle_rad(rotations[head], previous[1][head]))
                head_turn_deg = max(head_turn_deg, float(turn))
                hips_move = np.linalg.norm(positions[0] - previous[0][0])
                move = np.linalg.norm(positions[site] - previous[0][site]) - hips_move
                site_move_cm = max(site_move_cm, 100 * float(move))
            previous = (positions, rotations)

    k = app.key
    key(k.R)
    key(k.W)
    key(k.LSHIFT)
    run(600)
    key(k.LSHIFT, release=True)
    key(k.A)
    run(240)
    key(k.A, release=True)
    key(k.D)
    run(240)
    key(k.W, release=True)
    key(k.D, release=True)
    run(120)
    return {
        "joints": list(JOINTS),
        "shortest_forward": [round(float(v), 3) for v in shortest_forward],
        "shortest_up": [round(float(v), 3) for v in shortest_up],
        "largest_head_turn_deg": round(head_turn_deg, 1),
        "largest_head_site_move_cm": round(site_move_cm, 1),
    }


def main(argv=None) -> int:
    import json

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="a motion network (.onnx)")
    args = parser.parse_args(argv)
    print(json.dumps({"model": args.model} | probe(args.model)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

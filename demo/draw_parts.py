"""Where the viewer's drawing time goes under Mesa's llvmpipe: the whole draw of one frame
(on_draw, then the frame read back, as demo/benchmark.py times it), with each part of the
picture left out in turn.

    .venv/bin/python -m canis.demo.draw_parts [--rounds 8] [--view body|bones]

Timing each part alone with glFinish around it misleads under llvmpipe: every glFinish
rasterises what was queued so far as a scene of its own, so a part's figure then includes a
pass over the whole window (timed that way, the clear comes out at an eighth of the frame
and the terrain at half). Instead the whole draw is
timed as it runs, and a part's share is what leaving it out saves at the median. The
variants run in alternating blocks of frames, so the machine's load weighs on all alike; the
dog trots on the hills throughout (one simulation step per frame, not timed)."""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from canis.runtime.features import ACTIONS
from canis.runtime.trajectory import ControlState

SCENE_PARTS = ("terrain", "shadow", "dog", "trajectories")  # Scene.hidden's names
HUD_PARTS = ("hud text", "hud plots", "hud panel")  # the panel: the light box behind the plots


def measure_parts(model, view: str = "body", rounds: int = 8, block: int = 20, warmup: int = 3):
    """{variant: median draw ms} for the whole draw ("all") and with each part left out
    ("no <part>"), at 1280x720 headless; plus the load and the renderer."""
    from canis.demo.app import DemoApp

    app = DemoApp(
        {"bench": model}, terrain="hills", headless=True, width=1280, height=720, gamepad=False
    )
    from pyglet.gl import gl_info, glFinish  # after the app chose headless mode

    control = ControlState(np.array([[0.0, 1.9]]), np.zeros(1), np.array([ACTIONS.index("move")]))
    app.window.switch_to()
    app.scene.show_body = view == "body"
    draw_text, draw_plots, draw_panel = app.hud.draw, app.plots.draw, app.plot_panel.draw

    def leave_out(part: str | None) -> None:
        app.scene.hidden = {part} if part in SCENE_PARTS else set()
        app.hud.draw = (lambda w, h: None) if part == "hud text" else draw_text
        app.plots.draw = (lambda w, h: None) if part == "hud plots" else draw_plots
        app.plot_panel.draw = (lambda: None) if part == "hud panel" else draw_panel

    variants = [None, *SCENE_PARTS, *HUD_PARTS]
    samples = {v: [] for v in variants}
    load_before = os.getloadavg()[0]
    for _ in range(rounds):
        for part in variants:
            leave_out(part)
            for i in range(block):
                app.step(control=control)
                glFinish()
                start = time.perf_counter()
                app.on_draw()
                app.pixels()[:1]  # finish the frame: reading back waits for the renderer
                if i >= warmup:
                    samples[part].append((time.perf_counter() - start) * 1e3)
    leave_out(None)
    renderer = gl_info.get_renderer()
    app.close()
    app.window.close()
    medians = {("all" if v is None else f"no {v}"): float(np.median(s)) for v, s in samples.items()}
    return {
        "view": view,
        "renderer": renderer,
        "load_average_1min": [load_before, os.getloadavg()[0]],
        "median_draw_ms": medians,
        "share": {k[3:]: 1 - m / medians["all"] for k, m in medians.items() if k != "all"},
    }


def main(argv=None) -> int:
    from canis.runtime.assets import shipped_model_path
    from canis.runtime.machine import describe_machine

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--view", choices=("body", "bones"), default="body")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")
    result = measure_parts(shipped_model_path(), args.view, args.rounds)
    machine = describe_machine()
    load = result["load_average_1min"]
    print(
        f"{result['renderer']}, 1280x720, {args.view}; CPU {machine['cpu']} (family "
        f"{machine['cpu_family']} model {machine['cpu_model_number']}, "
        f"{machine['logical_cores']} logical cores); 1-minute load {load[0]:.1f} -> {load[1]:.1f}"
    )
    print(f"whole draw, median: {result['median_draw_ms']['all']:.2f} ms")
    for part, share in result["share"].items():
        without_ms = result["median_draw_ms"][f"no {part}"]
        print(f"  {part:14s} {share:6.1%} of it (without it: {without_ms:.2f} ms)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The viewer's own cost, measured headless (pyglet's EGL mode; Mesa llvmpipe here): simulate
and draw one dog per displayed frame, as the interactive demo does at 60 Hz."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
from canis.runtime.features import ACTIONS
from canis.runtime.profiler import percentiles_ms
from canis.runtime.trajectory import ControlState


def _stats(values_ms: list[float]) -> dict:
    return percentiles_ms(values_ms, ("p50", "p99"))


def benchmark_viewer(
    model: Path, seconds: float = 5.0, width: int = 1280, height: int = 720
) -> dict:
    """Times the viewer with the skinned body and with the bone capsules, alternating every
    30 frames so that both see the same machine load (the figures are the body's; `bones`
    holds the bone view's drawing time for comparison)."""
    from canis.demo.app import DemoApp

    app = DemoApp(
        {"bench": model}, terrain="hills", headless=True, width=width, height=height, gamepad=False
    )
    control = ControlState(np.array([[0.0, 1.9]]), np.zeros(1), np.array([ACTIONS.index("move")]))
    app.window.switch_to()
    load_before = os.getloadavg()[0]  # timings on a shared machine mean little without it
    frames = int(seconds * 60)
    draw_ms = {True: [], False: []}
    total_ms = {True: [], False: []}
    for frame in range(2 * frames + 60):
        body = (frame // 30) % 2 == 0
        app.scene.show_body = body
        start = time.perf_counter()
        app.profiler.begin_frame()  # one profiler frame per displayed frame, as tick() does
        app.step(control=control)
        drawn = time.perf_counter()
        with app.profiler.stage("render"):
            app.on_draw()
            app.pixels()[:1]  # finish the frame: reading back waits for the renderer
        app.profiler.end_frame()
        end = time.perf_counter()
        if frame >= 60:  # warm-up (both views)
            draw_ms[body].append((end - drawn) * 1e3)
            total_ms[body].append((end - start) * 1e3)
    app.scene.show_body = True
    draw, total = np.array(draw_ms[True]), np.array(total_ms[True])
    from canis.runtime.machine import describe_machine
    from pyglet.gl import gl_info

    machine = describe_machine()
    return {
        "measured_utc": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "seconds": seconds,
        "cpu": f"{machine['cpu']} (family {machine['cpu_family']} model "
        f"{machine['cpu_model_number']}, {machine['logical_cores']} logical cores)",
        "load_average_1min": [load_before, os.getloadavg()[0]],
        "width": width,
        "height": height,
        "frames": frames,
        "renderer": gl_info.get_renderer(),
        "draw_ms": _stats(draw_ms[True]),
        "frame_ms": _stats(total_ms[True]),
        "fps_at_p50": float(1000.0 / np.median(total)),
        "share_of_frames_within_60hz": float(np.mean(total <= 1000 / 60)),
        "bones": {"draw_ms": _stats(draw_ms[False]), "frame_ms": _stats(total_ms[False])},
        "body_over_bones_draw_p50": float(np.median(draw) / np.median(draw_ms[False])),
    }


def _row(name: str, stats: dict) -> str:
    return f"| {name} | {stats['p50_ms']:.2f} | {stats['p99_ms']:.2f} |"


def markdown(viewer: dict) -> str:
    bones = viewer["bones"]
    load = viewer["load_average_1min"]
    return "\n".join(
        [
            "",
            f"## The viewer ({viewer['width']}x{viewer['height']}, {viewer['renderer']}, headless)",
            "",
            "One dog trotting on rolling hills; per displayed frame: one simulation step and",
            "one draw (terrain, dog, shadow, trajectories, text HUD and plots), read back to",
            "finish it. The skinned body and the bone view (B) alternate every 30 frames.",
            f"CPU: {viewer['cpu']}; 1-minute load average {load[0]:.1f} before and "
            f"{load[1]:.1f} after (llvmpipe draws on every core, so load slows it directly).",
            "",
            "| | p50 ms | p99 ms |",
            "|---|---|---|",
            _row("drawing, body", viewer["draw_ms"]),
            _row("drawing, bones", bones["draw_ms"]),
            _row("step + drawing, body", viewer["frame_ms"]),
            "",
            f"Drawing the body takes {viewer['body_over_bones_draw_p50']:.2f}x the bones' time at "
            f"the median. With the body: {viewer['fps_at_p50']:.0f} frames per second at the "
            f"median; {viewer['share_of_frames_within_60hz']:.0%} of frames fit in 1/60 s, so "
            f"60 fps at the median {'holds' if viewer['fps_at_p50'] >= 60 else 'does not hold'} "
            "here at this load.",
            "",
            f"Measured {viewer.get('measured_utc', '(date not recorded)')} with "
            f"`./run canis bench --viewer-only` ({viewer.get('seconds', 5.0):g} s per view; "
            "canis.demo.benchmark.benchmark_viewer, which `canis bench` also runs). Headless,",
            "pyglet's EGL gets a 16-bit colour buffer (RGB565) where an X11 window on a 24-bit",
            "display gets 8 bits a channel: these are the headless viewer's figures, which an",
            "X11 window's need not equal.",
            "",
        ]
    )

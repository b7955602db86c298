"""The viewer's own cost, measured headless (pyglet's EGL mode; Mesa llvmpipe here): simulate
and draw one dog per displayed frame, as the interactive demo does at 60 Hz."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
from canis.runtime.features import ACTIONS
from canis.runtime.trajectory import ControlState


def benchmark_viewer(
    model: Path, seconds: float = 5.0, width: int = 1280, height: int = 720
) -> dict:
    from canis.demo.app import DemoApp

    app = DemoApp(
        {"bench": model}, terrain="hills", headless=True, width=width, height=height, gamepad=False
    )
    control = ControlState(np.array([[0.0, 1.9]]), np.zeros(1), np.array([ACTIONS.index("move")]))
    app.window.switch_to()
    frames, draw_ms, total_ms = int(seconds * 60), [], []
    for frame in range(frames + 30):
        start = time.perf_counter()
        app.step(control=control)
        drawn = time.perf_counter()
        app.on_draw()
        app.pixels()[:1]  # finish the frame: reading back waits for the renderer
        end = time.perf_counter()
        if frame >= 30:  # warm-up
            draw_ms.append((end - drawn) * 1e3)
            total_ms.append((end - start) * 1e3)
    draw, total = np.array(draw_ms), np.array(total_ms)
    from pyglet.gl import gl_info

    return {
        "width": width,
        "height": height,
        "frames": frames,
        "renderer": gl_info.get_renderer(),
        "draw_ms": {"p50_ms": float(np.median(draw)), "p99_ms": float(np.percentile(draw, 99))},
        "frame_ms": {"p50_ms": float(np.median(total)), "p99_ms": float(np.percentile(total, 99))},
        "fps_at_p50": float(1000.0 / np.median(total)),
        "share_of_frames_within_60hz": float(np.mean(total <= 1000 / 60)),
    }


def markdown(viewer: dict) -> str:
    return "\n".join(
        [
            "",
            f"## The viewer ({viewer['width']}x{viewer['height']}, {viewer['renderer']}, headless)",
            "",
            "One dog trotting on rolling hills; per displayed frame: one simulation step and",
            "one draw (terrain, dog, shadow, trajectories, text HUD and plots), read back to",
            "finish it.",
            "",
            "| | p50 ms | p99 ms |",
            "|---|---|---|",
            f"| drawing | {viewer['draw_ms']['p50_ms']:.2f} | {viewer['draw_ms']['p99_ms']:.2f} |",
            f"| step + drawing | {viewer['frame_ms']['p50_ms']:.2f} | "
            f"{viewer['frame_ms']['p99_ms']:.2f} |",
            "",
            f"That is {viewer['fps_at_p50']:.0f} frames per second at the median; "
            f"{viewer['share_of_frames_within_60hz']:.0%} of frames fit in 1/60 s.",
            "",
        ]
    )

"""What the demo's window draws each frame: the scene from the orbit camera, the trajectories,
the HUD's text and, along the bottom, its plots."""

from __future__ import annotations

import numpy as np
from canis.demo.hud_text import timing_line
from canis.demo.keys import help_lines
from canis.runtime.features import FPS
from canis.runtime.profiler import STAGES

HUD_REFRESH_DRAWS = 10


class DemoView:
    """DemoApp's drawing: on_draw and the HUD's text and plots it shows."""

    def on_draw(self) -> None:
        from canis.demo.scene import camera_matrix
        from pyglet.gl import glClearColor

        glClearColor(0.72, 0.8, 0.9, 1.0)
        self.window.clear()
        positions, rotations = self.shown.display_pose()
        hips = positions[0, 0].astype(np.float64)
        self.scene.follow(hips[[0, 2]])
        c = self.camera
        aspect = self.window.width / max(self.window.height, 1)
        self.view_projection = camera_matrix(hips, c["yaw"], c["pitch"], c["distance"], aspect)
        self.scene.draw(
            self.view_projection,
            positions,
            self.shown.contacts,
            self._trajectories(),
            rotations,
        )
        self.frame_rate.tick()
        self.draws += 1
        self.hud.set_recording(self._recording_text())
        if self.draws % HUD_REFRESH_DRAWS == 1:  # laying text out is slow in pyglet
            self.hud.set_lines(self.hud_lines(), self.window.width)
        self._draw_plots()  # first: it also says whether the experts' title shows
        self.hud.draw(self.window.width, self.window.height)

    @staticmethod
    def _stage_legend(pyglet, batch) -> list:
        """One coloured name per stage the frame-time plot stacks, above its title."""
        from canis.demo.hud import STAGE_COLOURS

        labels, x = [], 10
        for name, colour in STAGE_COLOURS.items():
            rgb = tuple(int(255 * c) for c in colour)
            label = pyglet.text.Label(name, x=x, y=128, font_size=8, color=(*rgb, 255), batch=batch)
            labels.append(label)
            x += label.content_width + 6
        return labels

    def _recording_text(self) -> str:
        if self.recorder is None:
            return ""
        seconds = self.recorder.frame / FPS
        return f"\N{BLACK CIRCLE} REC {int(seconds) // 60}:{int(seconds) % 60:02d}  (F5 stops)"

    def _draw_plots(self) -> None:
        """Bottom of the window, left to right: frame time per stage against the budget,
        expert weights (MANN only), footfalls; gait and labels are in the text above."""
        from pyglet.gl import GL_DEPTH_TEST, glDisable

        glDisable(GL_DEPTH_TEST)
        self.plot_panel.draw()
        has_experts = self.controller.expert_weights is not None
        if self.draws % HUD_REFRESH_DRAWS == 1:  # rebuilt with the HUD text
            # Every stage, transition and render included, and the untimed rest, per frame.
            stages = self.profiler.recent_frames(self.profiler.window)
            stages.pop("frame")
            scale = self.plots.frame_times(10, 10, stages, self.profiler.budget_ms)
            # Short enough to end inside its plot's width: longer, the budget's words run into
            # the expert plot's title.
            budget = self.profiler.budget_ms
            self.plot_titles[
                "frame"
            ].text = f"frame time per stage, 0-{scale:g} ms, red {budget:g} ms"
            if has_experts and self.expert_history:
                self.plots.experts(320, 10, np.array(self.expert_history))
            if self.contact_history:
                self.plots.footfalls(630, 10, np.array(self.contact_history))
            self.plots.build()
        self.plots.draw(self.window.width, self.window.height)
        # The titles and the legend are drawn with the HUD's text batch.
        if self.plot_titles["experts"].visible != has_experts:
            self.plot_titles["experts"].visible = has_experts

    def _trajectories(self):
        c = self.controller
        lines = []
        for future, colour in (
            (c.desired_future, (0.1, 0.3, 0.9, 1.0)),
            (c.predicted_future, (0.95, 0.5, 0.05, 1.0)),
        ):
            if future is None:
                continue
            xz = np.concatenate([c.root_xz_m[:1], future.positions_xz_m[0]])
            if self.rig_choice.dogs is not None:  # the network's units: the rig's world
                xz = xz * self.rig_choice.dogs.stride_scale
            heights, _ = self.heightmap.sample(xz)
            lines.append((np.stack([xz[:, 0], heights + 0.02, xz[:, 1]], 1), colour))
        return lines

    def hud_lines(self) -> list[tuple[str, tuple]]:
        """The HUD's text, one (text, colour) per line."""
        from canis.demo.hud_text import NOTICE_COLOUR, TEXT_COLOUR

        c, stats = self.controller, self.profiler.rolling()
        speed = self.shown_speed_mps
        action = self.shown_action
        # The runtime's own readout (runtime/readouts.py), half a second late like any
        # classifier over a footfall window.
        gait = c.gaits()[0] if action == "move" else "-"
        render_ms = stats.get("render", {"p50_ms": float("nan")})["p50_ms"]
        shown = self.shown
        flags = [
            self.rig_choice.name,
            f"IK {'on' if shown.ik.enabled else 'off'}",
            f"foot lock {'on' if shown.foot_lock.enabled else 'off'}",
        ]
        flags += ["transitions varied"] if self.vary_transitions else []
        flags += ["PAUSED"] if self.paused else []
        flags += ["slow motion"] if self.slow_motion else []
        lines = [
            f"{self.model_name} on {self.terrain_name}  |  input {self.input_source}  |  "
            f"speed {speed:.2f} m/s (2 s mean)  |  gait {gait}  |  action {action}",
            f"{self.frame_rate.fps:.0f} fps  |  " + "  |  ".join(flags),
            # The budget is the controller's: each step (Controller.step, as a game calls
            # it), not the displayed frame, which also holds the software render.
            timing_line(self.step_times, render_ms),
            "  ".join(f"{s} {stats[s]['p50_ms']:.2f}" for s in STAGES if s in stats),
        ]
        lines = [(text, TEXT_COLOUR) for text in lines]
        if c.expert_weights is not None:
            bars = " ".join(f"{w:.2f}" for w in c.expert_weights[0])
            lines.append((f"expert weights: {bars}", TEXT_COLOUR))
        if self.notice.current:
            lines.append((self.notice.current, NOTICE_COLOUR))
        if self.show_help:
            lines += [(text, TEXT_COLOUR) for text in help_lines(self.model_names)]
        return lines

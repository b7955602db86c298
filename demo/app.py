"""The interactive demo: a dog driven by the keyboard or a gamepad in a pyglet window, or
headless from a script, rendered to PNG frames.

Keys: WASD/arrows move (camera-relative), Shift canters, Q/E turn on the spot, 1 idle,
2 sit, 3 stand (beg), 4 lie, Space jump; mouse drag or J/L/I/K orbit the camera, scroll zooms;
X transition to the next keyframe (stand, sit, lie, beg) through the transition network,
B body or bones,
P pause, N single step, M slow motion, G toggle IK, R reset, T next terrain, F1 next model,
F5 record the input as a script, F12 screenshot, H hide help.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
from canis.demo.devices import GamepadReader
from canis.demo.input import InputFrame, PlayerControl
from canis.demo.recording import InputRecorder
from canis.runtime.controller import Controller
from canis.runtime.features import ACTIONS, FPS
from canis.runtime.gaits import GAIT_WINDOW_FRAMES, GAITS, classify_gaits
from canis.runtime.inference import MotionModel
from canis.runtime.loop import FixedTimestep
from canis.runtime.poses import KEYFRAME_ACTIONS, load_keyframes
from canis.runtime.profiler import STAGES, Profiler
from canis.runtime.terrain import PROCEDURAL, load_terrain
from canis.runtime.transition import TransitionModel, shipped_transition_model_path

CAPTURE_FPS = 30
HUD_REFRESH_DRAWS = 10
CAMERA_KEY_RATE_RADPS = 1.5
HELP = (
    "WASD/arrows move  Shift canter  Q/E turn  1 idle 2 sit 3 stand 4 lie Space jump  "
    "X transition to next keyframe\n"
    "drag/JLIK camera  scroll zoom  P pause  N step  M slow  G IK  F foot lock  R reset  "
    "T terrain  B bones  "
    "F1 model  F5 record input  F12 screenshot  H help"
)
ACTION_KEYS = {"_1": "idle", "_2": "sit", "_3": "stand", "_4": "lie", "SPACE": "jump"}
TRANSITION_FRAMES = 45


class DemoApp:
    def __init__(
        self,
        models: dict[str, Path],
        terrain: str = "hills",
        headless: bool = False,
        width: int = 1280,
        height: int = 720,
        gamepad: bool = True,
        transition_model: Path | None = None,
    ):
        """`transition_model`: an RTN _step.onnx for the X key (None: the shipped one when
        it is there; without one, X says so on the HUD)."""
        import pyglet

        if headless:
            pyglet.options["headless"] = True
        from canis.demo.hud import HudPlots
        from canis.demo.scene import Scene
        from pyglet.window import key

        self.pyglet, self.key = pyglet, key
        self.models = {name: MotionModel(path) for name, path in models.items()}
        self.transition_model = self._open_transition_model(transition_model)
        self.keyframe_names = list(load_keyframes())
        self.keyframe_index = -1
        self.notice = ""
        self.model_names = list(self.models)
        self.model_index = 0
        self.terrains = list(PROCEDURAL) if terrain in PROCEDURAL else [terrain]
        self.terrain_index = self.terrains.index(terrain) if terrain in self.terrains else 0
        self.heightmap = load_terrain(self.terrains[self.terrain_index])
        self.window = pyglet.window.Window(
            width, height, caption="canis: MANN dog", resizable=not headless, visible=not headless
        )
        self.keys = key.KeyStateHandler()
        # Two levels of the handler stack: one level keeps one handler per event name, so
        # pushing both together let the app's on_key_press replace the key-state handler's
        # and no key was ever seen as held. The app's handlers return None, so every event
        # reaches the key-state handler below them.
        self.window.push_handlers(self.keys)
        self.window.push_handlers(self)
        self.scene = Scene(None, self.heightmap)
        self.plots = HudPlots()
        self.plot_titles = [
            pyglet.text.Label(text, x=x, y=114, font_size=9, color=(20, 20, 30, 255))
            for text, x in (
                ("frame time per stage", 10),
                ("expert weights, last 4 s", 320),
                ("footfalls LF / RF / LH / RH, last 4 s", 630),
            )
        ]
        self.stage_legend = self._stage_legend(pyglet)
        self.profiler = Profiler()
        self.loop = FixedTimestep()
        self.player = PlayerControl()
        self.gamepad = GamepadReader.open() if gamepad else None
        self.input_source = "keyboard"
        self.camera = {"yaw": 0.0, "pitch": math.radians(20), "distance": 3.0}
        self.paused, self.slow_motion, self.show_help = False, False, True
        self.pending_action = None
        self.pending_steps = 0
        self.draws = 0
        self.contact_history: list[np.ndarray] = []
        self.recorder: InputRecorder | None = None
        self.expert_history: list[np.ndarray] = []
        self.labels = pyglet.text.Label(
            "",
            x=10,
            y=height - 10,
            anchor_y="top",
            multiline=True,
            width=width - 20,
            font_size=11,
            color=(20, 20, 30, 255),
        )
        self._new_controller()

    # --- simulation -------------------------------------------------------------------
    def _new_controller(self) -> None:
        model = self.models[self.model_names[self.model_index]]
        self.controller = Controller(
            model,
            terrain=self.heightmap,
            profiler=self.profiler,
            transition_model=self.transition_model,
            foot_lock=True,
        )
        self.scene.skeleton = self.controller.skeleton
        self.scene.set_terrain(self.heightmap)
        self.player = PlayerControl()

    @staticmethod
    def _open_transition_model(path: Path | None) -> TransitionModel | None:
        if path is None and not shipped_transition_model_path().is_file():
            return None
        return TransitionModel(path)

    def next_transition(self) -> None:
        """X: the dog goes to the next keyframe through the transition network and then
        holds it (the player's action becomes the keyframe's, until the dog is moved)."""
        if self.transition_model is None:
            self.notice = "no transition model (assets/models/rtn_step.onnx)"
            return
        self.keyframe_index = (self.keyframe_index + 1) % len(self.keyframe_names)
        name = self.keyframe_names[self.keyframe_index]
        if self.recorder is not None:
            self.recorder.add_transition(name, TRANSITION_FRAMES)
        started = self.controller.transition_to(name, TRANSITION_FRAMES, characters=[0])
        self.player.action = KEYFRAME_ACTIONS[name]
        self.player.facing_yaw_rad = float(started.final_yaw_rad[0])
        self.notice = f"transition to {name} ({TRANSITION_FRAMES} frames)"

    def input_frame(self) -> InputFrame:
        """The gamepad's input while one is attached, else the keyboard's."""
        pad = self.gamepad.poll() if self.gamepad is not None else None
        if pad is not None:
            frame, (yaw_rate, pitch_rate) = pad
            self.camera["yaw"] += yaw_rate / FPS
            self.camera["pitch"] = float(
                np.clip(self.camera["pitch"] + pitch_rate / FPS, 0.05, 1.4)
            )
            if self.pending_action is not None and frame.action is None:
                frame.action = self.pending_action
            self.pending_action = None
            self.input_source = "gamepad"
            if frame.next_transition:
                self.next_transition()
            return frame
        self.input_source = "keyboard"
        k, keys = self.key, self.keys
        forward = (keys[k.W] or keys[k.UP]) - (keys[k.S] or keys[k.DOWN])
        right = (keys[k.D] or keys[k.RIGHT]) - (keys[k.A] or keys[k.LEFT])
        boost = 1.0 if keys[k.LSHIFT] or keys[k.RSHIFT] else 0.0
        turn = float(keys[k.Q]) - float(keys[k.E])
        frame = InputFrame(
            move=(float(right), float(forward)), boost=boost, turn=turn, action=self.pending_action
        )
        self.pending_action = None
        return frame

    def step(self, frame: InputFrame | None = None, control=None) -> None:
        if control is None:
            control = self.player.update(frame or self.input_frame(), self.camera["yaw"], 1.0 / FPS)
        if self.recorder is not None:
            self.recorder.add(control)
        self.controller.step(control)
        self.contact_history = (self.contact_history + [self.controller.contacts[0].copy()])[
            -FPS * 4 :
        ]
        if self.controller.expert_weights is not None:
            self.expert_history = (self.expert_history + [self.controller.expert_weights[0]])[
                -FPS * 4 :
            ]

    def update(self, dt_s: float) -> None:
        k, keys = self.key, self.keys
        self.camera["yaw"] += (keys[k.J] - keys[k.L]) * CAMERA_KEY_RATE_RADPS * dt_s
        self.camera["pitch"] = float(
            np.clip(
                self.camera["pitch"] + (keys[k.I] - keys[k.K]) * CAMERA_KEY_RATE_RADPS * dt_s,
                0.05,
                1.4,
            )
        )
        if self.slow_motion:
            dt_s *= 0.25
        steps = self.pending_steps if self.paused else self.loop.advance(dt_s)
        self.pending_steps = 0
        for _ in range(steps):
            self.step()

    def tick(self, dt_s: float) -> None:
        """One displayed frame, timed as one profiler frame: the simulation steps it runs
        (0 to 4), then drawing it (the render stage), so render lands in the frame it draws.
        The buffer swap, which waits for the display, comes after the frame closes."""
        self.profiler.begin_frame()
        self.update(dt_s)
        self.window.switch_to()
        with self.profiler.stage("render"):
            self.window.dispatch_event("on_draw")
        self.profiler.end_frame()
        self.window.flip()

    # --- drawing ----------------------------------------------------------------------
    def on_draw(self) -> None:
        from canis.demo.scene import camera_matrix
        from pyglet.gl import glClearColor

        glClearColor(0.72, 0.8, 0.9, 1.0)
        self.window.clear()
        positions, rotations = self.controller.display_pose()
        hips = positions[0, 0].astype(np.float64)
        self.scene.follow(hips[[0, 2]])
        c = self.camera
        aspect = self.window.width / max(self.window.height, 1)
        self.view_projection = camera_matrix(hips, c["yaw"], c["pitch"], c["distance"], aspect)
        self.scene.draw(
            self.view_projection,
            positions,
            self.controller.contacts,
            self._trajectories(),
            rotations,
        )
        # Laying text out is slow in pyglet: refresh it a few times a second.
        self.draws += 1
        if self.draws % HUD_REFRESH_DRAWS == 1:
            self.labels.text = self._hud_text()
        self.labels.y = self.window.height - 10
        self.labels.draw()
        self._draw_plots()

    @staticmethod
    def _stage_legend(pyglet) -> list:
        """One coloured name per stage the frame-time plot stacks, above its title."""
        from canis.demo.hud import STAGE_COLOURS

        labels, x = [], 10
        for name, colour in STAGE_COLOURS.items():
            rgb = tuple(int(255 * c) for c in colour)
            label = pyglet.text.Label(name, x=x, y=128, font_size=8, color=(*rgb, 255))
            labels.append(label)
            x += label.content_width + 6
        return labels

    def _draw_plots(self) -> None:
        """Bottom of the window, left to right: frame time per stage against the budget,
        expert weights, footfalls; gait and labels are in the text above."""
        from pyglet.gl import GL_DEPTH_TEST, glDisable

        glDisable(GL_DEPTH_TEST)
        if self.draws % HUD_REFRESH_DRAWS == 1:  # rebuilt with the HUD text
            # Every stage, transition and render included, and the untimed rest, per frame.
            stages = self.profiler.recent_frames(self.profiler.window)
            stages.pop("frame")
            scale = self.plots.frame_times(10, 10, stages, self.profiler.budget_ms)
            self.plot_titles[
                0
            ].text = (
                f"frame time per stage, 0-{scale:g} ms (red: {self.profiler.budget_ms:g} ms budget)"
            )
            if self.expert_history:
                self.plots.experts(320, 10, np.array(self.expert_history))
            if self.contact_history:
                self.plots.footfalls(630, 10, np.array(self.contact_history))
            self.plots.build()
        self.plots.draw(self.window.width, self.window.height)
        for title in self.plot_titles + self.stage_legend:
            title.draw()

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
            heights, _ = self.heightmap.sample(xz)
            lines.append((np.stack([xz[:, 0], heights + 0.02, xz[:, 1]], 1), colour))
        return lines

    def _hud_text(self) -> str:
        c, stats = self.controller, self.profiler.rolling()
        speed = float(np.linalg.norm(c.root_velocity_xz_mps[0]))
        stage_text = "  ".join(f"{s} {stats[s]['p50_ms']:.2f}" for s in STAGES if s in stats)
        frame = stats.get("frame", {"p50_ms": float("nan"), "p99_ms": float("nan")})
        cpu = stats.get("frame_cpu", {"p50_ms": float("nan")})
        worst = self.profiler.worst()
        action = ACTIONS[int(np.argmax(c.action_weights[0]))]
        gait = "-"
        if len(self.contact_history) >= GAIT_WINDOW_FRAMES and action == "move":
            recent = np.array(self.contact_history[-GAIT_WINDOW_FRAMES:])
            index = classify_gaits(recent, np.full(len(recent), speed), np.ones(len(recent), bool))[
                GAIT_WINDOW_FRAMES // 2
            ]
            gait = GAITS[index]
        lines = [
            f"{self.model_names[self.model_index]} on {self.terrains[self.terrain_index]}  |  "
            f"input {self.input_source}  |  speed {speed:.2f} m/s  |  gait {gait}  |  "
            f"action {action}  |  "
            f"IK {'on' if c.ik.enabled else 'off'}  |  "
            f"foot lock {'on' if c.foot_lock.enabled else 'off'}"
            + ("  |  PAUSED" if self.paused else "")
            + ("  |  slow motion" if self.slow_motion else "")
            + (f"  |  {self.notice}" if self.notice else ""),
            f"frame p50 {frame['p50_ms']:.2f} ms p99 {frame['p99_ms']:.2f} ms, CPU p50 "
            f"{cpu['p50_ms']:.2f} ms, worst {worst[0].wall_ms if worst else float('nan'):.1f} ms "
            f"(budget {self.profiler.budget_ms:g} ms, {self.profiler.overruns} over)  |  "
            f"{stage_text}",
        ]
        if c.expert_weights is not None:
            bars = " ".join(f"{w:.2f}" for w in c.expert_weights[0])
            lines.append(f"expert weights: {bars}")
        if self.show_help:
            lines.append(HELP)
        return "\n".join(lines)

    # --- events -----------------------------------------------------------------------
    def on_key_press(self, symbol, modifiers) -> None:
        k = self.key
        name = k.symbol_string(symbol)
        if name in ACTION_KEYS:
            self.pending_action = ACTION_KEYS[name]
        elif symbol == k.X:
            self.next_transition()
        elif symbol == k.P:
            self.paused = not self.paused
        elif symbol == k.N:
            self.pending_steps += 1
        elif symbol == k.M:
            self.slow_motion = not self.slow_motion
        elif symbol == k.G:
            self.controller.ik.enabled = not self.controller.ik.enabled
        elif symbol == k.F:
            lock = self.controller.foot_lock
            lock.enabled = not lock.enabled
            if self.recorder is not None:
                self.recorder.add_foot_lock(lock.enabled)
        elif symbol == k.R:
            self.controller.reset()
        elif symbol == k.T:
            self.terrain_index = (self.terrain_index + 1) % len(self.terrains)
            self.heightmap = load_terrain(self.terrains[self.terrain_index])
            self.controller.terrain = self.heightmap
            self.scene.set_terrain(self.heightmap)
        elif symbol == k.F1:
            self.model_index = (self.model_index + 1) % len(self.model_names)
            self._new_controller()
        elif symbol == k.F12:
            self.screenshot(Path(f"canis-{time.strftime('%Y%m%d-%H%M%S')}.png"))
        elif symbol == k.H:
            self.show_help = not self.show_help
        elif symbol == k.B:
            self.scene.show_body = not self.scene.show_body
        elif symbol == k.F5:
            self.toggle_recording()

    def toggle_recording(self, path: Path | None = None) -> Path | None:
        """F5: start recording the input, or stop and save it as a replayable script."""
        if self.recorder is None:
            self.recorder = InputRecorder()
            self.recorder.add_foot_lock(self.controller.foot_lock.enabled)
            return None
        path = path or Path(f"canis-input-{time.strftime('%Y%m%d-%H%M%S')}.json")
        self.recorder.save(path)
        self.recorder = None
        return path

    def on_mouse_drag(self, x, y, dx, dy, buttons, modifiers) -> None:
        self.camera["yaw"] -= dx * 0.01
        self.camera["pitch"] = float(np.clip(self.camera["pitch"] + dy * 0.01, 0.05, 1.4))

    def on_mouse_scroll(self, x, y, scroll_x, scroll_y) -> None:
        self.camera["distance"] = float(np.clip(self.camera["distance"] * 0.9**scroll_y, 1.0, 15.0))

    def screenshot(self, path: Path) -> Path:
        buffer = self.pyglet.image.get_buffer_manager().get_color_buffer()
        buffer.save(str(path))
        return path

    def pixels(self) -> np.ndarray:
        """The last drawn frame as (height, width, 4) uint8, top row first."""
        image = self.pyglet.image.get_buffer_manager().get_color_buffer().get_image_data()
        data = np.frombuffer(image.get_data("RGBA", image.width * 4), dtype=np.uint8)
        return data.reshape(image.height, image.width, 4)[::-1]

    def run(self) -> None:
        # tick() draws the window itself, so pyglet schedules no redraw of its own.
        self.pyglet.clock.schedule_interval(self.tick, 1.0 / FPS)
        self.pyglet.app.run(interval=None)


def capture(app: DemoApp, driver, seconds: float, out_dir: Path) -> list[Path]:
    """Steps the app from a scripted driver and writes one PNG per 1/30 s of simulated time."""
    out_dir.mkdir(parents=True, exist_ok=True)
    app.input_source = "script"  # the HUD says what drives the dog; no keyboard is read here
    steps_per_capture = FPS // CAPTURE_FPS
    frames, written = int(round(seconds * FPS)), []
    for frame in range(frames):
        app.profiler.begin_frame()
        app.step(control=driver.control(frame / FPS, app.controller))
        if frame % steps_per_capture == 0:
            app.window.switch_to()
            with app.profiler.stage("render"):
                app.on_draw()
            app.profiler.end_frame()
            written.append(app.screenshot(out_dir / f"frame_{len(written):05d}.png"))
        else:
            app.profiler.end_frame()
    return written

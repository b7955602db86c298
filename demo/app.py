"""The interactive demo: a dog driven by the keyboard or a gamepad in a pyglet window, or
headless from a script, rendered to PNG frames.

Keys: WASD/arrows move (camera-relative), Shift canters, Q/E turn on the spot, 1 stand
(idle: on four legs), 2 sit, 3 beg (on the hind legs), 4 lie, Space jump; mouse drag or
J/L/I/K orbit the camera, scroll zooms; X transition to the next keyframe (stand, sit, lie,
beg), P pause, N single step, M slow motion, G toggle IK, F foot lock, B body or bones, R reset,
T next terrain, F1 next model, F5 record the input as a script, F12 screenshot, H hide help,
Escape quit.

1-4 (and the gamepad's posture buttons) go through the transition network when it is loaded,
as X does, so the dog sits, lies and stands up through motion rather than switching pose;
without it the motion network's own action takes it there. Asked while the dog moves, the
motion network first brings it to a stop (runtime/transition_requests.py), and a held move key
does not move it again until it is let go. Screenshots and recordings go to
one output folder (--out), named on screen when written.
"""

from __future__ import annotations

import math
import time
from collections import deque
from pathlib import Path

import numpy as np
from canis.demo.devices import GamepadReader
from canis.demo.input import POSTURE_KEYFRAMES, InputFrame, PlayerControl
from canis.demo.recording import InputRecorder
from canis.demo.status import SHOWN_SPEED_WINDOW_FRAMES, StatusLog, shown_speed_mps
from canis.runtime.actions import ACTION_NAMES
from canis.runtime.control import load_speed_calibration
from canis.runtime.controller import Controller
from canis.runtime.features import FPS
from canis.runtime.inference import MotionModel
from canis.runtime.loop import FixedTimestep
from canis.runtime.poses import load_keyframes
from canis.runtime.profiler import STAGES, Profiler
from canis.runtime.terrain import PROCEDURAL, load_terrain
from canis.runtime.transition import TransitionModel, shipped_transition_model_path
from canis.runtime.transition_requests import PostureRequests

CAPTURE_FPS = 30
HUD_REFRESH_DRAWS = 10
PLOT_PANEL_RGBA = (236, 240, 244, 200)  # light, mostly opaque: the plots' lines read on it
CAMERA_KEY_RATE_RADPS = 1.5
HELP = (
    "WASD/arrows move  Shift canter  Q/E turn  Space jump  1 stand 2 sit 3 beg 4 lie  "
    "X next keyframe  V vary them  R reset",
    "drag/JLIK camera  wheel zoom  P pause  N step  M slow  G IK  F foot lock  B bones  T terrain",
    "F1 model  F5 record  F12 screenshot  H help  Esc quit",
)
ACTION_KEYS = {"_1": "idle", "_2": "sit", "_3": "beg", "_4": "lie", "SPACE": "jump"}
# The action each keyframe is held with: the inverse of POSTURE_KEYFRAMES (API names).
KEYFRAME_HELD_ACTIONS = {name: action for action, name in POSTURE_KEYFRAMES.items()}
TRANSITION_FRAMES = 45
# V: postures sampled with the transition network's target noise at its training level
# (docs/EVALUATION.md, "Varied transitions": +1.4% L2P at 30 frames for the shipped RTN).
VARIED_TRANSITION_VARIATION = 1.0
DEFAULT_OUT_DIR = Path("out/demo")


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
        out_dir: Path = DEFAULT_OUT_DIR,
        status_file: Path | None = None,
        transition_worker: bool = True,
    ):
        """`transition_model`: an RTN _step.onnx for X and the posture keys (None: the
        shipped one when it is there; without one, X says so on the HUD and the posture keys
        ask the motion network for the action). `out_dir`: screenshots and recordings,
        created when the first is written. `status_file`: one JSON line per simulated frame
        (demo/status.py). `transition_worker`: Controller(transition_worker=...): on by
        default, as the window draws between steps (the worker's time)."""
        import pyglet

        if headless:
            pyglet.options["headless"] = True
        from canis.demo.hud import HudPlots
        from canis.demo.hud_text import FrameRate, HudText, Notice
        from canis.demo.scene import Scene
        from pyglet.window import key

        self.pyglet, self.key = pyglet, key
        self.model_paths = dict(models)
        self.models = {name: MotionModel(path) for name, path in models.items()}
        self.transition_model = self._open_transition_model(transition_model)
        self.transition_worker = transition_worker
        self.controller: Controller | None = None
        self.keyframe_names = list(load_keyframes())
        self.keyframe_index = -1
        self.out_dir = Path(out_dir)
        self.notice = Notice()
        self.frame_rate = FrameRate()
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
        # reaches the key-state handler below them (and the window's own: Escape closes it).
        self.window.push_handlers(self.keys)
        self.window.push_handlers(self)
        self.scene = Scene(None, self.heightmap)
        self.plots = HudPlots()
        self.hud = HudText(pyglet)
        self.plot_titles = {
            name: pyglet.text.Label(
                text, x=x, y=114, font_size=9, color=(20, 20, 30, 255), batch=self.hud.batch
            )
            for name, text, x in (
                ("frame", "frame time per stage", 10),
                ("experts", "expert weights, last 4 s", 320),
                ("footfalls", "footfalls LF / RF / LH / RH, last 4 s", 630),
            )
        }
        self.stage_legend = self._stage_legend(pyglet, self.hud.batch)
        # A light panel behind the plots, their titles and the legend: on the green ground the
        # grey and cyan stages and the thin lines could not be told apart.
        self.plot_panel = pyglet.shapes.Rectangle(4, 4, 932, 138, color=PLOT_PANEL_RGBA)
        self.profiler = Profiler()
        self.loop = FixedTimestep()
        self.player = PlayerControl()
        self.gamepad = GamepadReader.open() if gamepad else None
        self.input_source = "keyboard"
        self.camera = {"yaw": 0.0, "pitch": math.radians(20), "distance": 3.0}
        self.paused, self.slow_motion, self.show_help = False, False, True
        self.pending_action = None
        self.asked_keyframe = None  # the keyframe of the last posture asked for
        self.vary_transitions = False  # V: each posture a sampled transition
        self.seeds = np.random.default_rng()  # a varied transition's seed, recorded for replay
        self.asked_variation = (0.0, None)  # (variation, seed) of the posture last asked for
        self.pending_steps = 0
        self.draws = 0
        self.steps = 0
        self.recorder: InputRecorder | None = None
        self.recording_path: Path | None = None
        self.last_saved: Path | None = None
        self.status = StatusLog(Path(status_file)) if status_file else None
        self._new_controller()

    # --- simulation -------------------------------------------------------------------
    @property
    def model_name(self) -> str:
        return self.model_names[self.model_index]

    @property
    def terrain_name(self) -> str:
        return self.terrains[self.terrain_index]

    def _new_controller(self) -> None:
        name = self.model_name
        if self.controller is not None:
            self.controller.close()  # its transition worker's thread, if any
        self.controller = Controller(
            self.models[name],
            terrain=self.heightmap,
            profiler=self.profiler,
            transition_model=self.transition_model,
            foot_lock=True,
            speed_calibration=load_speed_calibration(self.model_paths[name]),
            transition_worker=self.transition_worker,
        )
        self.postures = PostureRequests(self.controller)
        self.scene.skeleton = self.controller.skeleton
        self.scene.set_terrain(self.heightmap)
        self._forget_history()

    def _forget_history(self) -> None:
        """A new dog: the player's state, the plots' history and the speed's track start over."""
        self.player = PlayerControl(facing_yaw_rad=float(self.controller.root_yaw_rad[0]))
        self.contact_history: list[np.ndarray] = []
        self.expert_history: list[np.ndarray] = []
        # Only the ends of the shown-speed window are read: a bounded deque, appended per step.
        self.root_track = deque(
            [self.controller.root_xz_m[0].copy()], maxlen=SHOWN_SPEED_WINDOW_FRAMES + 1
        )

    def reset(self) -> None:
        """R: the dog stands at the origin again, and any held action (a sit) is dropped."""
        self.controller.reset()
        self.postures.cancel()
        self._forget_history()
        if self.recorder is not None:
            self.recorder.add_reset()

    @staticmethod
    def _open_transition_model(path: Path | None) -> TransitionModel | None:
        if path is None and not shipped_transition_model_path().is_file():
            return None
        return TransitionModel(path)

    def transition_to(self, name: str) -> None:
        """The dog goes to keyframe `name` through the transition network and then holds it
        (the player's action becomes the keyframe's, until the dog is moved). A moving dog
        stops first (runtime/transition_requests.py); the transition starts when it has."""
        self.player.hold(KEYFRAME_HELD_ACTIONS[name])
        self.asked_keyframe = name
        if self.vary_transitions:
            self.asked_variation = (VARIED_TRANSITION_VARIATION, int(self.seeds.integers(2**31)))
        else:
            self.asked_variation = (0.0, None)
        variation, seed = self.asked_variation
        started = self.postures.request(
            name, TRANSITION_FRAMES, characters=[0], variation=variation, seed=seed
        )
        if started:
            self._transition_started(name, started[0])
        else:
            self.notice.say(f"stopping, then to {name} ({TRANSITION_FRAMES} frames)")

    def _transition_started(self, name: str, started) -> None:
        # Recorded when it starts, after the stop: the replay (canis run --script) steps the
        # same stopping controls and starts it on the same frame.
        if self.recorder is not None:
            self.recorder.add_transition(name, TRANSITION_FRAMES, *self.asked_variation)
        self.player.facing_yaw_rad = float(started.final_yaw_rad[0])
        self.notice.say(f"transition to {name} ({TRANSITION_FRAMES} frames)")

    def next_transition(self) -> None:
        """X: the next keyframe of the library (stand, sit, lie, beg)."""
        if self.transition_model is None:
            self.notice.say("no transition model (assets/models/rtn_step.onnx)")
            return
        self.keyframe_index = (self.keyframe_index + 1) % len(self.keyframe_names)
        self.transition_to(self.keyframe_names[self.keyframe_index])

    def toggle_varied_transitions(self) -> None:
        """V: postures as sampled transitions (a different one each time), or the deterministic
        one; only a transition network trained with target noise can sample."""
        model = self.transition_model
        if model is None or not model.noise_width:
            what = "no transition model" if model is None else f"{model.step_path.name}"
            self.notice.say(f"{what}: no target noise to vary transitions with")
            return
        self.vary_transitions = not self.vary_transitions
        self.notice.say(
            f"transitions varied (variation {VARIED_TRANSITION_VARIATION:g})"
            if self.vary_transitions
            else "transitions deterministic"
        )

    def _route_posture(self, frame: InputFrame) -> InputFrame:
        """A posture asked for (1-4, the pad's face buttons) goes through the transition
        network when there is one. The action held already does nothing; 1 (idle) while
        moving is the motion network's own stop."""
        wanted, holding = frame.action, self.player.action
        if self.transition_model is None or wanted not in POSTURE_KEYFRAMES:
            return frame
        if wanted == holding:
            frame.action = None
        elif not (wanted == "idle" and holding in ("move", "jump")):
            frame.action = None
            self.transition_to(POSTURE_KEYFRAMES[wanted])
        return frame

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
            if self.input_source != "gamepad":
                self.notice.say("gamepad connected: it drives the dog")
            self.input_source = "gamepad"
            if frame.next_transition:
                self.next_transition()
            return frame
        if self.input_source == "gamepad":
            kept = "; the recording goes on" if self.recorder is not None else ""
            self.notice.say(f"gamepad unplugged: the keyboard drives the dog{kept}", 6.0)
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
            frame = self._route_posture(frame or self.input_frame())
            control = self.player.update(frame, self.camera["yaw"], 1.0 / FPS)
        if self.player.action in ("move", "jump"):  # moved again before the stop was over
            self.postures.cancel()
        control = self.postures.control(control)  # a dog stopping for a posture
        if self.recorder is not None:
            self.recorder.add(control)
        for started in self.postures.step(control):
            self._transition_started(self.asked_keyframe, started)
        self.steps += 1
        self.contact_history = (self.contact_history + [self.controller.contacts[0].copy()])[
            -FPS * 4 :
        ]
        if self.controller.expert_weights is not None:
            self.expert_history = (self.expert_history + [self.controller.expert_weights[0]])[
                -FPS * 4 :
            ]
        self.root_track.append(self.controller.root_xz_m[0].copy())
        if self.status is not None:
            self._write_status(control)

    @property
    def shown_speed_mps(self) -> float:
        return shown_speed_mps(np.array(self.root_track))

    @property
    def shown_action(self) -> str:
        """The action the dog is doing (the network's strongest action weight)."""
        return ACTION_NAMES[int(np.argmax(self.controller.action_weights[0]))]

    def _write_status(self, control) -> None:
        c = self.controller
        positions, _ = c.display_pose()
        self.status.write(
            frame=self.steps,
            x_m=round(float(c.root_xz_m[0, 0]), 4),
            z_m=round(float(c.root_xz_m[0, 1]), 4),
            yaw_rad=round(float(c.root_yaw_rad[0]), 4),
            speed_mps=round(self.shown_speed_mps, 3),
            asked_mps=round(float(np.linalg.norm(control.velocity_mps[0])), 3),
            hips_m=round(float(positions[0, 0, 1]), 4),
            action=self.shown_action,
            asked_action=ACTION_NAMES[int(control.action[0])],
            stopping=bool(self.postures.waiting()[0]),
            jumps=self.player.jumps,
            in_transition=bool(c.in_transition()[0]),
            input=self.input_source,
            model=self.model_name,
            terrain=self.terrain_name,
            recording=self.recorder is not None,
            saved=str(self.last_saved) if self.last_saved else None,
            notice=self.notice.current,
            fps=round(self.frame_rate.fps, 1),
        )

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
            # Short enough to end inside its plot's width: the budget's words ran into the
            # expert plot's title.
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
        frame = stats.get("frame", {"p50_ms": float("nan"), "p99_ms": float("nan")})
        flags = [
            f"IK {'on' if c.ik.enabled else 'off'}",
            f"foot lock {'on' if c.foot_lock.enabled else 'off'}",
        ]
        flags += ["transitions varied"] if self.vary_transitions else []
        flags += ["PAUSED"] if self.paused else []
        flags += ["slow motion"] if self.slow_motion else []
        lines = [
            f"{self.model_name} on {self.terrain_name}  |  input {self.input_source}  |  "
            f"speed {speed:.2f} m/s (2 s mean)  |  gait {gait}  |  action {action}",
            f"{self.frame_rate.fps:.0f} fps  |  " + "  |  ".join(flags),
            # The profiler's frame is the displayed frame: its steps and its drawing (tick),
            # so the 2 ms count includes the render stage shown on the next line.
            f"frame (steps + render) p50 {frame['p50_ms']:.2f} ms p99 {frame['p99_ms']:.2f} ms, "
            f"{self.profiler.overruns} over 2 ms",
            "  ".join(f"{s} {stats[s]['p50_ms']:.2f}" for s in STAGES if s in stats),
        ]
        lines = [(text, TEXT_COLOUR) for text in lines]
        if c.expert_weights is not None:
            bars = " ".join(f"{w:.2f}" for w in c.expert_weights[0])
            lines.append((f"expert weights: {bars}", TEXT_COLOUR))
        if self.notice.current:
            lines.append((self.notice.current, NOTICE_COLOUR))
        if self.show_help:
            lines += [(text, TEXT_COLOUR) for text in HELP]
        return lines

    # --- events -----------------------------------------------------------------------
    def on_key_press(self, symbol, modifiers) -> None:
        k = self.key
        name = k.symbol_string(symbol)
        if name in ACTION_KEYS:
            self.pending_action = ACTION_KEYS[name]
        elif symbol == k.X:
            self.next_transition()
        elif symbol == k.V:
            self.toggle_varied_transitions()
        elif symbol == k.P:
            self.paused = not self.paused
        elif symbol == k.N:
            self.pending_steps += 1
        elif symbol == k.M:
            self.slow_motion = not self.slow_motion
        elif symbol == k.G:
            self.controller.ik.enabled = not self.controller.ik.enabled
            if self.recorder is not None:
                self.recorder.add_ik(self.controller.ik.enabled)
        elif symbol == k.F:
            lock = self.controller.foot_lock
            lock.enabled = not lock.enabled
            if self.recorder is not None:
                self.recorder.add_foot_lock(lock.enabled)
        elif symbol == k.R:
            self.reset()
        elif symbol == k.T:
            self._save_recording_first("T")
            self.terrain_index = (self.terrain_index + 1) % len(self.terrains)
            self.heightmap = load_terrain(self.terrain_name)
            self.controller.terrain = self.heightmap
            self.scene.set_terrain(self.heightmap)
        elif symbol == k.F1:
            self._save_recording_first("F1")
            self.model_index = (self.model_index + 1) % len(self.model_names)
            self._new_controller()
        elif symbol == k.F12:
            self.screenshot()
        elif symbol == k.H:
            self.show_help = not self.show_help
        elif symbol == k.B:
            self.scene.show_body = not self.scene.show_body
        elif symbol == k.F5:
            self.toggle_recording()

    def _output_path(self, stem: str, suffix: str) -> Path:
        """A new file in the output folder, named for the time (never overwriting one)."""
        self.out_dir.mkdir(parents=True, exist_ok=True)
        base = f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}"
        path, count = self.out_dir / f"{base}{suffix}", 1
        while path.exists():
            count += 1
            path = self.out_dir / f"{base}-{count}{suffix}"
        return path

    def toggle_recording(self, path: Path | None = None) -> Path | None:
        """F5: start recording the input, or stop and save it as a replayable script. The
        dog starts again from a stand where it is (its pose restarts: what canis run
        --script starts from, so the replay is the same motion)."""
        if self.recorder is None:
            self.controller.reset(self.controller.root_xz_m.copy(), self.controller.root_yaw_rad)
            self.postures.cancel()
            self._forget_history()
            self.recorder = InputRecorder(
                model=self.model_paths[self.model_name],
                terrain=self.terrain_name,
                start_xz_m=self.controller.root_xz_m[0],
                start_yaw_rad=float(self.controller.root_yaw_rad[0]),
                speed_calibration=self.controller.speed_calibration is not None,
            )
            self.recorder.add_foot_lock(self.controller.foot_lock.enabled)
            self.recorder.add_ik(self.controller.ik.enabled)
            self.recording_path = path
            self.notice.say("recording the input: F5 stops and saves it")
            return None
        path = self.recorder.save(
            path or self.recording_path or self._output_path("canis-input", ".json")
        )
        self.recorder, self.recording_path, self.last_saved = None, None, path
        self.notice.say(f"recording saved: {path}  (replay: canis run --script {path})", 8.0)
        return path

    def _save_recording_first(self, key: str) -> None:
        """The model and terrain are the recording's: changing them ends it (saved)."""
        if self.recorder is not None:
            path = self.toggle_recording()
            self.notice.say(f"{key} ends the recording; saved: {path}", 8.0)

    def on_mouse_drag(self, x, y, dx, dy, buttons, modifiers) -> None:
        self.camera["yaw"] -= dx * 0.01
        self.camera["pitch"] = float(np.clip(self.camera["pitch"] + dy * 0.01, 0.05, 1.4))

    def on_mouse_scroll(self, x, y, scroll_x, scroll_y) -> None:
        self.camera["distance"] = float(np.clip(self.camera["distance"] * 0.9**scroll_y, 1.0, 15.0))

    def screenshot(self, path: Path | None = None) -> Path:
        """F12: the last drawn frame as a PNG in the output folder (or at `path`), named on
        the HUD."""
        path = self.save_frame(path or self._output_path("canis", ".png"))
        self.last_saved = path
        self.notice.say(f"screenshot saved: {path}")
        return path

    def save_frame(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.pyglet.image.get_buffer_manager().get_color_buffer().save(str(path))
        return path

    def pixels(self) -> np.ndarray:
        """The last drawn frame as (height, width, 4) uint8, top row first."""
        image = self.pyglet.image.get_buffer_manager().get_color_buffer().get_image_data()
        data = np.frombuffer(image.get_data("RGBA", image.width * 4), dtype=np.uint8)
        return data.reshape(image.height, image.width, 4)[::-1]

    def close(self) -> Path | None:
        """Ends the session: a recording in progress is saved (never lost), the status log
        closed. Returns the saved recording, if any."""
        saved = self.toggle_recording() if self.recorder is not None else None
        if self.status is not None:
            self.status.close()
            self.status = None
        if self.controller is not None:
            self.controller.close()  # its transition worker's thread, if any
        return saved

    def run(self) -> Path | None:
        # tick() draws the window itself, so pyglet schedules no redraw of its own.
        self.pyglet.clock.schedule_interval(self.tick, 1.0 / FPS)
        try:
            self.pyglet.app.run(interval=None)
        finally:
            saved = self.close()
        return saved


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
        if frame % steps_per_capture == 0:
            written.append(app.save_frame(out_dir / f"frame_{len(written):05d}.png"))
    return written

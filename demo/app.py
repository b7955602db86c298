"""The interactive demo's window: a dog driven by the keyboard or a gamepad in a pyglet window
(the bindings: demo/keys.py), or headless from a script, rendered to PNG frames or an MP4
(demo/capture.py, demo/video.py). DemoApp holds the simulation and the frame loop; what it
draws is demo/view.py's.

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
from canis.demo.capture import DEFAULT_OUT_DIR, Captures
from canis.demo.devices import GamepadReader
from canis.demo.hud_text import StepTimes
from canis.demo.input import POSTURE_KEYFRAMES, InputFrame, PlayerControl
from canis.demo.keys import CAMERA_KEY_RATE_RADPS, KeyBindings
from canis.demo.recording import InputRecorder
from canis.demo.status import SHOWN_SPEED_WINDOW_FRAMES, StatusLog, shown_speed_mps
from canis.demo.view import DemoView
from canis.runtime.actions import ACTION_NAMES
from canis.runtime.control import load_speed_calibration
from canis.runtime.controller import Controller
from canis.runtime.features import FPS
from canis.runtime.inference import MotionModel
from canis.runtime.loop import FixedTimestep
from canis.runtime.poses import load_keyframes
from canis.runtime.profiler import Profiler
from canis.runtime.terrain import PROCEDURAL, load_terrain
from canis.runtime.transition import TransitionModel, shipped_transition_model_path
from canis.runtime.transition_requests import PostureRequests

PLOT_PANEL_RGBA = (236, 240, 244, 200)  # light, mostly opaque: the plots' lines read on it
# The action each keyframe is held with: the inverse of POSTURE_KEYFRAMES (API names).
KEYFRAME_HELD_ACTIONS = {name: action for action, name in POSTURE_KEYFRAMES.items()}
TRANSITION_FRAMES = 45
# V: postures sampled with the transition network's target noise at its training level
# (docs/RESULTS.md, "Varied transitions": +1.4% L2P at 30 frames for the shipped RTN).
VARIED_TRANSITION_VARIATION = 1.0


class DemoApp(KeyBindings, DemoView, Captures):
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
        rigs=(),
    ):
        """`transition_model`: an RTN _step.onnx for X and the posture keys (None: the
        shipped one when it is there; without one, X says so on the HUD and the posture keys
        ask the motion network for the action). `out_dir`: screenshots and recordings,
        created when the first is written. `status_file`: one JSON line per simulated frame
        (demo/status.py). `transition_worker`: Controller(transition_worker=...): on by
        default, as the window draws between steps (the worker's time). `rigs`: glTF dogs
        to show the motion on (demo/rig_choice.py), the first shown, C cycling them."""
        import pyglet
        from canis.demo.rig_choice import RigChoice

        self.rig_choice = RigChoice(rigs)

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
        # pushed together the app's on_key_press would replace the key-state handler's and no
        # key would be seen as held. The app's handlers return None, so every event
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
        # grey and cyan stages and the thin lines cannot be told apart.
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
        rig = self.rig_choice.rig  # a rig's network runs on flat ground; the rig on the terrain
        self.controller = Controller(
            self.models[name],
            terrain=self.heightmap if rig is None else None,
            profiler=self.profiler,
            transition_model=self.transition_model,
            foot_lock=rig is None,
            speed_calibration=load_speed_calibration(self.model_paths[name]),
            transition_worker=self.transition_worker,
        )
        self.postures = PostureRequests(self.controller)
        self.step_times = StepTimes(self.profiler.budget_ms)  # this model's steps
        self.rig_choice.attach(self.controller, self.heightmap, self.scene)
        self.scene.set_terrain(self.heightmap)
        self._forget_history()

    def _forget_history(self) -> None:
        """A new dog: the player's state, the plots' history and the speed's track start over."""
        self.player = PlayerControl(facing_yaw_rad=float(self.controller.root_yaw_rad[0]))
        self.contact_history: list[np.ndarray] = []
        self.expert_history: list[np.ndarray] = []
        # Only the ends of the shown-speed window are read: a bounded deque, appended per step.
        self.root_track = deque(
            [self.shown.root_xz_m[0].copy()], maxlen=SHOWN_SPEED_WINDOW_FRAMES + 1
        )

    @property
    def shown(self):
        """What is drawn: the rig's dogs (demo/rig_choice.py) or the controller's."""
        return self.rig_choice.shown(self.controller)

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

    def step(self, frame: InputFrame | None = None, control=None) -> None:
        if control is None:
            frame = self._route_posture(frame or self.input_frame())
            control = self.player.update(frame, self.camera["yaw"], 1.0 / FPS)
        if self.player.action in ("move", "jump"):  # moved again before the stop was over
            self.postures.cancel()
        control = self.postures.control(control)  # a dog stopping for a posture
        if self.recorder is not None:
            self.recorder.add(control)
        # The controller's frame, as a game pays it each 60 Hz tick (the HUD's budget line).
        started_ns = time.perf_counter_ns()
        rig_dogs = self.rig_choice.dogs
        transitions = self.postures.step(control if rig_dogs is None else rig_dogs.control(control))
        if rig_dogs is not None:
            with self.profiler.stage("retarget"):
                rig_dogs.update()
        self.step_times.add((time.perf_counter_ns() - started_ns) / 1e6)
        for started in transitions:
            self._transition_started(self.asked_keyframe, started)
        self.steps += 1
        self.contact_history = (self.contact_history + [self.shown.contacts[0].copy()])[-FPS * 4 :]
        if self.controller.expert_weights is not None:
            self.expert_history = (self.expert_history + [self.controller.expert_weights[0]])[
                -FPS * 4 :
            ]
        self.root_track.append(self.shown.root_xz_m[0].copy())
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

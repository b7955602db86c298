"""What the demo writes: screenshots (F12), input recordings (F5) saved as replayable scripts,
and the headless run's frames, one per 1/30 s of simulated time, as PNGs or into a video."""

from __future__ import annotations

import shlex
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from canis.demo.recording import InputRecorder
from canis.runtime.features import FPS

if TYPE_CHECKING:
    from canis.demo.app import DemoApp

CAPTURE_FPS = 30
DEFAULT_OUT_DIR = Path("out/demo")


class Captures:
    """DemoApp's output: the output folder's files, the input recording, the frame read back."""

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
        from canis.demo.cli import launcher

        replay = f"{launcher()} run --script {shlex.quote(str(path))}"  # runnable as shown
        self.notice.say(f"recording saved: {path}  (replay: {replay})", 8.0)
        return path

    def _save_recording_first(self, key: str) -> None:
        """The model and terrain are the recording's: changing them ends it (saved)."""
        if self.recorder is not None:
            path = self.toggle_recording()
            self.notice.say(f"{key} ends the recording; saved: {path}", 8.0)

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


def capture(app: DemoApp, driver, seconds: float, out_dir: Path | None, video=None) -> list[Path]:
    """Steps the app from a scripted driver and renders one frame per 1/30 s of simulated
    time: a PNG in `out_dir` (None: none), and into `video` (a demo.video.VideoWriter, which
    encodes it at once) when given. Returns the PNGs written."""
    if out_dir is not None:
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
            if out_dir is not None:
                written.append(
                    app.save_frame(out_dir / f"frame_{frame // steps_per_capture:05d}.png")
                )
            if video is not None:
                video.add(app.pixels())
    return written

"""`canis demo --headless --video out.mp4`: the headless run's frames streamed into an H.264
MP4 as they are rendered (no PNGs in between), by the ffmpeg that imageio-ffmpeg bundles.

The path is checked before any work (the suffix, the folder, which is created if it can be);
the video is written to a hidden temporary name in the same folder and renamed over the path
only when it is complete, so a failed or interrupted run never leaves a half-written file
there (the temporary one is deleted)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
from canis.runtime.profiler import check_output_path

VIDEO_SUFFIX = ".mp4"


def check_video_path(path: str | Path) -> Path:
    """`path` if an MP4 can be written there (its missing folders made when the video is),
    else a one-line ValueError naming the problem; nothing is created."""
    path = Path(path)
    if path.suffix.lower() != VIDEO_SUFFIX:
        raise ValueError(f"--video {path}: give a file name ending in .mp4, not {path.suffix!r}")
    try:
        return check_output_path(path, "video", make_folders=True)
    except (ValueError, OSError) as error:
        raise ValueError(f"--video {error}") from None


def ffmpeg_writer_available() -> None:
    """Raises a one-line error when imageio-ffmpeg (the demo extra's) is not installed."""
    try:
        import imageio_ffmpeg  # noqa: F401
    except ImportError:
        raise ValueError(
            "--video needs imageio-ffmpeg (pip install 'canis[demo]', or ./run canis ...)"
        ) from None


class VideoWriter:
    """Frames of one size in, an MP4 at `fps` out:

        with VideoWriter(path, fps=30) as video:
            video.add(rgba_or_rgb_pixels)   # (height, width, 3 or 4) uint8, top row first

    The file appears at `path` when the block ends without an error; on an error the
    temporary file is deleted and `path` is left as it was."""

    def __init__(self, path: str | Path, fps: float):
        self.path = Path(path)
        self.fps = fps
        self.frames = 0
        self._encoder = None
        self._size: tuple[int, int] | None = None
        self.path.parent.mkdir(parents=True, exist_ok=True)  # checked by check_video_path
        handle, temporary = tempfile.mkstemp(
            prefix=f".{self.path.stem}.", suffix=f".partial{VIDEO_SUFFIX}", dir=self.path.parent
        )
        os.close(handle)
        self.temporary = Path(temporary)

    def add(self, pixels: np.ndarray) -> None:
        height, width = pixels.shape[:2]
        if self._encoder is None:
            import imageio_ffmpeg

            self._size = (width, height)
            self._encoder = imageio_ffmpeg.write_frames(
                str(self.temporary),
                (width, height),
                fps=self.fps,
                codec="libx264",
                pix_fmt_in="rgb24",
                pix_fmt_out="yuv420p",  # what every player opens
                quality=7,
                macro_block_size=2,  # even sizes pass unscaled; yuv420p needs no more
                ffmpeg_log_level="error",
            )
            self._encoder.send(None)  # starts ffmpeg
        elif (width, height) != self._size:
            raise ValueError(f"a {width}x{height} frame in a {self._size[0]}x{self._size[1]} video")
        self._encoder.send(np.ascontiguousarray(pixels[..., :3]))
        self.frames += 1

    def close(self, keep: bool = True) -> Path | None:
        """Finishes the file and renames it to `path` (keep), or deletes it. Returns the
        path written, or None."""
        encoder, self._encoder = self._encoder, None
        try:
            if encoder is not None:
                encoder.close()  # waits for ffmpeg to write the file's end
            if keep and self.frames:
                umask = os.umask(0)  # mkstemp made it private; give it a new file's mode
                os.umask(umask)
                self.temporary.chmod(0o666 & ~umask)
                os.replace(self.temporary, self.path)
                return self.path
            return None
        finally:
            self.temporary.unlink(missing_ok=True)

    def __enter__(self) -> VideoWriter:
        return self

    def __exit__(self, kind, error, traceback) -> None:
        if kind is None:
            self.close(keep=True)
        else:
            try:
                self.close(keep=False)
            except Exception:
                pass  # the first error is the one to see

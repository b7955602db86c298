"""examples/panda3d_dog.py: Panda3D renders the runtime's dog off-screen (Mesa)."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("panda3d")
pytest.importorskip("gltf")  # panda3d-gltf
Image = pytest.importorskip("PIL.Image")

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "panda3d_dog.py"


@pytest.fixture(scope="module")
def game():
    spec = importlib.util.spec_from_file_location("panda3d_dog", EXAMPLE)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    try:
        game = example.DogGame(offscreen=True, size=(480, 270))
    except Exception as error:  # no offscreen buffer (no EGL/GL): nothing to render with
        pytest.skip(f"Panda3D cannot open an offscreen buffer here: {error}")
    return example, game


def rendered_coat(tmp_path: Path, *arguments: str) -> np.ndarray:
    """Runs the example as a user does, `examples/panda3d_dog.py --offscreen out.png ARGS` (in
    a process of its own: one ShowBase per process), and returns the mask of the picture's
    pixels in the dog's tan."""
    frame = tmp_path / "frame.png"
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "--offscreen", str(frame), *arguments],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    with Image.open(frame) as image:
        return tan_pixels(np.asarray(image.convert("RGB")))


def tan_pixels(rgb: np.ndarray) -> np.ndarray:
    """The mask of the dog's tan in an RGB picture: grass and sky are not red."""
    r, g, b = (rgb[..., k].astype(int) for k in range(3))
    return (r > g + 20) & (g > b) & (r > 60)


def test_one_offscreen_frame_shows_the_dog(tmp_path):
    """The example as a user runs it, `examples/panda3d_dog.py --offscreen out.png` (90 frames
    trotting, then the picture), in a process of its own. In the full suite this picture came
    back blank white, or the example died of an X fatal error: with no DISPLAY set, Panda3D's
    X pipe opened ":0.0", where test_demo_x11's Xvfb (a worker beside) was running. The
    example now renders off-screen through EGL only (p3headlessgl). Run so, the example also
    showed that it aborted at exit (134) after writing the picture: it must exit 0."""
    coat = rendered_coat(tmp_path)
    assert coat.sum() > 200, "no dog in the picture"
    rows, cols = np.nonzero(coat)
    # The follow camera keeps the dog near the middle of the picture.
    assert 0.25 < cols.mean() / coat.shape[1] < 0.75
    assert 0.25 < rows.mean() / coat.shape[0] < 0.85


def test_panda3d_joints_sit_where_the_runtime_puts_them(game):
    """Panda3D's own skeleton, driven by the runtime's pose, matches the runtime's joints."""
    example, game = game
    positions, _ = game.controller.display_pose()
    for name in ("Head", "LeftHandSite", "RightFootSite", "Tail1Site"):
        j = game.skeleton.index(name)
        exposed = game.dog.exposeJoint(None, "modelRoot", name)
        game.base.graphicsEngine.renderFrame()  # let the character update its joints
        x, y, z = exposed.getPos(game.base.render)
        expected = positions[0, j]
        assert np.allclose([x, z, -y], expected, atol=0.01), name  # Panda3D is z-up


def test_the_dog_stays_drawn_after_it_walks_off(game, tmp_path):
    """The dog disappeared after about 5 s of walking: its bounds stayed where the file put
    them, and the camera culled it (3,473 dog pixels at frame 90, none at 300 or 600)."""
    example, game = game
    game.keys.add("w")
    try:
        for _ in range(600):
            game.update(1 / 60)
    finally:
        game.keys.discard("w")
    hips = game.controller.display_pose()[0][0, 0]
    assert np.linalg.norm(hips[[0, 2]]) > 5.0  # it did walk off
    coat = tan_pixels(game.render_to(tmp_path / "walked.png"))
    assert coat.sum() > 200, "the dog was culled"


def test_a_rig_from_canis_rig_make_is_driven_in_panda3d(tmp_path):
    """`--rig corgi.glb`: the runtime's motion retargeted onto a game's own dog, drawn by
    Panda3D, in a process of its own (one ShowBase per process)."""
    from canis.tools.rig_make import make_rig

    rig = make_rig("corgi", tmp_path / "corgi.glb", 0.012)
    coat = rendered_coat(tmp_path, "--rig", str(rig))
    assert coat.sum() > 200, "no corgi in the picture"

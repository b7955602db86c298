"""The skinned body in the viewer (demo/skinned_mesh.py), off-screen through pyglet's EGL
headless mode with Mesa, against the bone view it replaces."""

import math

import numpy as np
import pytest

pytest.importorskip("pyglet")


@pytest.fixture(scope="module")
def app(tiny_model):
    from canis.demo.app import DemoApp

    try:
        app = DemoApp({"tiny": tiny_model}, terrain="flat", headless=True, width=640, height=360)
    except Exception as error:  # no EGL/GL on this machine: nothing to render with
        pytest.skip(f"no off-screen OpenGL here: {error}")
    app.gamepad = None
    return app


def _scene_pixels(app, offset_m=(0.0, 0.0, 0.0)) -> np.ndarray:
    """The 3-D scene alone (no HUD) from the app's camera, with the dogs moved by offset_m."""
    from canis.demo.scene import camera_matrix
    from pyglet.gl import glClearColor

    app.window.switch_to()
    glClearColor(0.72, 0.8, 0.9, 1.0)
    app.window.clear()
    positions, rotations = app.controller.display_pose()
    c = app.camera
    view = camera_matrix(positions[0, 0], c["yaw"], c["pitch"], c["distance"], 640 / 360)
    app.scene.draw(view, positions + np.array(offset_m), app.controller.contacts, [], rotations)
    return app.pixels()[..., :3].astype(int)


def _dog_area(app) -> int:
    """Pixels the dog covers: those that change when the dog is moved out of sight (the
    shadow stays where it was)."""
    gone = _scene_pixels(app, (0.0, -100.0, 0.0))
    return int(np.any(_scene_pixels(app) != gone, axis=-1).sum())


def test_body_covers_far_more_of_the_screen_than_the_bones(app):
    """Seen from the side on flat ground at the default camera distance, the standing body
    covers at least 2.5x the bone figure's screen area (issue 19's target). Measured with the
    shipped mesh: 2.54x from this side (4158 px against 1638 px at 640x360), 2.71x from the
    other, where the stand keyframe's head is turned toward the camera. The area comes from
    where a long-coated shepherd has it (a deep chest, the ruff and mane, muscled thighs,
    upright ears, a bushy tail), the barrel staying narrow: see tools/dog_mesh.py."""
    app.camera.update(yaw=math.pi / 2)  # from the dog's side; default pitch and distance
    app.scene.show_body = True
    body = _dog_area(app)
    app.scene.show_body = False
    bones = _dog_area(app)
    app.scene.show_body = True
    assert bones > 100
    assert body >= 2.5 * bones, f"body {body} px against bones {bones} px"


def test_b_toggles_between_body_and_bones(app):
    from test_demo import press

    assert app.scene.show_body
    press(app, app.key.B)
    assert not app.scene.show_body
    press(app, app.key.B)
    assert app.scene.show_body


def test_skinned_body_stays_with_the_skeleton_while_it_trots(app):
    """After a few seconds of trotting, the dog's coat is drawn where its joints project:
    the GPU's skinning put the body on the pose, not left it at the bind pose."""
    from canis.runtime.features import ACTIONS
    from canis.runtime.trajectory import ControlState

    control = ControlState(np.array([[0.0, 1.5]]), np.zeros(1), np.array([ACTIONS.index("move")]))
    for _ in range(120):
        app.step(control=control)
    app.camera.update(yaw=math.pi / 2)
    gone = _scene_pixels(app, (0.0, -100.0, 0.0))
    coat = np.any(_scene_pixels(app) != gone, axis=-1)  # where the body is drawn
    app.on_draw()  # for app.view_projection
    positions, _ = app.controller.display_pose()
    points = np.concatenate([positions[0], np.ones((27, 1))], axis=1)
    clip = points @ np.array(app.view_projection).reshape(4, 4)
    ndc = clip[:, :2] / clip[:, 3:]
    cols = ((ndc[:, 0] + 1) / 2 * 640).astype(int)
    rows = ((1 - (ndc[:, 1] + 1) / 2) * 360).astype(int)
    # Every joint of the legs, spine, neck and head lies inside the coat (a few pixels'
    # slack for joints at the surface, like the paws' tips).
    near_coat = np.array(
        [
            coat[max(y - 4, 0) : y + 5, max(x - 4, 0) : x + 5].any()
            for x, y in zip(cols, rows, strict=True)
        ]
    )
    assert near_coat.all(), f"joints off the body: {np.flatnonzero(~near_coat)}"
    ys, xs = np.nonzero(coat)
    assert xs.min() >= cols.min() - 40 and xs.max() <= cols.max() + 40  # no stray geometry

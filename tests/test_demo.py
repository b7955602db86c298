"""The viewer rendered off-screen (pyglet's EGL headless mode with Mesa)."""

import itertools
import json
import os
from pathlib import Path

import numpy as np
import pytest
from canis.runtime.transition_requests import MAX_STOP_S

pytest.importorskip("pyglet")


@pytest.fixture(scope="module")
def app(tiny_model):
    from canis.demo.app import DemoApp

    try:
        return DemoApp({"tiny": tiny_model}, terrain="hills", headless=True, width=640, height=360)
    except Exception as error:  # no EGL/GL on this machine: nothing to render with
        pytest.skip(f"no off-screen OpenGL here: {error}")


def test_first_frame_shows_the_dog_over_the_terrain(app):
    from canis.demo.scene import DOG_COLOUR, TERRAIN_COLOUR

    app.window.switch_to()
    app.on_draw()
    pixels = app.pixels()[..., :3].astype(int)
    positions, _ = app.controller.display_pose()
    # Project the dog's joints to find where it must appear on screen.
    points = np.concatenate([positions[0], np.ones((27, 1))], axis=1)
    clip = points @ np.array(app.view_projection).reshape(4, 4)
    ndc = clip[:, :2] / clip[:, 3:]
    cols = ((ndc[:, 0] + 1) / 2 * 640).astype(int)
    rows = ((1 - (ndc[:, 1] + 1) / 2) * 360).astype(int)
    box = pixels[max(rows.min() - 5, 0) : rows.max() + 5, max(cols.min() - 5, 0) : cols.max() + 5]
    lit = np.array(DOG_COLOUR[:3]) * 255
    # Shading scales the colour; look for the dog's hue (orange-brown: r > g > b).
    r, g, b = box[..., 0], box[..., 1], box[..., 2]
    doggish = (r > g + 25) & (g > b + 15) & (r > 0.3 * lit[0])
    assert doggish.sum() > 50, "no dog-coloured pixels where the dog projects"
    outside = np.ones(pixels.shape[:2], dtype=bool)
    outside[max(rows.min() - 5, 0) : rows.max() + 5, max(cols.min() - 5, 0) : cols.max() + 5] = (
        False
    )
    below = pixels[200:][outside[200:]]
    greenish = (below[:, 1] > below[:, 0]) & (below[:, 1] > below[:, 2])
    assert greenish.mean() > 0.8  # terrain everywhere below the horizon
    assert TERRAIN_COLOUR[1] > TERRAIN_COLOUR[0]


def test_terrain_patch_is_fine_near_the_dog_and_follows_it(app):
    """The terrain's grid is 0.5 m apart around the patch's centre and coarser beyond (what
    llvmpipe draws cheaper), without gaps; recentred in place, its vertices lie on the terrain
    around the new centre, the fine ones on the same 0.5 m lattice."""
    from canis.demo.scene import (
        TERRAIN_FINE_HALF_WIDTH_M,
        TERRAIN_RECENTRE_M,
        TERRAIN_STEP_M,
        TERRAIN_VIEW_SIZE_M,
        terrain_grid_offsets_m,
    )

    offsets = terrain_grid_offsets_m()
    np.testing.assert_allclose(offsets, -offsets[::-1])
    assert offsets[0] == -TERRAIN_VIEW_SIZE_M / 2 and np.all(np.diff(offsets) > 0)
    cells = np.diff(offsets)
    near = np.abs(offsets[:-1] + cells / 2) < TERRAIN_FINE_HALF_WIDTH_M
    np.testing.assert_allclose(cells[near], TERRAIN_STEP_M)
    assert cells[~near].max() > 3 * TERRAIN_STEP_M  # the far cells are coarser
    scene = app.scene
    start = scene.terrain_centre.copy()
    scene.follow(start + TERRAIN_RECENTRE_M / 2)
    assert np.all(scene.terrain_centre == start)  # not yet
    scene.follow(start + [TERRAIN_RECENTRE_M + 1.3, -7.6])
    centre = scene.terrain_centre.copy()
    np.testing.assert_allclose(centre, np.round(start + [TERRAIN_RECENTRE_M + 1.3, -7.6]))
    vertices = np.ctypeslib.as_array(scene.terrain_mesh.position).reshape(-1, 3)
    xs, zs = np.unique(vertices[:, 0]), np.unique(vertices[:, 2])
    np.testing.assert_allclose(xs, centre[0] + offsets, atol=1e-4)
    np.testing.assert_allclose(zs, centre[1] + offsets, atol=1e-4)
    heights, _ = scene.terrain.sample(vertices[:, [0, 2]])
    np.testing.assert_allclose(vertices[:, 1], heights, atol=1e-5)
    scene.set_terrain(scene.terrain, start)


def test_coarse_terrain_cells_are_shaded_as_the_ramps_they_draw(app):
    """On stairs, a far 2 m cell across a step edge draws a gentle ramp: its vertices get the
    grid's own normals (no steep, dark streak across the distance); near cells keep the
    heightmap's."""
    from canis.demo.scene import TERRAIN_FINE_HALF_WIDTH_M, _terrain_mesh, terrain_grid_offsets_m
    from canis.runtime.terrain import load_terrain

    stairs = load_terrain("steps")
    offsets = terrain_grid_offsets_m()
    positions, normals, _ = _terrain_mesh(stairs, (0.0, 0.0), offsets, TERRAIN_FINE_HALF_WIDTH_M)
    _, sampled = stairs.sample(positions[:, [0, 2]])
    far = np.maximum(*np.meshgrid(np.abs(offsets), np.abs(offsets))).reshape(-1) > 6.0
    np.testing.assert_allclose(normals[~far], sampled[~far], atol=1e-6)
    steepest_grid = np.degrees(np.arccos(normals[far, 1].min()))
    assert np.degrees(np.arccos(sampled[far, 1].min())) > steepest_grid + 10  # edges: steep
    # Each grid slope is a weighted mean of the rises to its neighbours over their distance.
    heights = positions[:, 1].reshape(len(offsets), len(offsets))
    rise = max(np.abs(np.diff(heights, axis=a)).max() for a in (0, 1))
    bound = np.degrees(np.arctan(np.sqrt(2) * rise / np.diff(offsets).min()))
    assert 0 < steepest_grid <= bound + 1e-3


def test_hidden_parts_leave_the_picture_and_draw_parts_times_each(app, tiny_model):
    """Scene.hidden (what demo/draw_parts.py leaves out to time each part) really leaves the
    terrain out, and everything is back once the set is empty."""
    from canis.demo.draw_parts import HUD_PARTS, SCENE_PARTS, measure_parts

    def greenish_share():
        app.window.switch_to()
        app.on_draw()
        below = app.pixels()[250:, :, :3].astype(int).reshape(-1, 3)
        return float(np.mean((below[:, 1] > below[:, 0]) & (below[:, 1] > below[:, 2])))

    app.scene.hidden = {"terrain"}
    assert greenish_share() < 0.2
    app.scene.hidden = set()
    assert greenish_share() > 0.8
    result = measure_parts(tiny_model, rounds=1, block=2, warmup=0)
    assert set(result["share"]) == set(SCENE_PARTS) | set(HUD_PARTS)
    assert all(np.isfinite(m) and m > 0 for m in result["median_draw_ms"].values())


def press(app, symbol, release=False):
    """A key event through the window's own handler stack, as the platform layer delivers it
    (bypassing only the OS queue), so a handler that shadows another is caught."""
    from pyglet.event import EventDispatcher

    event = "on_key_release" if release else "on_key_press"
    EventDispatcher.dispatch_event(app.window, event, symbol, 0)


def test_keys_drive_the_dog_and_toggle_things(app):
    key = app.key
    press(app, key.W)
    assert app.keys[key.W], "the window's key press never reached the key-state handler"
    start = app.controller.root_xz_m.copy()
    for _ in range(90):
        app.step()
    press(app, key.W, release=True)
    assert not app.keys[key.W]
    assert np.linalg.norm(app.controller.root_xz_m - start) > 0.2
    press(app, key.G)
    assert not app.controller.ik.enabled
    press(app, key.P)
    app.update(1.0)
    frame = app.controller.frame
    press(app, key.N)
    app.update(0.0)
    assert app.controller.frame == frame + 1  # single step while paused
    press(app, key.T)
    assert app.terrains[app.terrain_index] != "hills"


def suggested_commands(err: str) -> list[list[str]]:
    """The commands a no-display message prints, one per indented line, split as a shell
    would."""
    import shlex

    return [shlex.split(line) for line in err.splitlines() if line.startswith("  ")]


@pytest.mark.parametrize("launcher", [None, "./run", "../canis checkout/run"])
def test_demo_without_display_explains_itself(launcher, monkeypatch, capsys):
    """It suggested `canis demo --headless ...`, which is not on PATH after `./run demo`:
    started by ./run (CANIS_LAUNCHER), it prints `./run canis ...`, and the script it names
    exists where it says."""
    from canis.cli import main

    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    if launcher is None:
        monkeypatch.delenv("CANIS_LAUNCHER", raising=False)
    else:
        monkeypatch.setenv("CANIS_LAUNCHER", launcher)
    if os.name != "posix":
        pytest.skip("display detection is for Linux")
    assert main(["demo"]) == 2
    commands = suggested_commands(capsys.readouterr().err)
    assert len(commands) == 2
    prefix = ["canis"] if launcher is None else [launcher, "canis"]
    for command in commands:
        assert command[: len(prefix) + 1] == prefix + ["demo"], command
    headless, check = (command[len(prefix) :] for command in commands)
    assert check == ["demo", "--check"]
    assert "--headless" in headless and "--video" in headless
    assert Path(headless[headless.index("--script") + 1]).is_file()
    assert headless[headless.index("--video") + 1].endswith(".mp4")


def test_run_demo_without_display_prints_commands_that_run_as_printed(tmp_path):
    """Through the real ./run from another folder: the suggestion starts with the path
    ./run was called by, and its script path is right from the caller's folder."""
    import subprocess
    import sys

    repo = Path(__file__).resolve().parent.parent
    venv = Path(sys.prefix)
    if not list(venv.glob(".canis-installed-*")):
        pytest.skip("not running in an environment made by ./run")
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env["CANIS_VENV"] = str(venv)
    run_script = os.path.relpath(repo / "run", tmp_path)
    result = subprocess.run(
        [run_script, "demo"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert result.returncode == 2, result.stderr
    headless, check = suggested_commands(result.stderr)
    assert headless[:3] == [run_script, "canis", "demo"] and check[:3] == headless[:3]
    assert (tmp_path / headless[headless.index("--script") + 1]).is_file()


def test_recorded_input_replays_exactly(app, tiny_model, tmp_path):
    import json

    from canis.demo.input import InputFrame
    from canis.runtime.terrain import load_terrain

    from canis.cli import main

    # The state canis run starts from: hills, IK on, the standing dog at the origin.
    app.terrain_index = app.terrains.index("hills")
    app.heightmap = app.controller.terrain = load_terrain("hills")
    app.controller.ik.enabled = True
    app.controller.ik.weight[:] = 1.0
    app.controller.reset()
    app.player.__init__()
    app.camera["yaw"] = 0.3
    app.toggle_recording()
    frames = (
        [InputFrame(move=(0.0, 1.0))] * 40
        + [InputFrame(move=(0.7, 0.7), boost=1.0)] * 40
        + [InputFrame(turn=1.0)] * 20
        + [InputFrame(action="sit")]
        + [InputFrame()] * 19
    )
    for frame in frames[:50]:
        app.step(frame)
    app.on_key_press(app.key.G, 0)  # IK off and on again: recorded too
    app.on_key_press(app.key.G, 0)
    for frame in frames[50:]:
        app.step(frame)
    script = app.toggle_recording(tmp_path / "input.json")
    recording = json.loads(script.read_text())
    assert recording["terrain"] == "hills" and recording["model"] == str(tiny_model.resolve())
    assert recording["seconds"] == pytest.approx(len(frames) / 60)
    # Only the script: model, terrain, start and length come from the recording.
    summary_path = tmp_path / "summary.json"
    assert main(["run", "--script", str(script), "--record", str(tmp_path / "replay.npz"),
                 "--json", str(summary_path)]) == 0  # fmt: skip
    summary = json.loads(summary_path.read_text())
    replay = np.load(tmp_path / "replay.npz")
    assert summary["frames"] == len(frames) and summary["terrain"] == "hills"
    assert np.allclose(replay["roots"][-1][[0, 2]], app.controller.root_xz_m[0], atol=1e-6)
    np.testing.assert_allclose(
        replay["positions"][-1], app.controller.display_positions[0], atol=1e-4
    )


def test_hud_plots_are_built_and_drawn(app):
    for _ in range(12):
        app.step()
    app.draws = 0  # the next draw rebuilds the plots
    app.window.switch_to()
    app.on_draw()
    assert app.plots.lines is not None and app.plots.lines.count > 100


def test_a_displayed_frame_holds_its_steps_and_its_render(app):
    """render used to land in the next frame: each step closed a frame before drawing."""
    app.paused = app.slow_motion = False  # as earlier tests may have left them
    for _ in range(4):
        app.tick(1 / 60)
    frames = list(app.profiler.ring)[-3:]
    assert all("render" in f.stages and f.wall_ms >= f.stages["render"] for f in frames)
    assert sum(f.steps for f in frames) >= 2  # 60 Hz steps inside 60 Hz displayed frames
    assert all("inference" in f.stages for f in frames if f.steps)


def test_the_stage_plot_scales_to_the_frames_and_names_its_stages(app):
    from canis.demo.hud import graph_scale_ms

    assert graph_scale_ms(np.full(100, 0.5), 2.0) == 2.5  # the budget line stays in view
    assert graph_scale_ms(np.full(100, 9.0), 2.0) == 10  # a slow machine is not pinned
    app.draws = 0
    app.window.switch_to()
    app.on_draw()
    assert app.plot_titles["frame"].text.startswith("frame time per stage, 0-")
    # Each title ends a space before the next one starts (the frame title ran into the
    # experts' with no gap: "...budget)expert weights").
    titles = [app.plot_titles[name] for name in ("frame", "experts", "footfalls")]
    for title, following in itertools.pairwise(titles):
        assert title.x + title.content_width + 10 <= following.x, title.text
    legend = [label.text for label in app.stage_legend]
    assert {"transition", "render", "inference", "other"} <= set(legend)


def test_the_stage_plot_bins_its_frames_and_keeps_the_spikes(app):
    """600 frames become at most FRAME_PLOT_POINTS points a line, each bin showing its slowest
    frame: one 2 ms frame among 1 ms ones still reaches its height, lines stay stacked."""
    from canis.demo.hud import FRAME_PLOT_POINTS, PANEL

    rng = np.random.default_rng(0)
    stages = {"inference": rng.uniform(0.5, 1.0, 600), "ik": rng.uniform(0.1, 0.2, 600)}
    stages["inference"][377] = 2.0  # below the graph's top (2.5 ms here)
    plots = app.plots
    plots.pieces = []
    scale = plots.frame_times(10, 10, stages, 2.0)
    lines = [segments for segments, _ in plots.pieces[2:]]  # after the box and the budget
    plots.pieces = []
    assert len(lines) == 2 and all(len(line) == FRAME_PLOT_POINTS - 1 for line in lines)
    top_px = 10 + PANEL[1] * (2.0 + stages["ik"][377]) / scale
    assert lines[1][:, [1, 3]].max() == pytest.approx(top_px)
    assert np.all(lines[1][:, 1] >= lines[0][:, 1])


def test_x_key_transitions_and_the_recording_replays_it(app, tiny_model, tiny_rtn, tmp_path):

    from canis.runtime.transition import TransitionModel

    app.transition_model = TransitionModel(tiny_rtn)
    app.heightmap = load_hills()
    app._new_controller()
    app.player.__init__()
    app.toggle_recording()
    for _ in range(30):
        app.step()
    app.on_key_press(app.key.X, 0)  # stand -> the first keyframe
    frames = 30
    # The tiny network's dog drifts about the stop speed: it may stop first (MAX_STOP_S at most).
    while not app.controller.in_transition()[0]:
        assert app.postures.waiting()[0] and frames < 30 + MAX_STOP_S * 60 + 1
        app.step()
        frames += 1
    assert "transition to" in app.notice.current
    for _ in range(60):
        app.step()
    assert not app.controller.in_transition()[0]
    script = app.toggle_recording(tmp_path / "input.json")
    assert "transition" in script.read_text()
    assert_replay_ends_as_shown(app, tiny_model, tiny_rtn, script, frames + 60, tmp_path)


def test_v_key_varies_the_postures_and_the_recording_replays_them(
    app, tiny_model, tiny_rtn, tmp_path
):
    """V: each posture a sampled transition; the recording keeps each one's variation and
    seed, so `canis run` replays the same take. Without target noise V says why not."""
    import json

    from canis.runtime.transition import TransitionModel

    noisy_rtn = Path(__file__).resolve().parent / "fixtures" / "tiny_rtn_noise_step.onnx"
    app.transition_model = TransitionModel(tiny_rtn)
    app.on_key_press(app.key.V, 0)
    assert not app.vary_transitions and "no target noise" in app.notice.current
    app.transition_model = TransitionModel(noisy_rtn)
    app.heightmap = load_hills()
    app._new_controller()
    app.player.__init__()
    try:
        app.on_key_press(app.key.V, 0)
        assert app.vary_transitions and "transitions varied" in app.notice.current
        assert any("transitions varied" in text for text, _ in app.hud_lines())
        app.toggle_recording()
        shown = []

        def step():
            app.step()
            shown.append(app.controller.display_positions[0].copy())

        for _ in range(20):
            step()
        for _ in range(2):  # two postures, each with its own seed, each played to its end
            app.on_key_press(app.key.X, 0)
            step()
            while app.postures.waiting()[0] or app.controller.in_transition()[0]:
                step()
        script = app.toggle_recording(tmp_path / "varied.json")
    finally:
        app.vary_transitions = False
    asked = [e["transition"] for e in json.loads(script.read_text())["events"] if "transition" in e]
    assert len(asked) == 2 and all(a["variation"] == 1.0 for a in asked)
    assert asked[0]["seed"] != asked[1]["seed"]
    replay = assert_replay_ends_as_shown(app, tiny_model, noisy_rtn, script, len(shown), tmp_path)
    np.testing.assert_allclose(replay, np.array(shown), atol=1e-4)  # every frame of both


def assert_replay_ends_as_shown(app, motion_model, transition_model, script, frames, tmp_path):
    """`canis run` of the demo's recording, on its hills from its start, ends on the pose the
    demo shows now; returns the replay's shown positions, a frame each."""
    import json

    from canis.tools.run import run

    run(
        motion_model,
        frames / 60,
        script=script,
        terrain="hills",
        record=tmp_path / "replay.npz",
        transition_model_path=transition_model,
        start_xz_m=json.loads(script.read_text())["start"]["xz_m"],
    )
    replay = np.load(tmp_path / "replay.npz")["positions"]
    np.testing.assert_allclose(replay[-1], app.controller.display_positions[0], atol=1e-4)
    return replay


def load_hills():
    from canis.runtime.terrain import load_terrain

    return load_terrain("hills")


def test_headless_frames_name_the_script_as_the_input(app, tmp_path):
    """Frames captured from a script said 'input keyboard'."""
    from canis.demo.capture import capture
    from canis.tools.script import ScriptDriver

    driver = ScriptDriver([{"t": 0.0, "move": [0, 1], "speed": 1.0, "action": "move"}])
    written = capture(app, driver, 2 / 60, tmp_path)
    assert len(written) == 1 and written[0].stat().st_size > 0
    assert "input script" in repr(app.hud_lines())


# --- the shipped models, driven through the window's own event dispatch -------------------


@pytest.fixture(scope="module")
def shipped_app(tmp_path_factory):
    from canis.demo.app import DemoApp
    from canis.runtime.assets import (
        DEFAULT_MOTION_MODEL,
        SHIPPED_MOTION_MODELS,
        asset_path,
        shipped_model_path,
    )
    from canis.runtime.transition import shipped_transition_model_path

    if not asset_path(SHIPPED_MOTION_MODELS[DEFAULT_MOTION_MODEL], must_exist=False).is_file():
        pytest.skip("no shipped MANN-8")
    if not shipped_transition_model_path().is_file():
        pytest.skip("no shipped transition model")
    try:
        return DemoApp(
            {"MANN-8": shipped_model_path("MANN-8"), "PFNN": shipped_model_path("PFNN")},
            headless=True,
            gamepad=False,
            out_dir=tmp_path_factory.mktemp("out") / "demo",
        )
    except Exception as error:
        pytest.skip(f"no off-screen OpenGL here: {error}")


def steps(app, count):
    for _ in range(count):
        app.step()


def largest_joint_step_cm(app, count) -> float:
    """The largest distance any displayed joint moves in one frame over `count` frames."""
    previous, worst = app.controller.display_pose()[0][0].copy(), 0.0
    for _ in range(count):
        app.step()
        now = app.controller.display_pose()[0][0]
        worst = max(worst, float(np.linalg.norm(now - previous, axis=1).max()))
        previous = now.copy()
    return worst * 100


def test_held_w_walks_at_the_asked_speed(shipped_app):
    app, key = shipped_app, shipped_app.key
    press(app, key.R)
    press(app, key.W)
    steps(app, 300)
    press(app, key.W, release=True)
    assert app.shown_speed_mps == pytest.approx(1.1, rel=0.1)
    press(app, key.R)


def documented_worst_cm() -> float:
    """The largest of the hand-back table's worst per-frame joint displacement, the worst of
    the postures asked stopping first (the demo's way) and the worst getting up from them, as
    `canis evaluate transitions --handback-only` wrote them into docs/RESULTS.md: the
    hand-back's alone fell under what the RTN's own playback moves a joint once the hand-back
    stopped popping."""
    import re

    # evaluation/handback.py's WORST_LINE and STOPPED_FIRST_LINE (not imported: this
    # module runs torch-free).
    doc = (Path(__file__).parents[1] / "docs" / "RESULTS.md").read_text()
    worsts = []
    for pattern in (
        r"Worst after the hand-back: ([0-9.]+) cm/frame",
        r"Worst stopping first: ([0-9.]+) cm/frame",
        r"Worst getting up: ([0-9.]+) cm/frame",
    ):
        found = re.search(pattern, doc)
        assert found, "docs/RESULTS.md has no hand-back section: canis evaluate transitions"
        worsts.append(float(found.group(1)))
    return max(worsts)


# A fixed ceiling beside the table's worst: the table is regenerated for each shipped network,
# so a network whose postures pop would otherwise pass against its own table (a candidate of
# 2026-11-28 popped 17.8-22.9 cm/frame; the shipped one's worst is 9.5, and a canter's own
# fastest joint moves 12-13 cm in a frame).
POSTURE_CEILING_CM = 12.0
# The table is measured on one machine, and the closed loop's arithmetic differs between CPUs:
# the same code and files gave the demo's lie 7.96 cm/frame on an AMD EPYC (Zen 3, no
# AVX-512) against the table's 7.29 from an Intel Xeon. So the bar is the table's worst with
# this allowance for the machine, still under the fixed ceiling.
MACHINE_ALLOWANCE = 1.25
DOCUMENTED_WORST_CM = min(MACHINE_ALLOWANCE * documented_worst_cm(), POSTURE_CEILING_CM)


@pytest.mark.parametrize("key_name, action", [("_2", "sit"), ("_4", "lie"), ("_3", "beg")])
def test_posture_keys_go_through_the_transition_network_without_a_pop(
    shipped_app, key_name, action
):
    app, key = shipped_app, shipped_app.key
    press(app, key.R)
    steps(app, 60)
    press(app, getattr(key, key_name))
    app.step()
    assert app.controller.in_transition()[0], "the posture key did not start a transition"
    assert largest_joint_step_cm(app, 150) < DOCUMENTED_WORST_CM
    assert app.shown_action == action and not app.controller.in_transition()[0]
    press(app, key._1)  # and up again, through the transition network too
    app.step()
    assert app.controller.in_transition()[0]
    assert largest_joint_step_cm(app, 120) < DOCUMENTED_WORST_CM
    assert app.shown_action == "idle"


def joint_steps_cm(app, until) -> list[float]:
    """Each step's largest joint move (cm) of the shown pose, stepping until `until()`."""
    moves, previous = [], app.controller.display_pose()[0][0].copy()
    for _ in range(600):
        if until():
            return moves
        app.step()
        now = app.controller.display_pose()[0][0]
        moves.append(float(np.linalg.norm(now - previous, axis=1).max()) * 100)
        previous = now.copy()
    raise AssertionError("stepped 10 s without getting there")


@pytest.mark.parametrize("canter", [False, True], ids=["walking", "cantering"])
@pytest.mark.parametrize("key_name, action", [("_2", "sit"), ("_4", "lie"), ("_3", "beg")])
def test_posture_keys_while_moving_on_hills_stop_first_then_go_smoothly(
    shipped_app, key_name, action, canter
):
    """Issue 21 item 4: W (and Shift) held on the hills, then a posture key: the dog slows
    through the motion network (no joint faster than its own gait), stops, and goes to the
    posture through the RTN with no frame above the documented worst; the held W does
    not get it up again until it is let go."""
    app, key = shipped_app, shipped_app.key
    assert app.terrain_name == "hills"
    press(app, key.R)
    press(app, key.W)
    if canter:
        press(app, key.LSHIFT)
    try:
        _posture_while_moving(app, key, key_name, action)
    finally:  # a failure leaves no key held for the tests after it (the app is shared)
        press(app, key.W, release=True)
        press(app, key.LSHIFT, release=True)
        press(app, key.R)


def _posture_while_moving(app, key, key_name, action):
    steps(app, 120)
    # Its gait's fastest joint over its last 3 s: on the hills a second of canter (about 2.5
    # strides) peaks anywhere from 13 to 20 cm a frame with the shipped MANN-8 (measured
    # second by second), so one second is no yardstick for the stop's fastest frame; from one
    # 3 s window to the next the canter's peak still varies by up to 6% (13.5-14.3 cm), and
    # the stop's first frames are that canter, so the stop may reach 5% over it (a pop is 2x).
    end = app.steps + 180
    gait = max(joint_steps_cm(app, lambda: app.steps >= end))
    press(app, getattr(key, key_name))
    app.step()
    assert app.postures.waiting()[0] and app.player.action == action
    stopping = joint_steps_cm(app, lambda: app.controller.in_transition()[0])
    assert 0 < len(stopping) <= 90 and max(stopping) <= 1.05 * gait, (max(stopping), gait)
    posture = joint_steps_cm(app, lambda: not app.controller.in_transition()[0])
    end = app.steps + 120
    posture += joint_steps_cm(app, lambda: app.steps >= end)  # and held for 2 s
    assert max(posture) < DOCUMENTED_WORST_CM, (max(posture), int(np.argmax(posture)))
    assert app.shown_action == action and app.keys[key.W]
    # evaluation/handback.py's HELD_BAR_MPS: its postures table prints each held speed.
    assert np.linalg.norm(app.controller.root_velocity_xz_mps[0]) < 0.1
    press(app, key.W, release=True)
    press(app, key.LSHIFT, release=True)
    app.step()  # let go for a frame
    press(app, key.W)  # pressed again: the dog gets up and goes
    steps(app, 90)
    assert app.player.action == "move" and app.shown_speed_mps > 0.2


# evaluation/controllers.py's COURSE_BAR_DEG (not imported: this module runs torch-free).
COURSE_BAR_DEG = 10.0


@pytest.mark.parametrize("canter", [False, True], ids=["walking", "cantering"])
def test_the_dog_goes_where_it_is_asked_on_the_hills(shipped_app, canter):
    """W (and Shift) held on the demo's hills: after 3 s to get going, the dog's way over the
    next 2 s is within 10 degrees of the facing the player asks (docs/RESULTS.md's gait
    table measures the course at four speeds; a candidate of 2026-11-29 that met every other
    bar cantered 21 degrees off it and walked 10 off at 0.5 m/s)."""
    app, key = shipped_app, shipped_app.key
    press(app, key.R)
    press(app, key.W)
    if canter:
        press(app, key.LSHIFT)
    steps(app, 180)
    start = app.controller.root_xz_m[0].copy()
    steps(app, 120)
    way_x, way_z = app.controller.root_xz_m[0] - start
    press(app, key.W, release=True)
    press(app, key.LSHIFT, release=True)
    off = np.degrees(np.arctan2(way_x, way_z) - app.player.facing_yaw_rad)
    off = (off + 180) % 360 - 180
    press(app, key.R)
    assert abs(off) < COURSE_BAR_DEG, f"{off:+.1f} degrees off the asked direction"


def test_a_standing_dog_stands_still(shipped_app):
    """No key held: after a second to settle from the pose R places (the shipped network takes
    a step of 2.1 cm/frame in it), no joint moves more than a centimetre in a frame for 2 s
    (the shipped int8 network 0.33; leg-motion fine-tunes that shuffled 1.8-4.1)."""
    app, key = shipped_app, shipped_app.key
    press(app, key.R)
    steps(app, 60)
    end = app.steps + 120
    assert max(joint_steps_cm(app, lambda: app.steps >= end)) < 1.0


def test_r_resets_the_dog_and_drops_a_held_posture(shipped_app):
    app, key = shipped_app, shipped_app.key
    press(app, key._2)
    steps(app, 90)
    assert app.player.action == "sit"
    press(app, key.R)
    steps(app, 30)
    assert app.player.action == "idle" and app.shown_action == "idle"
    assert np.linalg.norm(app.controller.root_xz_m[0]) < 0.05


def test_screenshots_and_recordings_go_to_the_output_folder_and_are_named(shipped_app, monkeypatch):
    import json

    monkeypatch.setenv("CANIS_LAUNCHER", "./run")  # as ./run demo starts it

    app, key = shipped_app, shipped_app.key
    app.window.switch_to()
    app.on_draw()
    press(app, key.F12)
    shot = app.last_saved
    assert shot.parent == app.out_dir and shot.suffix == ".png" and shot.stat().st_size > 0
    assert str(shot) in app.notice.current
    press(app, key.F5)
    assert app.recorder is not None and "REC" in app._recording_text()
    steps(app, 30)
    press(app, key.F5)
    saved = app.last_saved
    assert saved.parent == app.out_dir and str(saved) in app.notice.current
    assert f"(replay: ./run canis run --script {saved})" in app.notice.current  # runnable
    assert app._recording_text() == ""
    recording = json.loads(saved.read_text())
    assert recording["model"] == "MANN-8" and recording["terrain"] == "hills"
    assert recording["speed_calibration"] is True


def test_quitting_mid_recording_saves_it(shipped_app):
    app = shipped_app
    app.toggle_recording()
    steps(app, 10)
    saved = app.close()
    assert saved is not None and saved.exists() and app.recorder is None


def test_hud_lines_never_wrap_at_1280_and_notices_expire(shipped_app):
    from canis.demo.hud_text import RECORDING_ROOM_PX

    app, key = shipped_app, shipped_app.key
    assert (app.window.width, app.window.height) == (1280, 720)
    app.paused, app.slow_motion = True, True
    app.toggle_recording()
    press(app, key.X)  # a transition: its stage joins the stage line
    app.pending_steps = 3
    app.update(0.0)
    long_name = app.out_dir / ("canis-input-20250101-120000-12" + "-long" * 20 + ".json")
    app.notice.say(f"recording saved: {long_name}  (replay: canis run --script {long_name})")
    app.hud.set_lines(app.hud_lines(), 1280)
    app.hud.set_recording(app._recording_text())
    assert app.hud.recording.content_width < RECORDING_ROOM_PX
    assert app.hud.widest_px() <= 1280 - 20 - RECORDING_ROOM_PX
    shown = [label.text for label in app.hud.lines]
    notice = shown.index(next(t for t in shown if "recording saved" in t))
    assert not any("\u2026" in t for i, t in enumerate(shown) if i != notice), shown
    assert "\u2026" in shown[notice]  # the long file name lost its middle, not the line
    assert any("fps" in text for text, _ in app.hud_lines())
    app.notice.until = 0.0  # its time is up
    assert app.notice.current == ""
    assert not any("recording saved" in text for text, _ in app.hud_lines())
    app.toggle_recording()
    app.paused, app.slow_motion = False, False


def test_pfnn_hides_the_expert_plot(shipped_app):
    app, key = shipped_app, shipped_app.key
    steps(app, 30)
    assert app.expert_history
    press(app, key.F1)
    assert app.model_name == "PFNN"
    steps(app, 30)
    assert app.expert_history == [] and app.controller.expert_weights is None
    assert not any(text.startswith("expert weights") for text, _ in app.hud_lines())
    app.draws = 0  # the next draw rebuilds the plots
    app.window.switch_to()
    app.on_draw()
    without_experts = app.plots.lines.count  # the frame-time and footfall panels only
    press(app, key.F1)
    assert app.model_name == "MANN-8"
    steps(app, 30)
    app.draws = 0
    app.on_draw()
    assert app.plots.lines.count > without_experts  # MANN's expert lines are back


def test_one_space_press_is_one_jump_while_moving(shipped_app):
    app, key = shipped_app, shipped_app.key
    press(app, key.R)
    press(app, key.W)
    steps(app, 120)
    jumps = app.player.jumps
    press(app, key.SPACE)
    press(app, key.SPACE, release=True)
    actions = []
    for _ in range(120):  # the move key stays held for two more seconds
        app.step()
        actions.append(app.player.action)
    press(app, key.W, release=True)
    assert app.player.jumps == jumps + 1
    asked = np.array(actions) == "jump"
    assert 0 < asked.sum() <= 31 and not asked[-1]


def test_begging_is_beg_in_keys_recordings_and_scripts_and_stand_still_loads(shipped_app, tmp_path):
    """Issue 23 item 3: the begging action is "beg" wherever a user sees or writes it (the
    keyframe "stand", on four legs, keeps its name); an old script or recording that says
    "stand" for begging still plays, as beg, with a DeprecationWarning."""
    import json

    from canis.demo.devices import BUTTON_ACTIONS
    from canis.demo.input import POSTURE_KEYFRAMES, POSTURES
    from canis.demo.keys import ACTION_KEYS, HELP
    from canis.runtime.actions import Action
    from canis.tools.script import ScriptDriver, load_script
    from canis.tools.soak import ACTION_WEIGHTS

    assert ACTION_KEYS["_3"] == "beg" and "3 beg" in HELP[0] and BUTTON_ACTIONS["y"] == "beg"
    assert "beg" in POSTURES and "beg" in ACTION_WEIGHTS
    assert POSTURE_KEYFRAMES == {"idle": "stand", "sit": "sit", "lie": "lie", "beg": "beg"}
    app, key = shipped_app, shipped_app.key
    press(app, key.R)
    app.toggle_recording(tmp_path / "beg.json")
    press(app, key._3)
    steps(app, 80)
    assert app.shown_action == "beg" and "action beg" in app.hud_lines()[0][0]
    saved = app.toggle_recording()
    events = json.loads(saved.read_text())["events"]
    actions = {e["action"] for e in events if "action" in e}
    assert "beg" in actions and "stand" not in actions
    assert {"t": events[-1]["t"]} and any(
        e.get("transition", {}).get("to") == "beg" for e in events
    )
    old = tmp_path / "old.json"
    old.write_text(json.dumps([{"t": 0.0, "action": "stand"}]))
    with pytest.deprecated_call(match="now called 'beg'"):
        events = load_script(old)
    assert events == [{"t": 0.0, "action": "beg"}]
    control = ScriptDriver(events).control(0.0, None)
    assert control.action.tolist() == [int(Action.BEG)]
    press(app, key.R)


def test_the_demo_runs_transitions_on_the_worker_unless_told_not_to():
    """The window draws between two steps: the RTN's steps run then, on the worker's
    thread (docs/RESULTS.md, the paced runs); --no-transition-worker keeps them in the
    step."""
    import inspect

    from canis.demo.app import DemoApp

    from canis.cli import build_parser

    parser = build_parser()
    assert parser.parse_args(["demo"]).transition_worker is True
    assert parser.parse_args(["demo", "--no-transition-worker"]).transition_worker is False
    assert inspect.signature(DemoApp).parameters["transition_worker"].default is True


# --- the HUD's budget line: the controller's step, the render apart ------------------------


def test_the_budget_counts_the_controllers_steps_not_the_render():
    """The HUD read "12114 over 2 ms" for a 0.2 ms controller: its count was of displayed
    frames, software render included."""
    from canis.demo.hud_text import StepTimes, timing_line

    steps = StepTimes(budget_ms=2.0, window=4)
    assert timing_line(steps, float("nan")) == (  # nothing measured yet
        "controller step p50 - ms p99 - ms (0 over 2 ms)  |  render p50 - ms (not in the budget)"
    )
    for ms in (0.2, 0.2, 0.3, 2.5, 0.2, 0.2):
        steps.add(ms)
    assert steps.steps == 6 and steps.over == 1  # since the start, not over the window
    assert len(steps.recent) == 4 and steps.percentile_ms(50) == pytest.approx(0.25)
    line = timing_line(steps, 14.04)
    assert line.startswith("controller step p50 0.25 ms p99 2.43 ms (1 over 2 ms)")
    assert line.endswith("render p50 14.0 ms (not in the budget)")


def test_the_hud_times_each_step_and_shows_the_render_apart(app):
    app.paused = app.slow_motion = False
    before = app.step_times.steps
    for _ in range(6):
        app.tick(1 / 60)
    assert app.step_times.steps > before  # one per simulation step, render not in it
    render_ms = app.profiler.rolling()["render"]["p50_ms"]
    line = next(text for text, _ in app.hud_lines() if text.startswith("controller step"))
    assert f"render p50 {render_ms:.1f} ms" in line
    assert f"({app.step_times.over} over 2 ms)" in line


def test_f1_names_the_models_it_cycles(app):
    from canis.demo.keys import help_lines

    assert any(text.startswith("F1 model MANN-8 > MANN-8 fp32 > PFNN ") for text in
               help_lines(["MANN-8", "MANN-8 fp32", "PFNN"]))  # fmt: skip
    assert any("F1 model (only tiny)" in text for text, _ in app.hud_lines())
    assert app.hud_lines()[0][0].startswith("tiny on ")


# --- canis demo --headless --video ---------------------------------------------------------


def read_video_frames(path: Path) -> int:
    import imageio_ffmpeg

    return imageio_ffmpeg.count_frames_and_secs(str(path))[0]


def test_headless_video_has_a_frame_per_thirtieth_of_a_second(
    tiny_model, tmp_path, monkeypatch, capsys
):
    pytest.importorskip("imageio_ffmpeg")
    from canis.cli import main

    monkeypatch.chdir(tmp_path)  # where the PNGs' default folder, out/demo, would be

    script = tmp_path / "walk.json"
    script.write_text('[{"t": 0, "move": [0, 1], "speed": 1.1, "action": "move"}]')
    video = tmp_path / "new folder" / "short.mp4"
    status = tmp_path / "status.jsonl"  # headless ignored --status-file
    argv = ["demo", "--headless", "--script", str(script), "--model", str(tiny_model)]
    argv += ["--status-file", str(status)]
    try:
        code = main(argv + ["--seconds", "0.5", "--size", "320x200", "--video", str(video)])
    except Exception as error:  # no EGL/GL on this machine: nothing to render with
        pytest.skip(f"no off-screen OpenGL here: {error}")
    assert code == 0, capsys.readouterr().err
    assert f"wrote {video} (15 frames, 30 fps)" in capsys.readouterr().out
    assert read_video_frames(video) == 15
    assert sorted(p.name for p in video.parent.iterdir()) == ["short.mp4"]  # no temporary
    assert not (tmp_path / "out").exists()  # no PNGs unless --out asks for them
    lines = status.read_text().splitlines()
    assert len(lines) >= 15 and all(json.loads(line) for line in lines)


@pytest.mark.parametrize(
    "video, wanted",
    [
        ("clip.avi", "clip.avi: give a file name ending in .mp4, not '.avi'"),
        ("clip", "clip: give a file name ending in .mp4, not ''"),
        ("a_file/clip.mp4", "a_file/clip.mp4: a_file is a file, not a folder"),
        ("a_file/deeper/clip.mp4", "a_file/deeper/clip.mp4: a_file is a file, not a folder"),
        ("a_folder.mp4", "a_folder.mp4: is a folder"),
    ],
)
def test_headless_video_refuses_bad_paths_before_any_work(
    video, wanted, tiny_model, tmp_path, monkeypatch, capsys
):
    pytest.importorskip("imageio_ffmpeg")
    from canis.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "a_file").write_text("not a folder")
    (tmp_path / "a_folder.mp4").mkdir()
    script = tmp_path / "walk.json"
    script.write_text('[{"t": 0, "move": [0, 1], "speed": 1.1, "action": "move"}]')
    before = sorted(tmp_path.rglob("*"))
    argv = ["demo", "--headless", "--script", str(script), "--model", str(tiny_model)]
    assert main(argv + ["--seconds", "0.5", "--video", video]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"canis demo: error: --video {wanted}") and len(err.splitlines()) == 1
    assert sorted(tmp_path.rglob("*")) == before  # nothing written, no folder made


@pytest.mark.parametrize(
    "option, wanted",
    [
        (["--camera-yaw", "nan"], "--camera-yaw nan: must be a finite number of degrees"),
        (["--status-file", "missing/s.jsonl"], "the folder missing does not exist"),
    ],
)
def test_headless_view_and_status_are_checked_before_any_work(
    option, wanted, tiny_model, tmp_path, monkeypatch, capsys
):
    """A NaN camera yaw rendered empty frames; the status file was ignored headless."""
    from canis.cli import main

    monkeypatch.chdir(tmp_path)
    script = tmp_path / "walk.json"
    script.write_text('[{"t": 0, "move": [0, 1], "speed": 1.1, "action": "move"}]')
    before = sorted(tmp_path.rglob("*"))
    argv = ["demo", "--headless", "--script", str(script), "--model", str(tiny_model)]
    assert main([*argv, "--seconds", "0.5", *option]) == 2
    err = capsys.readouterr().err
    assert wanted in err and len(err.splitlines()) == 1
    assert sorted(tmp_path.rglob("*")) == before


def test_a_script_nested_too_deeply_is_one_line(tmp_path):
    from canis.tools.script import load_script

    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100000 + "]" * 100000)
    with pytest.raises(ValueError, match="deep.json: not a script: JSON nested too deeply"):
        load_script(deep)


def test_video_needs_headless(capsys):
    from canis.cli import main

    assert main(["demo", "--video", "x.mp4"]) == 2
    assert "--video needs --headless" in capsys.readouterr().err


def test_a_failed_video_leaves_no_file(tmp_path):
    """A render that fails half-way deletes its temporary file and leaves the path as it
    was (an older video there is kept)."""
    pytest.importorskip("imageio_ffmpeg")
    from canis.demo.video import VideoWriter

    path = tmp_path / "clip.mp4"
    path.write_bytes(b"the older video")
    with pytest.raises(RuntimeError, match="half-way"):
        with VideoWriter(path, fps=30) as video:
            video.add(np.zeros((64, 96, 4), np.uint8))
            raise RuntimeError("half-way")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clip.mp4"]
    assert path.read_bytes() == b"the older video"
    with VideoWriter(path, fps=30) as video:
        for shade in range(3):
            video.add(np.full((64, 96, 3), 80 * shade, np.uint8))
    umask = os.umask(0)
    os.umask(umask)
    assert read_video_frames(path) == 3 and path.stat().st_mode & 0o777 == 0o666 & ~umask


def test_the_tour_script_walks_canters_turns_and_sits_in_10_seconds():
    """assets/scripts/tour.json, the video the README and the no-display message offer
    (looked at frame by frame when made: each part in view of the default camera)."""
    from canis.runtime.assets import asset_path
    from canis.tools.run import load_script

    events = load_script(asset_path("scripts/tour.json"))
    speeds = [e["speed"] for e in events if "speed" in e]
    assert min(s for s in speeds if s > 0) <= 0.7 and max(speeds) >= 3.0  # walk, canter
    assert any(e.get("turn") for e in events)
    assert events[-1]["transition"]["to"] == "sit" and events[-1]["t"] <= 8.5


def test_a_rig_is_drawn_and_c_cycles_to_the_built_in_dog(tiny_model, tmp_path):
    from canis.demo.app import DemoApp
    from canis.tools.rig_make import make_rig

    rig = make_rig("corgi", tmp_path / "corgi.glb", 0.012)
    try:
        app = DemoApp(
            {"tiny": tiny_model}, terrain="hills", headless=True, width=320, height=200, rigs=[rig]
        )
    except Exception as error:  # no EGL/GL on this machine: nothing to render with
        pytest.skip(f"no off-screen OpenGL here: {error}")
    try:
        press(app, app.key.W)
        for _ in range(60):
            app.step()
        press(app, app.key.W, release=True)
        app.window.switch_to()
        app.on_draw()
        positions, _ = app.shown.display_pose()
        assert positions.shape[1] == app.rig_choice.rig.skeleton.joint_count  # the rig's joints
        assert app.scene.body.mesh is app.rig_choice.rig.mesh
        # The rig is on the demo's terrain; its network walks on flat ground.
        assert app.controller.terrain is None and app.shown.terrain is app.heightmap
        assert "corgi" in app.hud_lines()[1][0]
        press(app, app.key.C)
        assert app.rig_choice.rig is None and app.shown is app.controller
        assert app.controller.terrain is app.heightmap
        app.on_draw()  # the built-in dog's body again
        assert app.scene.body.mesh is not app.rig_choice.rigs[0].mesh
    finally:
        app.close()

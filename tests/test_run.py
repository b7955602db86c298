"""The headless runner: script and path files, the skating measure, and short runs."""

import json
from pathlib import Path

import numpy as np
import pytest
from canis.runtime.assets import shipped_models_dir
from canis.runtime.control import closest_on_path, follow_path, load_path
from canis.runtime.motion_metrics import foot_skating_cm
from canis.tools.run import load_script, run

SHIPPED_MODELS = shipped_models_dir()

PATHS = Path(__file__).resolve().parent.parent / "assets" / "paths"


def write(tmp_path, name, data):
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize(
    "events, message",
    [
        ([{"t": 0, "action": "fly"}], "event 0 has unknown action 'fly'"),
        ([{"t": 0}, {"speed": 1.0}], "event 1 must be an object with a time 't'"),
        ([{"t": 0, "speed": float("nan")}], "event 0 'speed' must be a finite number"),
        ([{"t": 1}, {"t": 0.5}], "times must not go backwards"),
        ([{"t": 0, "jump": True}], "unknown fields \\['jump'\\]"),
        ([{"t": 0, "move": [1]}], "'move' must be \\[x, z\\]"),
        ([], "non-empty JSON list"),
        ([{"t": 0, "foot_lock": "yes"}], "event 0 'foot_lock' must be true or false"),
    ],
)
def test_bad_scripts_name_the_event_and_problem(tmp_path, events, message):
    path = write(tmp_path, "script.json", events)
    with pytest.raises(ValueError, match=f"script.json.*{message}"):
        load_script(path)


def test_a_script_not_in_utf8_names_the_file(tmp_path):
    path = tmp_path / "latin1.json"
    path.write_bytes('[{"t": 0, "action": "caf\u00e9"}]'.encode("latin-1"))
    with pytest.raises(ValueError, match="latin1.json: not a readable JSON script .*utf-8"):
        load_script(path)
    utf16 = tmp_path / "utf16.json"  # JSON may be UTF-16: read, then checked as usual
    utf16.write_bytes('[{"t": 0, "action": "sit"}]'.encode("utf-16"))
    assert load_script(utf16) == [{"t": 0, "action": "sit"}]


@pytest.mark.parametrize(
    "spec, message",
    [
        ({"speed": 1.0, "waypoints": [[0, 0]]}, "at least two different"),
        ({"speed": 1.0, "waypoints": [[1, 2], [1, 2]]}, "at least two different"),
        ({"waypoints": [[0, 0], [1, 1]]}, "missing \\['speed'\\]; a path is"),
        ({"speed": 1.0}, "missing \\['waypoints'\\]"),
        ({"speed": 1, "waypoints": [[0, 0], [0, 5]], "lopo": True}, "unknown keys \\['lopo'\\]"),
        ({"speed": 1, "waypoints": [[0, 0], [0, 5]], "loop": "yes"}, "'loop' must be true or"),
        ({"speed": -1, "waypoints": [[0, 0], [0, 5]]}, "'speed' must be positive"),
        ({"speed": 1, "waypoints": [[0, 0], [0, "a"]]}, "list of \\[x, z\\] numbers"),
        ([[0, 0], [0, 5]], "a path is a JSON object"),
    ],
)
def test_bad_paths_name_the_file_and_problem(tmp_path, spec, message):
    with pytest.raises(ValueError, match=f"p.json: .*{message}"):
        load_path(write(tmp_path, "p.json", spec))


def test_a_path_repeating_a_waypoint_is_followed_without_nan(tmp_path):
    """A looped path written back to its start, and a waypoint given twice in a row: the
    repeat is dropped (a zero-length segment has no direction), and control stays finite."""
    looped = load_path(
        write(tmp_path, "p.json", {"speed": 1, "waypoints": [[0, 0], [0, 5], [0, 0]], "loop": True})
    )
    assert looped["waypoints"].tolist() == [[0, 0], [0, 5], [0, 0]]
    twice = load_path(
        write(tmp_path, "q.json", {"speed": 1, "waypoints": [[0, 0], [0, 5], [0, 5], [5, 5]]})
    )
    assert twice["waypoints"].tolist() == [[0, 0], [0, 5], [5, 5]]
    for spec in (looped, twice):
        for xz in ([0.0, 0.0], [0.3, 4.9], [1.0, 5.0]):
            c = follow_path(spec["waypoints"], spec["speed"], np.array(xz), 0.0, spec["loop"])
            assert np.all(np.isfinite(c.velocity_mps)) and np.all(np.isfinite(c.future_xz_m))
    with pytest.raises(
        ValueError, match="path waypoints 1 and 2 are the same point \\[0.0, 5.0\\]"
    ):
        follow_path(np.array([[0, 0], [0, 5], [0, 5.0]]), 1.0, np.zeros(2), 0.0)


def test_foot_skating_follows_the_paper_formula():
    xz = np.zeros((3, 4, 2))
    xz[1:, :, 0] = [[0.01], [0.02]]  # each paw slides 1 cm per frame
    heights = np.array([[0.0, 0.0125, 0.03, 0.0]] * 3)
    skating = foot_skating_cm(xz, heights)
    # h = 0: full 1 cm; h = H/2: weight 2 - 2^0.5; h > H: not counted.
    assert np.allclose(skating[0], [1.0, 2 - 2**0.5, 0.0, 1.0])


def test_closest_point_on_a_path():
    square = np.array([[0, 0], [4, 0], [4, 4]], dtype=float)
    along, gap, tangent = closest_on_path(square, np.array([4.5, 2.0]))
    assert along == pytest.approx(6.0) and gap == pytest.approx(0.5)
    assert np.allclose(tangent, [0, 1])


def test_headless_script_run_on_hills(tiny_model, tmp_path):
    script = write(
        tmp_path,
        "s.json",
        [{"t": 0, "move": [0, 1], "speed": 1.0, "action": "move"}, {"t": 1, "turn": 0.5}],
    )
    summary = run(
        tiny_model,
        2.0,
        script=script,
        terrain="hills",
        trace=tmp_path / "t.json",
        record=tmp_path / "poses.npz",
    )
    assert summary["frames"] == 120 and summary["non_finite_frames"] == 0
    assert set(summary["frame_time"]["stages"]) >= {
        "input",
        "trajectory",
        "features",
        "inference",
        "decode",
        "ik",
        "frame",
    }
    # Headless, nothing is drawn: no empty "render" stage is timed in every frame.
    assert "render" not in summary["frame_time"]["stages"]
    assert summary["paw_penetration_cm"]["mean"] >= 0
    by_paw = summary["contact_share_by_paw"]  # DOG_LEG_GROUPS' four paws, their mean the share
    assert len(by_paw) == 4 and np.isclose(np.mean(by_paw), summary["contact_share"])
    recorded = np.load(tmp_path / "poses.npz")
    assert recorded["positions"].shape == (120, 27, 3)
    assert json.loads((tmp_path / "t.json").read_text())["traceEvents"]


def test_headless_path_run_reports_deviation(tiny_model, tmp_path):
    path = write(tmp_path, "p.json", {"speed": 1.0, "waypoints": [[0, 0], [0, 5], [5, 5]]})
    summary = run(tiny_model, 2.0, path=path)
    assert {"position_cm", "angle_deg"} <= set(summary["path_deviation"])


def test_the_shipped_dog_follows_the_circle_path_closely():
    """The paper's path test (Table 4): the desired trajectory is the path itself."""
    summary = run(SHIPPED_MODELS / "mann8.onnx", 14.0, path=PATHS / "circle.json")
    assert summary["non_finite_frames"] == 0
    assert summary["path_deviation"]["position_cm"] < 10.0
    assert summary["path_deviation"]["angle_deg"] < 10.0


def test_a_trace_in_a_missing_folder_fails_before_the_run(tmp_path, capsys, monkeypatch):
    from canis.tools import run as run_module

    from canis.cli import main

    script = write(tmp_path, "s.json", [{"t": 0, "move": [0, 1], "speed": 1.0}])
    monkeypatch.setattr(run_module, "MotionModel", None)  # the run must not even start
    for option in ("--trace", "--csv", "--json"):
        target = str(tmp_path / "missing" / "out")
        assert main(["run", "--script", str(script), option, target]) == 2
        err = capsys.readouterr().err
        assert "missing" in err and "does not exist" in err and len(err.splitlines()) == 1


def test_run_options_characters_threads_and_the_machine(tiny_model, tmp_path, capsys):
    from canis.cli import main

    script = write(tmp_path, "s.json", [{"t": 0, "move": [0, 1], "speed": 1.0}])
    args = ["run", "--model", str(tiny_model), "--script", str(script), "--seconds", "0.5"]
    args += ["--characters", "3", "--threads", "1", "--device", "cpu"]
    args += ["--json", str(tmp_path / "run.json"), "--csv", str(tmp_path / "frames.csv")]
    assert main(args) == 0
    summary = json.loads((tmp_path / "run.json").read_text())
    assert summary["characters"] == 3 and summary["threads"] == 1
    assert summary["device"] == "cpu" and summary["report"] == "canis run"
    machine = summary["machine"]
    assert machine["cpu"] and machine["python"] and machine["onnxruntime"]
    assert machine["threads"] == 1 and machine["provider"] == "CPUExecutionProvider"
    assert len(summary["frame_samples_ms"]["frame"]) == 30
    worst = summary["frame_time"]["worst_frames"]
    assert worst[0]["wall_ms"] == summary["frame_time"]["stages"]["frame"]["max_ms"]
    assert len((tmp_path / "frames.csv").read_text().splitlines()) == 31
    out = capsys.readouterr().out
    assert "3 dog(s)" in out
    # The slowest frame's split into time on the CPU and off it (descheduled or waiting).
    slowest = worst[0]
    on_cpu = f"slowest frame ({slowest['frame']}) {slowest['cpu_ms']:.2f} ms on CPU, "
    assert on_cpu + f"{max(slowest['wall_ms'] - slowest['cpu_ms'], 0):.2f} ms off it" in out
    assert main(args[:-4] + ["--characters", "0"]) == 2


def test_a_paced_run_starts_a_frame_every_sixtieth_of_a_second(tiny_model, tmp_path):
    """`--pace`: frames a game's frame period apart, not back to back (the transition
    worker's steps run in the wait); the frames' own times leave the wait out."""
    import time

    from canis.cli import main

    script = write(tmp_path, "s.json", [{"t": 0, "move": [0, 1], "speed": 1.0}])
    args = ["run", "--model", str(tiny_model), "--script", str(script), "--seconds", "0.5"]
    started = time.perf_counter()
    assert main([*args, "--pace", "--json", str(tmp_path / "run.json")]) == 0
    assert time.perf_counter() - started >= 30 / 60  # 30 ticks of 1/60 s at the least
    summary = json.loads((tmp_path / "run.json").read_text())
    assert summary["paced"] and len(summary["frame_samples_ms"]["frame"]) == 30
    # The wait is not a frame's: it would make every frame at least ~16 ms.
    assert float(np.median(summary["frame_samples_ms"]["frame"])) < 1000 / 60 / 2


def test_the_runs_figures_are_taken_frame_by_frame_as_the_whole_arrays_give_them():
    """`canis run` keeps no per-frame arrays (its memory stays flat over a long run): its
    tally gives the figures the whole run's arrays give."""
    from canis.runtime.terrain import procedural
    from canis.tools.run import MotionTally

    rng = np.random.default_rng(5)
    frames = 50
    paws = np.cumsum(rng.normal(scale=0.01, size=(frames, 4, 3)), axis=0) + [0, 0.01, 0]
    contacts = rng.random((frames, 4)) < 0.5
    speeds = rng.random(frames)
    hills = procedural("hills")
    tally = MotionTally(hills)
    for f in range(frames):
        tally.add(paws[f][None], paws[f], contacts[f], float(speeds[f]))
    got = tally.summary()
    height = paws[..., 1] - hills.sample(paws[..., [0, 2]])[0]
    skating = foot_skating_cm(paws[..., [0, 2]], height)
    depth, floating = np.maximum(-height, 0), np.maximum(height, 0)[contacts]
    assert got["mean_speed_mps"] == pytest.approx(speeds.mean())
    assert got["foot_skating_cm_per_frame"]["all_legs"] == pytest.approx(skating.mean())
    assert got["foot_skating_cm_per_frame"]["back_legs"] == pytest.approx(skating[:, 2:].mean())
    assert got["paw_penetration_cm"]["mean"] == pytest.approx(depth.mean() * 100)
    assert got["paw_penetration_cm"]["max"] == pytest.approx(depth.max() * 100)
    assert got["paw_floating_in_contact_cm"]["mean"] == pytest.approx(floating.mean() * 100)
    assert got["contact_share_by_paw"] == pytest.approx(list(contacts.mean(axis=0)))
    assert got["non_finite_frames"] == 0


def test_a_model_with_non_finite_weights_is_a_failed_run_that_says_so(tiny_model, tmp_path, capsys):
    """A model whose weights are NaN: the dogs hold their last finite pose, and `canis run`
    said "non-finite frames 0" and exited 0. It now counts the network's non-finite outputs
    and exits 1, naming them."""
    import onnx
    from onnx import numpy_helper

    from canis.cli import main

    graph = onnx.load(str(tiny_model))
    for tensor in graph.graph.initializer:
        if "motion" in tensor.name and "weight" in tensor.name:
            values = numpy_helper.to_array(tensor)
            tensor.CopyFrom(numpy_helper.from_array(np.full_like(values, np.nan), tensor.name))
    broken = tmp_path / "nan.onnx"
    onnx.save(graph, str(broken))
    script = write(tmp_path, "s.json", [{"t": 0, "move": [0, 1], "speed": 1.0}])
    out = tmp_path / "run.json"
    args = ["run", "--model", str(broken), "--script", str(script), "--seconds", "0.5"]
    assert main([*args, "--json", str(out)]) == 1
    captured = capsys.readouterr()
    assert "non-finite network outputs 30" in captured.out
    assert captured.err.count("\n") == 1 and "non-finite outputs on 30 dog-frames" in captured.err
    assert json.loads(out.read_text())["non_finite_model_outputs"] == 30


@pytest.mark.parametrize("seconds", ["1e12", "inf", "0.001"])
def test_a_run_longer_than_a_week_or_shorter_than_a_frame_is_refused(seconds, tmp_path, capsys):
    from canis.cli import main

    script = write(tmp_path, "s.json", [{"t": 0, "move": [0, 1], "speed": 1.0}])
    assert main(["run", "--script", str(script), "--seconds", seconds]) == 2
    err = capsys.readouterr().err
    assert f"--seconds {float(seconds):g}: must be at least one frame" in err
    assert len(err.splitlines()) == 1


def test_a_waypoint_past_any_world_is_refused_at_load(tmp_path):
    """1e308 waypoints loaded and failed at the first step."""
    path = write(tmp_path, "p.json", {"speed": 1.0, "waypoints": [[0, 0], [1e308, 0]]})
    with pytest.raises(
        ValueError, match=r"p.json: waypoint 1 \[1e\+308, 0\] is more than 1e\+06 m"
    ):
        load_path(path)


def test_a_scripts_variation_past_the_trained_level_is_refused_at_load(tmp_path):
    """ "variation": 1e300 ran, and the run exited 0 reporting 110 non-finite frames."""
    script = write(
        tmp_path,
        "s.json",
        [{"t": 0, "transition": {"to": "sit", "frames": 30, "variation": 1e300}}],
    )
    with pytest.raises(
        ValueError, match=r"transition 'variation' must be a finite number within \[0, 1\]"
    ):
        load_script(script)


def test_a_run_of_more_dogs_than_memory_holds_is_one_line(tmp_path, capsys):
    """`canis run --characters 100000000` was numpy's allocation error."""
    from canis.cli import main

    script = write(tmp_path, "s.json", [{"t": 0, "move": [0, 1], "speed": 1.0}])
    assert main(["run", "--script", str(script), "--characters", "100000000"]) == 2
    err = capsys.readouterr().err
    assert "count 100000000 is past MAX_DOGS (100000)" in err and len(err.splitlines()) == 1

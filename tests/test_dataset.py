"""The dataset build on synthetic clips: pairs, splits, statistics, bad clips, the file."""

import json
import logging
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest
from canis.runtime.features import (
    ACTIONS,
    INPUT,
    TRAJECTORY_OFFSETS_FRAMES,
    Pose,
    Trajectory,
    build_input,
    gating_indices,
)
from canis.runtime.readouts import GAITS
from canis.runtime.rotations import quat_angle_rad
from canis.training import dataset
from canis.training import report as dataset_report
from canis.training.bvh import read_bvh, resample, write_bvh
from canis.training.clips import MIN_CLIP_FRAMES, clip_pairs, process_clip
from conftest import write_tiny_bvh
from synthetic_dog import gait, hold, standard_clips, to_motion, transition, write_clip

from canis.cli import main


@pytest.fixture(scope="module")
def clip_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("clips")
    paths = standard_clips(folder)
    write_clip(folder, "too_short", *hold("stand", (MIN_CLIP_FRAMES - 1) / 60))
    write_tiny_bvh(folder, name="cat.bvh")  # a valid BVH of another skeleton
    broken = write_clip(folder, "has_nan", *hold("stand", 3.0))
    lines = broken.read_text().split("\n")
    lines[-5] = " ".join(["nan"] + lines[-5].split()[1:])
    broken.write_text("\n".join(lines))
    return folder, paths


@pytest.fixture(scope="module")
def built(clip_folder):
    return dataset.build(clip_folder[0], seed=0, progress=False)


def test_dataset_path_and_runtime_path_give_the_same_x(clip_folder):
    clip = process_clip(read_bvh(clip_folder[1]["walk"]))
    x_dataset, _, frames = clip_pairs(clip)
    row = 41
    frame = frames[row]
    # The runtime holds one character's state in float32 and builds x from it.
    samples = frame + np.array(TRAJECTORY_OFFSETS_FRAMES)
    f32 = lambda a: a.astype(np.float32)[None]  # noqa: E731
    trajectory = Trajectory(
        f32(clip.root_positions_m[samples]),
        f32(clip.facing[samples]),
        f32(clip.root_velocities_mps[samples]),
        f32(clip.desired_speeds_mps[samples]),
        f32(clip.labels.actions[samples]),
    )
    pose = Pose(
        f32(clip.positions_m[frame]), f32(clip.rotations[frame]), f32(clip.velocities_mps[frame])
    )
    x_runtime = build_input(
        f32(clip.root_positions_m[frame]), f32(clip.root_rotations[frame]), trajectory, pose
    )
    assert np.abs(x_runtime[0] - x_dataset[row]).max() < 1e-5
    # The walk moves forward at 0.6 m/s: the current sample's speed and velocity say so.
    assert INPUT.field(x_runtime, "trajectory", "speed")[0, 5, 0] == pytest.approx(0.6, abs=0.02)
    assert np.allclose(INPUT.field(x_runtime, "trajectory", "velocity")[0, 5], [0, 0.6], atol=0.02)
    assert np.all(np.isfinite(x_runtime[0, gating_indices()]))


def test_bad_clips_are_skipped_with_a_warning_naming_them(clip_folder, caplog):
    with caplog.at_level(logging.WARNING, logger="canis.dataset"):
        result = dataset.build(clip_folder[0], progress=False)
    skipped = {s["clip"]: s["reason"] for s in result.metadata["skipped"]}
    assert set(skipped) == {"too_short", "has_nan", "cat"}
    assert "not the dog's skeleton (3 joints" in skipped["cat"]
    assert "shorter than the" in skipped["too_short"]
    assert "non-finite" in skipped["has_nan"] and "has_nan.bvh" in skipped["has_nan"]
    assert "too_short.bvh" in caplog.text and "has_nan.bvh" in caplog.text


def test_pairs_splits_and_mirrors(built):
    arrays = built.arrays
    names = arrays["clip_names"].tolist()
    assert sorted(names) == sorted(
        ["sit", "sit_mirror", "stand", "stand_mirror", "trot", "trot_mirror", "walk", "walk_mirror"]
    )
    assert arrays["X"].shape == (len(arrays["Y"]), 480) and arrays["Y"].shape[1] == 363
    assert arrays["X"].dtype == np.float32
    # Every clip contributes F - 50 - 61 pairs, twice (as captured and mirrored).
    frames = {"stand": 180, "walk": 240, "trot": 180, "sit": 300}
    assert len(arrays["X"]) == 2 * sum(n - 50 - 61 for n in frames.values())
    assert arrays["mirrored"].sum() * 2 == len(arrays["X"])
    # One whole clip (10% of 6 files, rounded up) is held out, with its mirror.
    held_out = set(arrays["clip_names"][np.unique(arrays["clip"][arrays["validation"]])])
    assert len(held_out) == 2 and {n.removesuffix("_mirror") for n in held_out} == set(
        built.metadata["validation_clips"]
    )
    assert dataset.validation_clips(["a", "b", "c"], seed=3) == dataset.validation_clips(
        ["c", "b", "a"], seed=3
    )


def test_normalisation_and_oversampling(built):
    arrays = built.arrays
    training = ~arrays["validation"]
    assert np.allclose(arrays["x_mean"], arrays["X"][training].mean(0), atol=1e-4)
    # The current trajectory sample is the root itself: constant, so left unscaled.
    current_position = INPUT.indices("trajectory", "position", rows=5)
    assert np.all(arrays["x_std"][current_position] == 1.0)
    trot = arrays["gait"] == GAITS.index("trot")
    assert trot.any() and np.all(arrays["sample_weight"][trot] == 11.0)
    assert np.all(arrays["sample_weight"][arrays["gait"] == GAITS.index("walk")] == 1.0)
    balance = dataset.class_balance(arrays)
    assert balance["after"]["gaits"]["trot"] > balance["before"]["gaits"]["trot"]
    assert sum(balance["before"]["actions"].values()) == pytest.approx(1.0)


def test_file_round_trip_and_refusals(built, tmp_path, monkeypatch):
    path = tmp_path / "d.npz"
    dataset.save(built, path)
    loaded = dataset.load(path)
    assert np.array_equal(loaded["X"], built.arrays["X"])
    assert loaded.metadata["layout_hash"] == built.metadata["layout_hash"]
    truncated = tmp_path / "truncated.npz"
    truncated.write_bytes(path.read_bytes()[:1000])
    with pytest.raises(ValueError, match="truncated.npz: not a readable canis dataset"):
        dataset.load(truncated)
    monkeypatch.setattr(dataset, "layout_hash", lambda: "0123456789abcdef")
    with pytest.raises(ValueError, match="built for feature layout .* rebuild it"):
        dataset.load(path)


def test_cli_build_writes_the_file_and_report(clip_folder, tmp_path, capsys):
    out, report = tmp_path / "data.npz", tmp_path / "report"
    code = main(
        [
            "dataset",
            "build",
            "--bvh",
            str(clip_folder[0]),
            "--out",
            str(out),
            "--report",
            str(report),
            "--timeline-clip",
            "walk",
        ]
    )
    assert code == 0 and out.exists()
    printed = capsys.readouterr().out
    assert "skipped too_short" in printed and "skipped has_nan" in printed
    text = (report / "dataset.md").read_text()
    assert "| sit |" in text and "| walk |" in text and "too_short" in text
    for png in ("gait_vs_speed.png", "labels/walk.png", "labels/sit.png"):
        assert (report / png).stat().st_size > 10_000
    summary = json.loads((report / "summary.json").read_text())
    assert summary["metadata"]["layout_hash"] == dataset.layout_hash()


def test_resampling_a_30_fps_capture_gives_back_the_60_fps_motion():
    roots_m, rotations = transition("stand", "sit", 1.0)  # smooth, as captured motion is
    roots_m[:, 2] = 0.6 * np.arange(len(roots_m)) / 60
    captured = to_motion(roots_m, rotations, "sitting_down")
    half = replace(
        captured,
        frame_time_s=1 / 30,
        root_positions_cm=captured.root_positions_cm[::2],
        local_rotations=captured.local_rotations[::2],
    )
    back = resample(half, 60)
    assert back.frame_time_s == pytest.approx(1 / 60)
    assert back.frame_count == 2 * half.frame_count - 1
    n = back.frame_count
    assert np.allclose(back.root_positions_cm[::2], captured.root_positions_cm[:n:2])
    assert np.abs(back.root_positions_cm - captured.root_positions_cm[:n]).max() < 0.1
    assert np.allclose(back.local_rotations[::2], captured.local_rotations[:n:2])
    # The frames in between come from slerp: within a couple of degrees of the capture.
    between = quat_angle_rad(back.local_rotations[1::2], captured.local_rotations[1:n:2])
    assert np.degrees(between.max()) < 0.5


def test_dataset_build_resamples_other_frame_rates_and_names_what_it_cannot(tmp_path, caplog):
    """A 30 fps clip was featurised as if it were 60 fps: half the speed, twice the time."""
    roots_m, rotations = gait("walk", 0.6, 4.0)[:2]
    standard_clips(tmp_path)  # enough clips for a validation split beside the new ones
    for name, step, frame_time_s in (("walk30", 2, 1 / 30), ("slideshow", 60, 1.0)):
        motion = to_motion(roots_m[::step], rotations[::step], name)
        write_bvh(tmp_path / f"{name}.bvh", replace(motion, frame_time_s=frame_time_s))
    with caplog.at_level(logging.WARNING, logger="canis.dataset"):
        result = dataset.build(tmp_path, progress=False)
    assert result.metadata["resampled"] == [{"clip": "walk30", "from_fps": 30.0}]
    assert "walk30.bvh: resampled from 30 to 60 fps" in caplog.text
    skipped = {s["clip"]: s["reason"] for s in result.metadata["skipped"]}
    assert "recorded at 1 fps" in skipped["slideshow"]
    walk30 = list(result.arrays["clip_names"]).index("walk30")
    rows = (result.arrays["clip"] == walk30) & (result.arrays["gait"] != -1)
    assert np.median(result.arrays["speed"][rows]) == pytest.approx(0.6, abs=0.03)
    with pytest.raises(ValueError, match="slideshow.bvh: recorded at 1 fps, but the features"):
        process_clip(read_bvh(tmp_path / "slideshow.bvh"))


def test_rebuilding_the_report_rewrites_the_same_files(clip_folder, tmp_path):
    """`canis dataset build --report docs/dataset` rewrote tracked files with other content:
    the build's date and duration, and a timeline clip that was simply the first clip."""
    first = dataset.build(clip_folder[0], progress=False, keep_clips=True)
    again = dataset.build(clip_folder[0], progress=False, keep_clips=True)
    again.metadata |= {"built": "2030-01-01T00:00:00+00:00", "build_seconds": 99.9}
    dataset_report.write_report(first, tmp_path / "a")
    dataset_report.write_report(again, tmp_path / "b")
    files = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*.*"))
    assert len(files) > 3
    for name in files:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name


def test_the_default_timeline_clip_shows_the_most_labels():
    def clip(name, actions, gaits):
        labels = SimpleNamespace(action_index=np.array(actions), gait_index=np.array(gaits))
        return SimpleNamespace(name=name, labels=labels, frame_count=len(actions))

    walk = ACTIONS.index("move")
    clips = [
        clip("a_walk", [walk] * 10, [0] * 10),  # one action, one gait
        clip("c_mixed", [walk] * 5 + [ACTIONS.index("sit")] * 5, [0] * 5 + [1] * 5),
        clip("b_mixed", [walk] * 5 + [ACTIONS.index("sit")] * 5, [0] * 5 + [2] * 5),
    ]
    assert dataset_report.default_timeline_clip(clips) == "b_mixed"  # most shown, first by name
    assert dataset_report.default_timeline_clip([]) is None


def test_the_held_out_clips_cover_every_gait_and_action_two_clips_show():
    """The held-out clips had no trot and no jump (issue 65): the rule now holds out a clip for
    each gait and action that two clips or more show, so training keeps one, then fills up in
    the seeded order."""
    shown = {
        "a": {"gait walk"},
        "b": {"gait walk", "gait trot"},
        "c": {"gait trot", "action jump"},
        "d": {"action jump"},
        "e": {"action lie"},  # the only lie: training keeps it
        "f": set(),
    }
    held = dataset.validation_clips(list(shown), seed=1, shown=shown)
    covered = dataset.validation_coverage(held, shown)
    assert {"gait walk", "gait trot", "action jump"} <= set(covered)
    assert "e" not in held and "action lie" not in covered
    assert held == dataset.validation_clips(list(reversed(shown)), seed=1, shown=shown)
    # without labels, the seeded 10%: one clip of six
    assert len(dataset.validation_clips(list(shown), seed=1)) == 1

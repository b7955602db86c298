"""The controller's motion on other dogs (runtime/retarget.py): the shepherd rig draws the
built-in dog's pose, other proportions reach the asked speed with scaled strides, one
controller drives several breeds, and a glTF from `canis run --export` is driven as a rig."""

from __future__ import annotations

import numpy as np
import pytest
from canis.runtime import Controller, ControlState, MotionModel, shipped_model_path
from canis.runtime.controller import DT_S
from canis.runtime.retarget import RigDogs
from canis.runtime.rig import Rig
from canis.runtime.terrain import load_terrain
from canis.tools.rig_make import BREEDS, RIG_NAMES, make_rig
from canis.tools.run import run

COARSE_MESH_STEP_M = 0.012


@pytest.fixture(scope="module")
def rigs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("rigs")
    return {b: Rig.load(make_rig(b, folder / f"{b}.glb", COARSE_MESH_STEP_M)) for b in BREEDS}


@pytest.fixture(scope="module")
def model():
    return MotionModel(shipped_model_path())


def _walk(count, speed_mps=1.0, yaw_rate=0.0, frame=0):
    yaw = np.full(count, yaw_rate * frame * DT_S)
    velocity = speed_mps * np.stack([np.sin(yaw), np.cos(yaw)], axis=1)
    return ControlState(velocity, yaw, np.full(count, 1))


def test_the_shepherd_rig_draws_the_built_in_dogs_pose(rigs, model, dog):
    hills = load_terrain("hills")
    controller = Controller(model, count=2, terrain=hills, foot_lock=True)
    shepherd = RigDogs(controller, rigs["shepherd"], terrain=hills, foot_lock=True)
    assert shepherd.stride_scale == pytest.approx(1.0, abs=1e-6)
    order = [rigs["shepherd"].skeleton.index(RIG_NAMES[n]) for n in dog.joint_names]
    worst_m = 0.0
    for frame in range(240):
        controller.step(shepherd.control(_walk(2, 1.4, 0.4, frame)))
        shepherd.update()
        built_in, _ = controller.display_pose()
        drawn, _ = shepherd.display_pose()
        worst_m = max(worst_m, float(np.abs(drawn[:, order] - built_in).max()))
    assert worst_m < 1e-4


def test_a_corgi_reaches_the_asked_speed_with_short_quick_steps(rigs, model):
    controller = Controller(model, count=1)
    corgi = RigDogs(controller, rigs["corgi"], foot_lock=True)
    asked = _walk(1, 1.0)
    # The network is asked for the speed in its own units: a stride scale shorter legs.
    assert corgi.control(asked).velocity_mps[0, 1] == pytest.approx(1.0 / 0.55, rel=1e-6)
    roots, network_roots = [], []
    for _ in range(300):
        controller.step(corgi.control(asked))
        corgi.update()
        roots.append(corgi.root_xz_m[0].copy())
        network_roots.append(controller.root_xz_m[0].copy())
    roots, network_roots = np.array(roots), np.array(network_roots)
    # The rig's root moves the network's distance times the stride scale, exactly.
    assert np.allclose(roots, network_roots * corgi.stride_scale, atol=1e-12)
    speed_mps = np.linalg.norm(roots[-1] - roots[-120]) / (119 * DT_S)
    assert speed_mps == pytest.approx(1.0, rel=0.1)
    # Its paws stand on the ground in its own world, not the mocap dog's height.
    positions, _ = corgi.display_pose()
    paws = positions[0, rigs["corgi"].skeleton.group("paws"), 1]
    assert paws.min() > -0.01 and paws.min() < 0.03


def test_one_controller_drives_dogs_of_different_breeds(rigs, model):
    controller = Controller(model, count=3)
    corgi = RigDogs(controller, rigs["corgi"], dogs=[0])
    greyhound = RigDogs(controller, rigs["greyhound"], dogs=[2])
    asked = _walk(3, 1.2)
    network = greyhound.control(corgi.control(asked))
    assert network.velocity_mps[:, 1] == pytest.approx([1.2 / 0.55, 1.2, 1.2 / 1.3], rel=1e-6)
    for _ in range(90):
        controller.step(network)
        corgi.update()
        greyhound.update()
    joints = rigs["corgi"].skeleton.joint_count
    assert corgi.display_pose()[0].shape == (1, joints, 3)
    assert greyhound.display_pose()[0].shape == (1, rigs["greyhound"].skeleton.joint_count, 3)
    for dogs, rig in ((corgi, rigs["corgi"]), (greyhound, rigs["greyhound"])):
        positions, _ = dogs.display_pose()
        parents = rig.skeleton.parents
        lengths = np.linalg.norm(positions[0, 1:] - positions[0, parents[1:]], axis=-1)
        # Bone lengths are the rig's own, exactly (float32 positions).
        assert np.allclose(lengths, rig.skeleton.bone_lengths_m()[1:], atol=2e-6)
    controller.add(1)
    with pytest.raises(ValueError, match="make the RigDogs again after add or remove"):
        corgi.update()


def test_a_run_exported_as_gltf_loads_as_a_rig_and_is_driven(tmp_path, tiny_model, dog, model):
    script = tmp_path / "walk.json"
    script.write_text('[{"t": 0, "move": [0, 1], "speed": 1.0, "action": "move"}]')
    exported = tmp_path / "run.glb"
    run(tiny_model, 0.5, script=script, export=exported)
    rig = Rig.load(exported)
    assert {d: rig.joint_names[j] for d, j in rig.mapping.items()} == {
        n: n for n in dog.joint_names
    }  # mapped by the dog's own names
    lengths = rig.skeleton.bone_lengths_m()
    for j, name in enumerate(dog.joint_names[1:], start=1):
        assert abs(lengths[rig.skeleton.index(name)] - dog.bone_lengths_m()[j]) < 1e-6
    controller = Controller(model)
    driven = RigDogs(controller, rig)
    start = driven.display_pose()[0].copy()
    for _ in range(60):
        controller.step(driven.control(_walk(1, 1.0)))
        driven.update()
    positions, rotations = driven.display_pose()
    assert np.isfinite(positions).all() and np.isfinite(rotations).all()
    assert positions[0, 0, 2] - start[0, 0, 2] > 0.3  # it walked forward


def test_canis_run_reports_on_the_rigs_own_paws(rigs, tmp_path, tiny_model):
    script = tmp_path / "walk.json"
    script.write_text('[{"t": 0, "move": [0, 1], "speed": 0.8, "action": "move"}]')
    rig_file = tmp_path / "corgi.glb"
    make_rig("corgi", rig_file, COARSE_MESH_STEP_M)
    summary = run(tiny_model, 5.0, script=script, terrain="hills", rig=rig_file, foot_lock=True)
    assert summary["rig"]["stride_scale"] == pytest.approx(0.55, rel=1e-6)
    assert summary["paw_penetration_cm"]["max"] <= 1.0
    assert summary["steady_speed"]["parts"][0]["asked_mps"] == pytest.approx(0.8)
    with pytest.raises(ValueError, match="--rig drives a --script"):
        run(tiny_model, 1.0, path=tmp_path / "p.json", rig=rig_file)


def test_a_rig_run_exports_on_the_rigs_skeleton(rigs, tmp_path, tiny_model):
    from canis.training.bvh import read_bvh

    script = tmp_path / "walk.json"
    script.write_text('[{"t": 0, "move": [0, 1], "speed": 0.8, "action": "move"}]')
    rig_file = make_rig("greyhound", tmp_path / "greyhound.glb", COARSE_MESH_STEP_M)
    rig = Rig.load(rig_file)
    for suffix in ("glb", "bvh"):
        run(tiny_model, 1.0, script=script, rig=rig_file, export=tmp_path / f"run.{suffix}")
    back = Rig.load(tmp_path / "run.glb")  # the export is a rig too
    assert back.joint_names == rig.joint_names
    assert np.allclose(back.skeleton.bone_lengths_m(), rig.skeleton.bone_lengths_m(), atol=1e-6)
    motion = read_bvh(tmp_path / "run.bvh")
    # The rig's joints in its order (depth first, as BVH lists them); BVH names no end site:
    # the reader calls each one after its parent.
    ends = set(range(len(rig.joint_names))) - set(rig.skeleton.parents[1:].tolist())
    named = [j for j in range(len(rig.joint_names)) if j not in ends]
    assert [motion.joint_names[j] for j in named] == [rig.joint_names[j] for j in named]
    assert len(motion.joint_names) == len(rig.joint_names) and len(motion.local_rotations) == 60
    lengths_m = np.linalg.norm(motion.offsets_cm, axis=1)[1:] / 100
    assert np.allclose(lengths_m, rig.skeleton.bone_lengths_m()[1:], atol=1e-6)


def test_canis_rig_make_and_info_on_the_command_line(tmp_path, capsys):
    from canis.cli import main

    assert main(["rig", "make", "--breed", "corgi", "--out", str(tmp_path / "no/c.glb")]) == 2
    err = capsys.readouterr().err
    assert "does not exist" in err and len(err.splitlines()) == 1
    assert main(["rig", "make", "--breed", "corgi", "--out", str(tmp_path / "c.gltf")]) == 2
    assert not list(tmp_path.iterdir())  # nothing half-written
    assert main(["rig", "info", str(tmp_path / "missing.glb")]) == 2
    assert "missing.glb: no such rig file" in capsys.readouterr().err

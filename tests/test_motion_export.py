"""`canis run --export`: a run's motion as glTF 2.0 (.glb) and BVH, read back by readers no
one here wrote (pygltflib, Panda3D's panda3d-gltf) and by the project's BVH reader."""

import numpy as np
import pytest
from canis.runtime.kinematics import forward_kinematics, local_rotations
from canis.runtime.rotations import quat_angle_rad
from canis.runtime.skeleton import Skeleton, shipped_dog_skeleton_path
from canis.tools.motion_export import check_export_path, export_motion
from canis.tools.run import run

SCRIPT = '[{"t": 0, "move": [0, 1], "speed": 1.5, "action": "move"}, {"t": 5, "turn": 0.8}]'


@pytest.fixture(scope="module")
def exported(tmp_path_factory, tiny_model):
    """A 10 s run exported both ways, with the displayed poses it exported."""
    folder = tmp_path_factory.mktemp("export")
    script = folder / "script.json"
    script.write_text(SCRIPT)
    record = folder / "poses.npz"
    for suffix in ("glb", "bvh"):
        run(tiny_model, 10.0, script=script, record=record, export=folder / f"run.{suffix}")
    with np.load(record) as poses:
        return folder, poses["positions"], poses["rotations"]


def test_glb_loads_in_pygltflib_with_one_skin_and_600_frames(exported):
    pygltflib = pytest.importorskip("pygltflib")
    folder, positions, rotations = exported
    gltf = pygltflib.GLTF2().load(str(folder / "run.glb"))
    assert len(gltf.skins) == 1 and len(gltf.animations) == 1
    assert len(gltf.skins[0].joints) == 27
    animation = gltf.animations[0]
    times = gltf.accessors[animation.samplers[0].input]
    assert times.count == 600
    assert times.max[0] == pytest.approx(599 / 60)

    # The animation's data is the run's: read the Head's rotation track back.
    def read(accessor_index, components):
        accessor = gltf.accessors[accessor_index]
        view = gltf.bufferViews[accessor.bufferView]
        data = gltf.binary_blob()[view.byteOffset : view.byteOffset + view.byteLength]
        return np.frombuffer(data, np.float32).reshape(accessor.count, components)

    skeleton = Skeleton.from_json(shipped_dog_skeleton_path())
    head = skeleton.index("Head")
    channel = next(
        c for c in animation.channels if c.target.node == head and c.target.path == "rotation"
    )
    xyzw = read(animation.samplers[channel.sampler].output, 4)
    expected = local_rotations(skeleton, rotations)[:, head]
    angle = quat_angle_rad(xyzw[:, [3, 0, 1, 2]].astype(np.float64), expected)
    assert angle.max() < 1e-3
    hips = next(c for c in animation.channels if c.target.path == "translation")
    assert np.allclose(read(animation.samplers[hips.sampler].output, 3), positions[:, 0], atol=1e-5)


def test_glb_loads_in_panda3d_as_an_animated_character(exported):
    pytest.importorskip("panda3d")
    gltf = pytest.importorskip("gltf")  # panda3d-gltf
    from panda3d.core import NodePath

    folder, _, _ = exported
    settings = gltf.GltfSettings(animation_fps=60)
    model = NodePath(gltf.load_model(str(folder / "run.glb"), gltf_settings=settings))
    characters = model.findAllMatches("**/+Character")
    assert characters.getNumPaths() == 1
    bundles = model.findAllMatches("**/+AnimBundleNode")
    assert bundles.getNumPaths() == 1
    bundle = bundles[0].node().getBundle()
    assert bundle.getBaseFrameRate() == 60
    assert bundle.getNumFrames() == 600
    joints = characters[0].node().getBundle(0)
    assert joints.findChild("LeftFootSite") is not None


def test_bvh_reads_back_through_the_project_reader(exported):
    from canis.training.bvh import read_bvh

    folder, positions, _ = exported
    motion = read_bvh(folder / "run.bvh")
    skeleton = Skeleton.from_json(shipped_dog_skeleton_path())
    assert motion.frame_count == 600 and motion.fps == pytest.approx(60.0, rel=1e-4)
    assert motion.joint_names == skeleton.joint_names
    replayed, _ = forward_kinematics(
        motion.skeleton(), motion.local_rotations, motion.root_positions_m()
    )
    assert np.abs(replayed - positions).max() < 1e-3  # metres


def test_bad_export_paths_fail_before_the_run(tmp_path, tiny_model):
    script = tmp_path / "script.json"
    script.write_text(SCRIPT)
    with pytest.raises(ValueError, match="unknown file type '.fbx'"):
        run(tmp_path / "no-model.onnx", 1.0, script=script, export=tmp_path / "out.fbx")
    with pytest.raises(ValueError, match="folder .*missing does not exist"):
        run(tmp_path / "no-model.onnx", 1.0, script=script, export=tmp_path / "missing/out.glb")
    assert check_export_path(tmp_path / "out.BVH").name == "out.BVH"


def test_a_failed_export_leaves_nothing_behind(tmp_path, monkeypatch):
    import canis.training.bvh as bvh

    skeleton = Skeleton.from_json(shipped_dog_skeleton_path())
    positions, rotations = forward_kinematics(
        skeleton, np.tile([1.0, 0, 0, 0], (3, 27, 1)), np.zeros((3, 3))
    )

    def fails_half_way(path, motion):
        path.write_text("HIERARCHY\r\nROOT Hips\r\n")
        raise OSError("disk full")

    monkeypatch.setattr(bvh, "write_bvh", fails_half_way)
    with pytest.raises(OSError, match="disk full"):
        export_motion(tmp_path / "out.bvh", skeleton, positions, rotations, 60.0)
    assert list(tmp_path.iterdir()) == []

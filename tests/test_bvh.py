import numpy as np
import pytest
from canis.runtime.kinematics import forward_kinematics
from canis.runtime.rotations import quat_angle_rad, quat_normalize
from canis.runtime.skeleton import DOG_JOINT_NAMES, Skeleton, shipped_dog_skeleton_path
from canis.training.bvh import BvhError, read_bvh, write_bvh
from conftest import TINY_BVH, random_quaternions, write_tiny_bvh


def test_tiny_file_values_by_hand(tmp_path):
    motion = read_bvh(write_tiny_bvh(tmp_path))
    assert motion.joint_names == ("Hips", "Spine", "SpineSite")
    assert motion.parents.tolist() == [-1, 0, 1]
    assert motion.rotation_orders == ("ZXY", "ZXY", "")
    assert motion.frame_count == 2 and motion.fps == pytest.approx(60.0, rel=1e-4)
    assert np.allclose(motion.root_positions_cm, [[1, 2, 3], [1, 2, 3]])  # root OFFSET ignored
    positions, _ = forward_kinematics(
        motion.skeleton(), motion.local_rotations, motion.root_positions_m()
    )
    # Frame 1 turns the root 90° about z: the spine (+x) points up (+y). Metres.
    assert np.allclose(positions[0], [[0.01, 0.02, 0.03], [0.11, 0.02, 0.03], [0.31, 0.02, 0.03]])
    assert np.allclose(
        positions[1], [[0.01, 0.02, 0.03], [0.01, 0.12, 0.03], [0.01, 0.32, 0.03]], atol=1e-6
    )


def test_write_then_read_round_trip(tmp_path, dog, rng):
    original = read_bvh(write_tiny_bvh(tmp_path))
    frames = 20
    motion = original.with_motion(
        rng.normal(scale=50.0, size=(frames, 3)),
        quat_normalize(random_quaternions(rng, (frames, 3)).astype(np.float64)),
    )
    path = tmp_path / "again.bvh"
    write_bvh(path, motion)
    assert b"\r\n" in path.read_bytes()
    again = read_bvh(path)
    assert again.joint_names == motion.joint_names
    assert np.allclose(again.root_positions_cm, motion.root_positions_cm, atol=1e-5)
    # End sites carry no rotation in a BVH, so compare the joints that do.
    angle = quat_angle_rad(again.local_rotations[:, :2], motion.local_rotations[:, :2])
    assert angle.max() < 1e-5


def lines_of(text: str) -> list[str]:
    return text.splitlines()


@pytest.mark.parametrize(
    "mutate, line, problem",
    [
        # A frame line missing a channel value.
        (lambda ls: ls[:-1] + ["1 2 3 90 0 0 0 0"], 20, "has 8 channel values, expected 9"),
        # The MOTION block cut after its first frame.
        (lambda ls: ls[:-1], 19, "declares 2 frames but the file ends after 1"),
        # The last line cut mid-way.
        (lambda ls: ls[:-1] + ["1 2 3 9"], 20, "truncated"),
        # An unknown channel name.
        (
            lambda ls: [
                x.replace("Xrotation Yrotation", "Xrotation Wrotation", 1) if "3 Z" in x else x
                for x in ls
            ],
            9,
            "unknown channel name 'Wrotation' on joint Spine",
        ),
        # A value that is not a number.
        (lambda ls: ls[:-1] + ["1 2 3 90 0 zero 0 0 0"], 20, "not a number: 'zero'"),
        (lambda ls: ls[:-1] + ["1 2 3 90 0 nan 0 0 0"], 20, "non-finite"),
        # The hierarchy cut off before MOTION.
        (lambda ls: ls[:12], 12, "no MOTION section"),
        # More frame lines than declared.
        (lambda ls: ls + ["1 2 3 0 0 0 0 0 0"], 21, "more lines follow"),
        (
            lambda ls: [x.replace("OFFSET 10 0 0", "OFFSET 10 0") for x in ls],
            9,
            "OFFSET z of Spine is not a number",
        ),
    ],
)
def test_malformed_files_name_file_line_and_problem(tmp_path, mutate, line, problem):
    path = write_tiny_bvh(tmp_path, "\n".join(mutate(lines_of(TINY_BVH))) + "\n", "broken.bvh")
    with pytest.raises(BvhError) as caught:
        read_bvh(path)
    assert caught.value.path == str(path)
    assert caught.value.line == line, str(caught.value)
    assert problem in str(caught.value)
    assert str(caught.value).startswith(f"{path}:{line}: ")


def test_binary_garbage_is_refused(tmp_path):
    path = tmp_path / "model.bvh"
    path.write_bytes(b"\x08\x01\x12\xff\xfe")
    with pytest.raises(BvhError, match="not a UTF-8 text BVH"):
        read_bvh(path)


def test_all_dog_clips_parse(mocap_dir, dog):
    files = sorted(mocap_dir.glob("*.bvh"))
    assert len(files) == 43
    frames = 0
    for path in files:
        motion = read_bvh(path)
        assert motion.joint_names == DOG_JOINT_NAMES
        assert motion.fps == pytest.approx(60.0, rel=1e-4)
        assert np.allclose(motion.skeleton().offsets_m[1:], dog.offsets_m[1:], atol=1e-6)
        frames += motion.frame_count
    assert frames == 94516


def test_dog_paws_touch_the_floor_when_walking(mocap_dir):
    """Checks the channel-order convention on real data: with the wrong Euler order the paws
    would float or sink by tens of centimetres."""
    motion = read_bvh(mocap_dir / "D1_007_KAN01_001.bvh")
    skeleton = motion.skeleton()
    positions, _ = forward_kinematics(skeleton, motion.local_rotations, motion.root_positions_m())
    paw_heights_cm = positions[:, skeleton.group("paws"), 1] * 100
    lowest = np.percentile(paw_heights_cm, 2, axis=0)
    assert np.all((lowest > -3.0) & (lowest < 4.0)), lowest
    assert np.all(np.percentile(paw_heights_cm, 90, axis=0) > 3.0)  # and they lift when stepping


def test_shipped_skeleton_matches_the_data(mocap_dir):
    shipped = Skeleton.from_json(shipped_dog_skeleton_path())
    from_data = read_bvh(mocap_dir / "D1_001_KAN01_001.bvh").skeleton()
    assert shipped.joint_names == from_data.joint_names
    assert np.allclose(shipped.offsets_m[1:], from_data.offsets_m[1:], atol=1e-6)


def test_joint_names_in_utf8_are_read():
    """A rig from another tool may name its joints in any script; they said "not a text BVH
    file"."""
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as folder:
        path = write_tiny_bvh(Path(folder), TINY_BVH.replace("Spine", "Rückgrat"), "utf8.bvh")
        assert read_bvh(path).joint_names[:2] == ("Hips", "Rückgrat")


@pytest.mark.parametrize(
    ("frame_line", "problem"),
    [
        ("1 2 3 90 1e30 0 0 0 0", "frame 1: Hips Xrotation is 1e+30 degrees, past 100000"),
        ("1e300 2 3 90 0 0 0 0 0", "frame 1: Hips Xposition is 1e+300 cm, past 1e+07"),
        ("1 2 3 90 0 0 0 -2e5 0", "frame 1: Spine Xrotation is -200000 degrees"),
    ],
)
def test_channel_values_past_any_motion_are_refused_naming_joint_and_channel(
    tmp_path, frame_line, problem
):
    """Root rotations of 1e30 degrees passed into datasets and keyframes (a lie pose 0.43 m
    under the ground) and a 1e300 root frame was dropped later without naming the clip."""
    text = TINY_BVH.replace("1 2 3 90 0 0 0 0 0", frame_line)
    path = write_tiny_bvh(tmp_path, text, "corrupt.bvh")
    with pytest.raises(BvhError) as caught:
        read_bvh(path)
    assert problem in str(caught.value) and str(caught.value).startswith(f"{path}:")

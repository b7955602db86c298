import numpy as np
import pytest
from canis.runtime.skeleton import DOG_GROUPS, DOG_JOINT_NAMES, Skeleton, is_dog


def test_shipped_dog_skeleton(dog):
    assert is_dog(dog) and dog.joint_count == 27
    assert all(dog.parents[j] < j for j in range(1, 27))
    for group, names in DOG_GROUPS.items():
        assert [dog.joint_names[j] for j in dog.group(group)] == list(names)
    # Each leg group is a parent chain, as the IK needs.
    for leg in ("front_left_leg", "front_right_leg", "back_left_leg", "back_right_leg"):
        chain = dog.group(leg)
        assert all(dog.parents[b] == a for a, b in zip(chain[:-1], chain[1:], strict=True))
    # Offsets in metres: the BVH places LeftForeArm 15.2 cm and LeftHand 17.8 cm down the leg.
    assert dog.bone_lengths_m()[dog.index("LeftForeArm")] == pytest.approx(0.152, abs=1e-6)
    assert dog.bone_lengths_m()[dog.index("LeftHand")] == pytest.approx(0.178, abs=1e-6)


def test_json_round_trip(dog, tmp_path):
    dog.to_json(tmp_path / "dog.json")
    again = Skeleton.from_json(tmp_path / "dog.json")
    assert again.joint_names == DOG_JOINT_NAMES
    assert np.allclose(again.offsets_m, dog.offsets_m)


@pytest.mark.parametrize(
    "names, parents, message",
    [
        (("A", "B"), [-1, 1], "parents first"),
        (("A", "A"), [-1, 0], "unique"),
        (("A", "LeftB"), [-1, 0], "no mirror joint named RightB"),
    ],
)
def test_bad_skeletons_are_refused(names, parents, message):
    with pytest.raises(ValueError, match=message):
        Skeleton(names, np.array(parents), np.zeros((len(names), 3)))


def test_bad_json_names_the_file(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('{"joint_names": ["Hips"]')
    with pytest.raises(ValueError, match="broken.json: not a valid skeleton file"):
        Skeleton.from_json(path)


def test_unknown_joint_and_group_names(dog):
    with pytest.raises(KeyError, match="no joint named 'Paw'"):
        dog.index("Paw")
    with pytest.raises(KeyError, match="unknown joint group"):
        dog.group("wings")

import numpy as np
import pytest
from canis.runtime.kinematics import forward_kinematics
from canis.runtime.poses import load_keyframes, save_keyframes


def test_shipped_keyframes_stand_on_the_ground(dog):
    keyframes = load_keyframes()
    assert set(keyframes) == {"stand", "sit", "lie", "beg"}
    for name, key in keyframes.items():
        positions, _ = forward_kinematics(
            dog, key.local_rotations[None], np.array([[0, key.hips_height_m, 0]])
        )
        lowest_paw = positions[0, dog.group("paws"), 1].min()
        assert -0.02 < lowest_paw < 0.05, f"{name}: lowest paw at {lowest_paw:.3f} m"
    stand = keyframes["stand"]
    positions, _ = forward_kinematics(dog, stand.local_rotations[None], np.zeros((1, 3)))
    head = positions[0, dog.index("Head")]
    assert head[2] > 0.3 and abs(head[0]) < 0.1  # faces +z


def test_keyframe_round_trip_and_bad_files(tmp_path):
    keyframes = load_keyframes()
    save_keyframes(list(keyframes.values()), tmp_path / "k.json")
    again = load_keyframes(tmp_path / "k.json")
    assert np.allclose(again["sit"].local_rotations, keyframes["sit"].local_rotations, atol=1e-6)
    broken = tmp_path / "broken.json"
    broken.write_text((tmp_path / "k.json").read_text().replace('"Tail1Site"', '"Wing"'))
    with pytest.raises(ValueError, match="broken.json: not a valid keyframe file: joint names"):
        load_keyframes(broken)

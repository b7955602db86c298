"""Labels on synthetic dogs whose true contacts and actions are known."""

import numpy as np
import pytest
from canis.runtime.features import ACTIONS, FPS
from canis.runtime.readouts import GAITS, NO_GAIT
from canis.runtime.root import wrap_angle_rad
from canis.training.clips import process_clip
from canis.training.labels import (
    NOMINAL_PHASE_HZ,
    SNIFF_MARGIN_FRAMES,
    SNIFF_WALK_MAX_MPS,
    detect_contacts,
    front_paw_phase,
    sniffing,
    sniffing_walk,
    soft_actions,
    stride_contacts,
)
from synthetic_dog import concatenate, gait, hold, to_motion, transition


def labels_of(roots, rotations):
    return process_clip(to_motion(roots, rotations, "synthetic")).labels


@pytest.mark.parametrize("kind, speed", [("walk", 0.6), ("trot", 1.6), ("pace", 1.6)])
def test_contacts_and_gait_of_a_synthetic_gait(kind, speed):
    roots, rotations, true_contacts = gait(kind, speed, 4.0)
    labels = labels_of(roots, rotations)
    agreement = (labels.contacts == true_contacts).mean(axis=0)
    assert np.all(agreement > 0.95), agreement
    assert np.all(labels.action_index == ACTIONS.index("move"))
    moving = labels.gait_index != NO_GAIT
    assert moving.mean() > 0.9
    assert np.all(labels.gait_index[moving] == GAITS.index(kind))


def test_standing_dog_is_idle_with_four_paws_down():
    labels = labels_of(*hold("stand", 3.0))
    assert np.all(labels.action_index == ACTIONS.index("idle"))
    assert labels.contacts.all()
    assert np.all(labels.gait_index == NO_GAIT)
    assert np.allclose(labels.ground_m, labels.ground_m[0]) and abs(labels.ground_m[0]) < 0.03


def test_dog_sitting_down_goes_from_idle_to_sit_with_a_soft_blend():
    labels = labels_of(
        *concatenate(hold("stand", 1.5), transition("stand", "sit", 1.0), hold("sit", 2.5))
    )
    idle, sit = ACTIONS.index("idle"), ACTIONS.index("sit")
    assert labels.action_index[0] == idle and labels.action_index[-1] == sit
    change = int(np.flatnonzero(labels.action_index == sit)[0])
    assert 90 < change < 150  # during the one-second transition
    assert np.all(np.diff(labels.action_index[labels.action_index != idle]) == 0)
    # Weights cross-fade around the change and always sum to one.
    assert np.allclose(labels.actions.sum(axis=1), 1.0)
    assert 0.3 < labels.actions[change, sit] < 0.7
    assert labels.actions[change - 10, sit] > 0 and labels.actions[change - 10, idle] > 0.5


def test_lying_and_begging_keyframes():
    assert np.all(labels_of(*hold("lie", 2.0)).action_index == ACTIONS.index("lie"))
    assert np.all(labels_of(*hold("beg", 2.0)).action_index == ACTIONS.index("stand"))


def test_ground_follows_a_raised_platform():
    roots, rotations = hold("stand", 3.0)
    raised = labels_of(roots + [0.0, 0.75, 0.0], rotations)
    flat = labels_of(roots, rotations)
    assert np.allclose(raised.ground_m - flat.ground_m, 0.75, atol=1e-6)
    assert raised.contacts.all() and np.all(raised.action_index == ACTIONS.index("idle"))


def test_mirrored_walk_swaps_left_and_right_contacts():
    roots, rotations, _ = gait("walk", 0.6, 4.0)
    clip = process_clip(to_motion(roots, rotations, "walk"))
    mirrored = process_clip(to_motion(roots, rotations, "walk"), mirrored=True)
    swapped = clip.labels.contacts[:, [1, 0, 3, 2]]  # LF<->RF, LH<->RH
    assert (mirrored.labels.contacts == swapped).mean() > 0.99
    assert np.array_equal(mirrored.labels.action_index, clip.labels.action_index)


def test_phase_is_zero_at_left_front_touchdowns_and_uniform_over_the_stride():
    contacts = np.zeros((200, 4), dtype=bool)
    for start in (10, 70, 130):
        contacts[start : start + 20, 0] = True
        contacts[start + 30 : start + 50, 1] = True
    phase = front_paw_phase(contacts)
    assert np.allclose(phase[[10, 70, 130]], 0.0, atol=1e-9)
    assert np.allclose(phase[[40, 100, 160]], np.pi, atol=1e-9)  # halfway through a stride
    assert phase[25] == pytest.approx(np.pi / 2)
    assert np.all((phase >= 0) & (phase < 2 * np.pi))


def test_canter_phase_does_not_jump_where_the_right_front_paw_lands():
    """In the canter the right front paw lands a quarter stride after the left: the phase is
    still one stride's uniform cycle (anchoring that touchdown at pi made it jump)."""
    contacts = np.zeros((200, 4), dtype=bool)
    for start in (10, 37, 64, 91, 118, 145):  # 27-frame strides (2.2 Hz)
        contacts[start : start + 8, 0] = True
        contacts[start + 1 : start + 9, 1] = True  # one frame later
    phase = front_paw_phase(contacts)
    step = wrap_angle_rad(np.diff(phase))
    assert np.allclose(step[10:145], 2 * np.pi / 27)
    assert phase[11] == pytest.approx(2 * np.pi / 27)


def test_phase_keeps_cycling_where_no_stride_exists():
    """Sitting: left-front touchdowns 10 s apart. The phase advances by whole cycles at about
    the nominal rate (it does not creep, so the runtime's phase cannot stall), and a touchdown
    a few frames after another (flicker) is no new stride."""
    contacts = np.zeros((1400, 4), dtype=bool)
    contacts[100:110, 0] = contacts[112:700, 0] = True  # a 2-frame lift: flicker
    contacts[1300:, 0] = True
    phase = front_paw_phase(contacts)
    step = wrap_angle_rad(np.diff(phase))
    assert np.all(step > 0)
    rate_hz = step[100:1300].mean() * FPS / (2 * np.pi)
    assert rate_hz == pytest.approx(NOMINAL_PHASE_HZ, rel=0.01)
    assert phase[1300] == pytest.approx(0.0, abs=1e-9)


def test_stride_contacts_count_a_paw_sliding_under_a_fast_body_as_down():
    """A galloping dog's planted paw slides at 1-2 m/s in the mocap: down for the stride
    detector when the body moves at 4 m/s, still up for the plain contacts and at a walk."""
    heights = np.full((10, 4), 0.02)
    paw_speeds = np.full((10, 4), 1.5)
    assert not detect_contacts(heights, paw_speeds).any()
    assert stride_contacts(heights, paw_speeds, np.full(10, 4.0)).all()
    assert not stride_contacts(heights, paw_speeds, np.full(10, 0.5)).any()
    assert not stride_contacts(heights + 0.1, paw_speeds, np.full(10, 4.0)).any()  # in the air


def test_mocap_phase_advances_every_frame_by_less_than_a_tenth_of_a_cycle(mocap_dir):
    """Monotonic, with no jumps, in every clip (the training target is the wrapped step: the
    old labels stepped pi in a frame where two front paws landed together, which wrapped to
    -pi), at a rate that rises with the gait."""
    from canis.training.bvh import read_bvh

    rates_hz = {}
    for clip in ("D1_001_KAN01_001", "D1_010_KAN01_004", "D1_053_KAN01_002"):
        labels = process_clip(read_bvh(mocap_dir / f"{clip}.bvh")).labels
        step = wrap_angle_rad(np.diff(labels.phase_rad))
        assert step.min() > 0, clip
        assert step.max() < 2 * np.pi / 10, clip
        for g, name in enumerate(GAITS):
            moving = labels.gait_index[:-1] == g
            if moving.sum() > 60:
                rates_hz.setdefault(name, []).append(np.median(step[moving]) * FPS / (2 * np.pi))
    assert {"walk", "canter"} <= set(rates_hz)
    assert 0.7 < np.median(rates_hz["walk"]) < 1.6
    assert 1.8 < np.median(rates_hz["canter"]) < 2.6


def test_soft_actions_are_one_hot_away_from_changes():
    hard = np.array([0] * 100 + [3] * 100)
    weights = soft_actions(hard)
    assert np.array_equal(weights[:80].argmax(1), hard[:80])
    assert np.allclose(weights[:80, 0], 1.0) and np.allclose(weights[120:, 3], 1.0)
    assert weights[100, 3] == pytest.approx(16 / 31)


def test_sniffing_marks_the_idle_frames_around_a_lowered_head_and_nothing_else():
    """An idle dog whose head dips under 75% of the standing height sniffs from half a second
    before the dip to half a second after; a moving dog's low head and a standing dog's
    raised one are not sniffing."""
    idle, move = ACTIONS.index("idle"), ACTIONS.index("move")
    action = np.array([idle] * 300 + [move] * 100)
    head_m = np.full(400, 0.47)
    head_m[150:160] = 0.30  # idle, nose down
    head_m[350:360] = 0.30  # moving, nose down
    marked = sniffing(action, head_m, standing_head_m=0.47)
    margin = SNIFF_MARGIN_FRAMES
    assert np.flatnonzero(marked).tolist() == list(range(150 - margin, 160 + margin))
    assert not sniffing(action, np.full(400, 0.40), 0.47).any()  # 85% of standing


def test_a_sniffing_walk_is_a_slow_walk_around_a_lowered_head():
    """The move frames under SNIFF_WALK_MAX_MPS within half a second of a head as low as a
    sniff's; a faster dog's low head, an idle one's and a slow walk's raised head are not."""
    idle, move = ACTIONS.index("idle"), ACTIONS.index("move")
    action = np.array([move] * 300 + [idle] * 100)
    speed = np.full(400, 0.5)
    speed[200:300] = SNIFF_WALK_MAX_MPS + 0.5  # trotting
    head_m = np.full(400, 0.47)
    head_m[[100, 250, 350]] = 0.30  # walking, trotting and idle, nose down
    marked = sniffing_walk(action, speed, head_m, standing_m=0.47)
    margin = SNIFF_MARGIN_FRAMES
    assert np.flatnonzero(marked).tolist() == list(range(100 - margin, 100 + margin + 1))
    assert not sniffing_walk(action, speed, np.full(400, 0.40), 0.47).any()


def test_real_clips_show_all_six_actions(mocap_dir):
    from canis.training.bvh import read_bvh

    expected = {
        "D1_001_KAN01_001": "idle",
        "D1_007_KAN01_001": "move",
        "D1_057_KAN01_001": "jump",
        "D1_003_KAN01_001": "sit",
        "D1_086_KAN02_001": "stand",
        "D1_005_KAN01_001": "lie",
    }
    for clip, action in expected.items():
        labels = process_clip(read_bvh(mocap_dir / f"{clip}.bvh")).labels
        frames = (labels.action_index == ACTIONS.index(action)).sum()
        assert frames >= 30, f"{clip}: only {frames} frames of {action}"

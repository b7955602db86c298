"""Foot locking: planted paws stay where they landed, lift cleanly, and let go when the
network carries them too far; bone lengths stay exact."""

import numpy as np
import pytest
from canis.runtime import kinematics as fl
from canis.runtime.kinematics import forward_kinematics
from canis.runtime.poses import load_keyframes
from canis.runtime.skeleton import Skeleton, shipped_dog_skeleton_path

SKELETON = Skeleton.from_json(shipped_dog_skeleton_path())
PAWS = SKELETON.group("paws")
DT_S = 1 / 60


def stand():
    key = load_keyframes()["stand"]
    return key.local_rotations[None].astype(np.float32), key.hips_height_m


def paws_of(local, hips):
    positions, _ = forward_kinematics(SKELETON, local, hips)
    return positions[0, PAWS].astype(np.float64), positions[0]


def drift(lock, frames, step_m, contacts):
    """The network's pose glides forward step_m a frame: what the lock shows each frame."""
    local, height = stand()
    shown = []
    for f in range(frames):
        hips = np.array([[0.0, height, step_m * f]], np.float32)
        out = lock.apply(local, hips, contacts(f), DT_S)
        shown.append(paws_of(out, hips))
    return shown


def test_planted_paws_stay_where_they_landed_with_exact_bones():
    lock = fl.FootLock(SKELETON, 1)
    shown = drift(lock, 12, 0.005, lambda f: np.ones((1, 4), bool))
    landed = shown[0][0]
    last_paws, last_positions = shown[-1]
    # The pose moved 5.5 cm; the paws stayed within millimetres of their landing points.
    assert np.abs(last_paws[:, [0, 2]] - landed[:, [0, 2]]).max() < 0.004
    bones = np.linalg.norm(last_positions[1:] - last_positions[SKELETON.parents[1:]], axis=-1)
    assert np.allclose(bones, SKELETON.bone_lengths_m()[1:], atol=1e-5)


def test_lifted_paws_ease_back_to_the_network():
    lock = fl.FootLock(SKELETON, 1)
    lift_at = 10
    shown = drift(lock, 40, 0.008, lambda f: np.full((1, 4), f < lift_at))
    local, height = stand()
    free, _ = paws_of(local, np.array([[0.0, height, 0.008 * 39]], np.float32))
    # No pop when the lock lets go: the paw moves a little more each frame, never a jump.
    moves = [
        np.linalg.norm(b[0] - a[0], axis=-1).max()
        for a, b in zip(shown[:-1], shown[1:], strict=True)
    ]
    assert max(moves) < 0.03
    assert np.abs(shown[-1][0] - free).max() < 0.002
    assert lock.weight.max() < 0.01


def test_a_paw_landing_while_its_last_lock_eases_out_stops_where_it_is_shown():
    # A walk's step: planted, lifted for 6 frames (the lock still easing out), planted again.
    lock = fl.FootLock(SKELETON, 1)
    lands_at = 16
    shown = drift(lock, 30, 0.005, lambda f: np.full((1, 4), not 10 <= f < lands_at))
    moves = [
        np.linalg.norm(b[0][:, [0, 2]] - a[0][:, [0, 2]], axis=-1).max()
        for a, b in zip(shown[:-1], shown[1:], strict=True)
    ]
    assert lock.weight[0, 0] > 0.99
    # It lands where this frame shows it: no more than the pose's own 5 mm glide (locking
    # where the network's paw was, it jumped 29 mm).
    assert moves[lands_at - 1] < 0.005, "a jump at the landing"
    assert max(moves[lands_at:]) < 0.002  # held, to the CCD's millimetre
    assert max(moves) < 0.04  # the release's catch-up, frame by frame


def test_a_paw_carried_too_far_is_let_go_without_a_jump_until_it_lifts():
    """The network slides its planted paws 0.5 cm a frame (a standing network's shuffle):
    past MAX_SLIDE_M they are let go, and rejoin the network's paws within 1.5 s, each frame
    moving no more than the network's paw and LOCK_OUT_MAX_SPEED_MPS (on the half-life alone
    the first frame jumped 2 cm)."""
    lock = fl.FootLock(SKELETON, 1)
    step_m = 0.005
    frames = int(fl.MAX_SLIDE_M / step_m) + 90
    shown = drift(lock, frames, step_m, lambda f: np.ones((1, 4), bool))
    assert not lock.holding.any() and lock.released.all()
    assert lock.weight.max() < 0.01
    paws = np.array([paws for paws, _ in shown])
    moves = np.linalg.norm(np.diff(paws, axis=0), axis=-1).max(axis=1)
    assert max(moves) < step_m + 0.35 * DT_S + 0.001, max(moves)  # 1.2 cm
    # Lifting ends the release; the next landing locks again.
    lock.apply(*stand_at(0.0), np.zeros((1, 4), bool), DT_S)
    lock.apply(*stand_at(0.0), np.ones((1, 4), bool), DT_S)
    assert lock.holding.all()


def stand_at(z_m):
    local, height = stand()
    return local, np.array([[0.0, height, z_m]], np.float32)


def test_switched_off_the_locks_ease_out():
    lock = fl.FootLock(SKELETON, 1)
    drift(lock, 5, 0.0, lambda f: np.ones((1, 4), bool))
    lock.enabled = False
    drift(lock, 30, 0.0, lambda f: np.ones((1, 4), bool))
    assert lock.weight.max() == pytest.approx(0.0, abs=0.01)


def test_the_shipped_dog_skates_less_with_the_lock():
    from canis.runtime.assets import shipped_models_dir

    SHIPPED_MODELS = shipped_models_dir()
    from canis.evaluation.controller_metrics import motion_quality
    from canis.export.closed_loop import Steering, record
    from canis.runtime.controller import Controller
    from canis.runtime.inference import MotionModel

    model = MotionModel(SHIPPED_MODELS / "mann8.onnx")
    skating, hind_skating, hind_planted = {}, {}, []
    for lock in (False, True):
        controller = Controller(model, foot_lock=lock)
        step = controller.step

        def counted_step(control, controller=controller, step=step):
            out = step(control)
            hind_planted.append(controller.contacts[0, 2:].mean())
            return out

        controller.step = counted_step
        run = record(controller, Steering(0.56), 360)
        settled = slice(120, None)
        quality = motion_quality(SKELETON, run.positions_m[settled], run.rotations[settled])
        skating[lock] = quality["skating_cm"].mean()
        hind_skating[lock] = quality["skating_cm"][:, 2:].mean()
        bones = np.linalg.norm(
            run.positions_m[:, 1:] - run.positions_m[:, SKELETON.parents[1:]], axis=-1
        )
        assert np.allclose(bones, SKELETON.bone_lengths_m()[1:], atol=1e-4)
    assert skating[True] < 0.8 * skating[False]
    # The hind paws are held too: the runtime sees them stand by their shown motion (by the
    # predicted velocity alone they were planted in 1% of the frames, and the lock left the
    # back legs' skating as it was).
    assert np.mean(hind_planted) > 0.25  # 0.44 measured (both runs); 0.04 before
    assert hind_skating[True] < 0.95 * hind_skating[False]  # 0.87x measured; 1.00x before

"""The controller stepping a (barely trained) exported model: mechanics, not motion quality."""

import dataclasses

import numpy as np
import pytest
from canis.export.closed_loop import drive
from canis.runtime.control import track_speed
from canis.runtime.controller import Controller
from canis.runtime.inference import MotionModel
from canis.runtime.trajectory import ControlState


def leaves(a, b, name="state"):
    """(name, array of a, array of b) for every array of two DogStates."""
    if dataclasses.is_dataclass(a):
        for f in dataclasses.fields(a):
            yield from leaves(getattr(a, f.name), getattr(b, f.name), f"{name}.{f.name}")
    elif a is not None:
        yield name, a, b


@pytest.fixture(scope="module")
def model(tiny_model):
    return MotionModel(tiny_model)


def test_steps_stay_finite_and_keep_bone_lengths(model):
    controller = Controller(model, count=3)
    control = ControlState(
        np.array([[0, 1.0], [1.0, 0], [0, 0]]), np.array([0, 1.5, 0]), np.array([1, 1, 0])
    )
    for _ in range(30):
        x = controller.step(control).copy()
    assert x.shape == (3, 480) and np.all(np.isfinite(x))
    positions, _ = controller.display_pose()
    bones = np.linalg.norm(
        positions[:, 1:] - positions[:, controller.skeleton.parents[1:]], axis=-1
    )
    assert np.allclose(bones, controller.skeleton.bone_lengths_m()[1:], atol=1e-5)
    assert controller.expert_weights.shape == (3, 4)


def test_characters_in_a_batch_do_not_affect_each_other(model):
    alone, batch = Controller(model, count=1), Controller(model, count=2)
    for _ in range(20):
        alone.step(ControlState.single((0.0, 1.0), 0.0, "move"))
        batch.step(
            ControlState(np.array([[0, 1.0], [2.0, 0]]), np.array([0.0, 1.0]), np.array([1, 1]))
        )
    assert np.allclose(alone.display_positions[0], batch.display_positions[0], atol=1e-4)


def test_non_finite_control_is_refused_and_the_state_kept(model):
    controller = Controller(model)
    controller.step(ControlState.single((0.0, 1.0), 0.0, "move"))
    before = controller.display_positions.copy()
    with pytest.raises(ValueError, match=r"velocity_mps is not finite \(NaN or inf\) in row"):
        controller.step(ControlState.single((np.inf, 1.0), 0.0, "move"))
    assert np.array_equal(controller.display_positions, before) and controller.frame == 1


def test_closed_loop_drive_reports(model):
    report = drive(model, speed_mps=1.1, turn_rate_radps=0.5, seconds=4.0)
    assert set(report) >= {"finite", "min_hips_height_m", "mean_speed_mps", "speed_error"}
    assert report["finite"]


@pytest.mark.parametrize("native_frame", [True, False])
def test_true_outputs_reproduce_the_clip(model, monkeypatch, native_frame):
    """Feeding the controller a clip's true y moves its state exactly onto the clip's next
    frame, and the x it writes from that state is the dataset's x."""
    import canis.runtime.pose as pose_update_module
    from canis.runtime.features import INPUT, decode_output, pose_to_root_frame, write_input
    from canis.runtime.root import yaw_from_direction
    from canis.training.clips import clip_pairs, process_clip
    from reference_frame import ReferenceController, trajectory
    from synthetic_dog import gait, to_motion

    monkeypatch.setattr(pose_update_module, "JOINT_POSITION_BLEND", 0.0)
    roots, rotations, _ = gait("walk", 0.6, 4.0)
    clip = process_clip(to_motion(roots, rotations, "walk"))
    x, y, frames = clip_pairs(clip)
    controller = (Controller if native_frame else ReferenceController)(model)
    row = 40
    f = frames[row]
    controller.state.root_xz_m = clip.root_positions_m[[f]][:, [0, 2]].copy()
    controller.state.root_yaw_rad = yaw_from_direction(clip.facing[[f]])
    controller.state.pose = pose_to_root_frame(
        clip.root_positions_m[[f]], clip.root_rotations[[f]], clip.pose(np.array([f]))
    )
    controller._apply(decode_output(y[[row]].astype(np.float64)), np.zeros(1))
    assert np.allclose(controller.root_xz_m[0], clip.root_positions_m[f + 1, [0, 2]], atol=1e-5)
    assert controller.root_yaw_rad[0] == pytest.approx(
        yaw_from_direction(clip.facing[f + 1]), abs=1e-5
    )
    expected = pose_to_root_frame(
        clip.root_positions_m[[f + 1]], clip.root_rotations[[f + 1]], clip.pose(np.array([f + 1]))
    )
    for name in ("positions_m", "forwards", "ups", "velocities_mps"):
        assert np.allclose(getattr(controller.pose, name), getattr(expected, name), atol=1e-4)
    future = clip.root_positions_m[f + 1 + np.array([10, 20, 30, 40, 50, 60])][:, [0, 2]]
    assert np.allclose(controller.predicted_future.positions_xz_m[0], future, atol=1e-4)
    # The joint block the controller writes next is the dataset's input for frame f + 1.
    x_next = write_input(trajectory(controller), controller.pose)
    joints = INPUT.block_slice("joints")
    assert np.abs(x_next[0, joints] - x[row + 1, joints]).max() < 1e-4


def test_a_character_with_non_finite_output_keeps_its_last_good_state(model, caplog):
    class Faulty:
        """The tiny model, except that character 1's output turns NaN on the 6th call."""

        def __init__(self, inner):
            self.inner, self.calls = inner, 0
            self.kind, self.experts = inner.kind, inner.experts

        def bind(self, batch):
            return self.inner.bind(batch)

        def run_bound(self, buffers):
            self.calls += 1
            outputs = self.inner.run_bound(buffers)
            if self.calls == 6:
                outputs["y"][1] = np.nan
            return outputs

    controller = Controller(Faulty(model), count=2)
    control = ControlState(np.array([[0, 1.0], [0, 1.0]]), np.zeros(2), np.array([1, 1]))
    for _ in range(5):
        controller.step(control)
    before = controller.root_xz_m.copy(), controller.pose.positions_m.copy()
    whole = controller.state.copy()
    controller.step(control)
    assert controller.non_finite_events == 1 and "characters [1]" in caplog.text
    # Every array of the state but the command smoothing, which runs before the network, and
    # what the display makes after it: the shown paws' speed (the held dog's paws stood
    # still), and the shown pose, last step's included (display_pose(alpha) reads it).
    command = ("commanded", "speed_gain", "measured_speed", "asked_speed", "paw_speed")
    command += ("display_positions", "display_rotations")
    for name, now, then in leaves(controller.state, whole):
        if not any(part in name for part in command):
            assert np.array_equal(now[1], then[1]), name
    assert np.all(controller.state.paw_speed_mps[1] == 0)
    assert np.array_equal(controller.root_xz_m[1], before[0][1])
    assert np.array_equal(controller.pose.positions_m[1], before[1][1])
    assert not np.array_equal(controller.root_xz_m[0], before[0][0])  # the other moved on
    for _ in range(5):
        controller.step(control)
    assert np.all(np.isfinite(controller.display_positions))


def test_speed_tracking_corrects_the_asked_speed_toward_the_measured_one(model):
    """The PI on the window's speed: a dog 10% too fast is asked for less, one 10% too slow
    for more (proportionally at once, then the integral), a dog not moving relaxes back, and
    one far slower than it was asked to be over the window (held back by something) does not
    wind the integral up."""
    controller = Controller(model, count=4)
    s = controller.state
    asked = ControlState(
        np.array([[0, 1.0], [0, 1.0], [0, 0.0], [0, 1.0]]), np.zeros(4), np.array([1, 1, 0, 1])
    )
    s.history.velocities_xz_mps[:] = np.array([[0, 1.1], [0, 0.9], [0, 0.0], [0, 0.0]])[:, None]
    s.asked_speed_history_mps[:] = np.array([1.0, 1.0, 0.0, 1.0])[:, None]
    s.speed_gain = np.array([1.0, 1.0, 1.3, 1.0])
    fed = track_speed(s, asked.validated(4), None)
    speeds = np.linalg.norm(fed.velocity_mps, axis=1)
    assert speeds[0] < 1.0 < speeds[1] and speeds[3] > 1.0  # P: at once
    for _ in range(59):
        fed = track_speed(s, asked.validated(4), None)
    assert s.speed_gain[0] < 1.0 < s.speed_gain[1]  # I: too fast / too slow
    assert abs(s.speed_gain[2] - 1.0) < 0.1  # not moving: relaxes back
    assert np.allclose(s.measured_speed_mps, [1.1, 0.9, 0.0, 0.0])
    assert s.speed_gain[3] == 1.0  # the error was past SPEED_TRACKING_INTEGRATE_WITHIN
    untracked = Controller(model, speed_tracking=False)
    untracked.step(ControlState.single((0.0, 1.0), 0.0, "move"))
    assert untracked.state.speed_gain[0] == 1.0


def test_dog_state_rows_are_taken_and_put_whole(model):
    controller = Controller(model, count=3)
    control = ControlState(
        np.array([[0, 1.0], [1.0, 0], [0, 0]]), np.array([0, 1.5, 0]), np.array([1, 1, 0])
    )
    for _ in range(10):
        controller.step(control)
    state = controller.state
    saved = state.copy()
    taken = state.rows([2, 0])
    assert taken.pose.positions_m.shape[0] == 2 and taken.history.actions.shape[0] == 2
    taken.root_xz_m[:] = 7.0  # a copy: the state is untouched
    assert not np.any(state.root_xz_m == 7.0)
    state.put_rows([1], taken.rows([0]))  # dog 2's rows, written onto dog 1
    for a, b in ((state.pose.ups, saved.pose.ups), (state.frame_history, saved.frame_history)):
        assert np.array_equal(a[1], b[2]) and np.array_equal(a[0], b[0])
    assert np.array_equal(state.root_xz_m[1], [7.0, 7.0])
    wrong = state.rows([0])
    wrong.history.speeds_mps = wrong.history.speeds_mps[:, :5]  # a state of another layout
    with pytest.raises(ValueError, match=r"state\.history\.speeds_mps: rows of shape"):
        state.put_rows([0], wrong)


def test_reset_refuses_non_finite_and_misshaped_starts(model):
    """Issue 20 defect 4: a NaN or infinite start made the dog show NaN forever."""
    controller = Controller(model, count=2)
    before = controller.root_xz_m.copy()
    for kwargs, message in (
        ({"root_xz_m": [[0.0, np.nan], [0.0, 0.0]]}, "root_xz_m is not finite"),
        ({"yaw_rad": [0.0, np.inf]}, "yaw_rad is not finite"),
        ({"root_xz_m": [[0.0, 0.0]]}, r"shape \(2, 2\) for 2 dog"),
        ({"start_pose": "fly"}, "no start pose 'fly'"),
    ):
        with pytest.raises(ValueError, match=message):
            controller.reset(**kwargs)
        np.testing.assert_array_equal(controller.root_xz_m, before)  # nothing changed


def test_state_kept_from_a_step_is_not_overwritten_by_the_next(model):
    # The step decodes y into a buffer reused every frame; what it keeps must be copies.
    controller = Controller(model, count=2)
    control = ControlState(np.array([[0, 1.0], [1.0, 0]]), np.array([0, 1.5]), np.array([1, 1]))
    controller.step(control)
    state = controller.state
    kept = [state.pose, state.predicted_future]
    before = [[np.array(v) for v in dataclasses.astuple(k)] for k in kept]
    for _ in range(3):
        controller.step(control)
    for parts, copies in zip(kept, before, strict=True):
        for value, copy in zip(dataclasses.astuple(parts), copies, strict=True):
            assert np.array_equal(value, copy)

"""The transition network: model pieces, training/resume, export parity over rollouts, the
runtime's transition_to, metrics, evaluation and temporal super-resolution (on the synthetic
dogs; the shipped model's figures are in docs/RESULTS.md)."""

from pathlib import Path

import numpy as np
import pytest
import torch
from canis.runtime.controller import Controller
from canis.runtime.features import ACTIONS
from canis.runtime.inference import ModelError, MotionModel
from canis.runtime.kinematics import forward_kinematics
from canis.runtime.poses import Keyframe, keyframe_shown_m
from canis.runtime.root import from_root_xz
from canis.runtime.trajectory import ControlState
from canis.runtime.transition import TransitionModel
from canis.runtime.transition_frames import (
    CONTEXT_FRAMES,
    FRAME_SIZE,
    TTA_CLAMP_FRAMES,
    placement,
    placement_to_world,
    root_motion,
    target_blend,
)
from canis.runtime.transition_player import LEAD_FRAMES, STEPS_PER_FRAME, blend_window
from canis.training import transition_data
from canis.training.rtn import LSTM_UNITS, Rtn, empty_rtn, parameter_bytes, rollout, tta_embedding
from canis.training.train_rtn import train_rtn
from canis.training.transition_data import l2p, l2q, npss
from conftest import tiny_rtn_config

MANN = Path(__file__).resolve().parent.parent / "assets" / "models" / "mann8.onnx"


def random_rtn(seed=0, residual="interpolation") -> Rtn:
    torch.manual_seed(seed)
    return empty_rtn(residual)


def test_time_to_arrival_embedding_is_clamped():
    tta = torch.tensor([[3.0], [TTA_CLAMP_FRAMES], [TTA_CLAMP_FRAMES + 40.0], [4.0]])
    z = tta_embedding(tta, 128)
    assert z.shape == (4, 128)
    assert torch.equal(z[1], z[2])  # beyond the clamp, every distance looks the same
    assert not torch.allclose(z[0], z[3])
    assert z[0, 0] == pytest.approx(np.sin(3.0)) and z[0, 1] == pytest.approx(np.cos(3.0))


def test_hidden_state_initialiser_and_size():
    model = random_rtn()
    h, c = model.initial_state(torch.randn(3, FRAME_SIZE))
    assert h.shape == (3, LSTM_UNITS) and c.shape == (3, LSTM_UNITS)
    assert not torch.equal(h, c)  # two heads of one network, not one state twice
    assert parameter_bytes(model) < 15e6


def test_the_interpolation_residual_starts_as_exact_interpolation():
    """A fresh model's correction is zero, so its rollout is the INT baseline: the pose moves
    linearly from the last context frame to the target and the root likewise."""
    model = random_rtn()
    p = 9
    context = torch.randn(2, CONTEXT_FRAMES, FRAME_SIZE)
    places = torch.tensor(
        [[1.0, -2.0, 0.0, 1.0], [0.5, 0.3, float(np.sin(0.4)), float(np.cos(0.4))]]
    )
    places = places[:, None].expand(2, CONTEXT_FRAMES, 4).clone()
    target = torch.randn(2, FRAME_SIZE)
    with torch.no_grad():
        frames, placements = rollout(model, context, places, target, p)
    share = (torch.arange(1, p + 2) / (p + 1))[None, :, None]
    last = context[:, -1:, 3:]
    torch.testing.assert_close(frames[..., 3:], last + (target[:, None, 3:] - last) * share)
    torch.testing.assert_close(placements[..., :2], places[:, :1, :2] * (1 - share))
    torch.testing.assert_close(placements[:, -1], torch.tensor([[0.0, 0.0, 0.0, 1.0]] * 2))
    # The frame's root velocity is the step between placements, in the previous root's frame.
    step = (placements[:, 1, :2] - placements[:, 0, :2]) * 60
    torch.testing.assert_close(frames[0, 1, :2], step[0], atol=1e-4, rtol=1e-4)
    paper = empty_rtn("previous")
    assert paper.decoder[-1].out_features == FRAME_SIZE


def test_teacher_forcing_feeds_true_frames():
    """With probability 1 every next input is the truth, so an output only depends on the
    truth before it: changing a later true frame leaves the earlier outputs alone."""
    model = random_rtn()
    b, p = 2, 6
    context = torch.randn(b, CONTEXT_FRAMES, FRAME_SIZE)
    places = torch.tensor([0.0, -1.0, 0.0, 1.0]).expand(b, CONTEXT_FRAMES, 4).clone()
    target = torch.randn(b, FRAME_SIZE)
    truth = (torch.randn(b, p + 1, FRAME_SIZE), places[:, :1].expand(b, p + 1, 4).clone())
    with torch.no_grad():
        a, _ = rollout(model, context, places, target, p, truth, 1.0)
        truth[0][:, 3] += 1.0
        b_, _ = rollout(model, context, places, target, p, truth, 1.0)
        free, _ = rollout(model, context, places, target, p)
    assert torch.equal(a[:, :4], b_[:, :4]) and not torch.equal(a[:, 4], b_[:, 4])
    assert not torch.equal(a[:, 1], free[:, 1])


def test_placements_round_trip_and_root_motion(rng):
    xz, yaw = rng.normal(size=(5, 2)), rng.uniform(-3, 3, 5)
    target_xz, target_yaw = rng.normal(size=(5, 2)), rng.uniform(-3, 3, 5)
    back_xz, back_yaw = placement_to_world(
        placement(xz, yaw, target_xz, target_yaw), target_xz, target_yaw
    )
    np.testing.assert_allclose(back_xz, xz, atol=1e-12)
    np.testing.assert_allclose(np.sin(back_yaw - yaw), 0, atol=1e-12)
    # Walking forward (+z of the root) at 1.2 m/s while facing +x: local velocity (0, 1.2).
    path = np.stack([np.arange(4) * 0.02, np.zeros(4)], axis=1)
    velocity, yaw_rate = root_motion(path, np.full(4, np.pi / 2))
    np.testing.assert_allclose(velocity, [[0, 1.2]] * 4, atol=1e-9)
    np.testing.assert_allclose(yaw_rate, 0, atol=1e-12)


def test_target_blend_ends_exactly_on_the_target(rng):
    frames = rng.normal(size=(2, 8, FRAME_SIZE))
    places = np.concatenate(
        [rng.normal(size=(2, 8, 2)), np.zeros((2, 8, 1)), np.ones((2, 8, 1))], -1
    )
    target = rng.normal(size=(2, FRAME_SIZE))
    blended, blended_places = target_blend(frames, places, target)
    np.testing.assert_allclose(blended[:, -1], target, atol=1e-12)
    np.testing.assert_allclose(blended_places[:, -1], [[0, 0, 0, 1]] * 2, atol=1e-12)
    # The correction grows linearly: a quarter of it at a quarter of the way.
    np.testing.assert_allclose(blended[:, 1] - frames[:, 1], (target - frames[:, -1]) * 2 / 8)


def test_training_resumes_exactly(tiny_transitions, tmp_path):
    # Two steps, stopped after the first as a kill would: the same as four stopped after two
    # (each step's windows and teacher forcing are seeded by the step), in half the time.
    config = tiny_rtn_config(tiny_transitions, steps=2, eval_every=1, units=32)
    straight = train_rtn(config, tmp_path / "a", progress=False)
    train_rtn(config, tmp_path / "b", progress=False, stop_after=1)
    resumed = train_rtn(config, tmp_path / "b", resume=True, progress=False)
    for (name, a), b in zip(
        straight.state_dict().items(), resumed.state_dict().values(), strict=True
    ):
        assert torch.equal(a, b), name
    with pytest.raises(ValueError, match="resume with the same settings"):
        train_rtn(
            tiny_rtn_config(tiny_transitions, steps=8), tmp_path / "b", resume=True, progress=False
        )


def test_bf16_training_runs_and_resume_refuses_another_precision(tiny_transitions, tmp_path):
    """bf16 autocast trains the RTN to finite losses near fp32's, and a checkpoint of one
    precision given to --resume with the other is refused naming the difference."""
    from dataclasses import replace

    config = tiny_rtn_config(tiny_transitions, steps=2, eval_every=1, units=32)
    train_rtn(config, tmp_path / "fp32", progress=False)
    train_rtn(replace(config, precision="bf16"), tmp_path / "bf16", progress=False)
    rows = [
        (tmp_path / name / "log.csv").read_text().splitlines()[-1].split(",")
        for name in ("fp32", "bf16")
    ]
    fp32_loss, bf16_loss = (float(row[2]) for row in rows)  # validation_loss
    assert np.isfinite(bf16_loss) and bf16_loss == pytest.approx(fp32_loss, rel=0.05)
    longer = replace(config, steps=3, precision="bf16")
    with pytest.raises(ValueError, match=r"other settings: precision 'fp32' \(now 'bf16'\)"):
        train_rtn(longer, tmp_path / "fp32", resume=True, progress=False)


def test_export_matches_the_torch_rollout(tiny_transitions, tmp_path):
    from canis.export.rtn_export import export_rtn, write_rtn_card
    from canis.training.train_rtn import LAST

    train_rtn(tiny_rtn_config(tiny_transitions, units=32), tmp_path, progress=False)
    report = export_rtn(tmp_path / LAST, tmp_path / "rtn_step.onnx", tiny_transitions)
    assert max(report["rollout_max_abs_error"].values()) < 1e-3
    assert {"real_5", "real_60", "random_60"} <= set(report["rollout_max_abs_error"])
    written = TransitionModel(tmp_path / "rtn_step.onnx")  # the runtime loads what it wrote
    # ... and it names the clips its data held out, for the evaluation to check.
    held = transition_data.held_out_clips(written.metadata, "rtn_step.onnx")
    assert held == transition_data.load(tiny_transitions).metadata["validation_clips"]
    # The card gives the network's own widths, and --units in the line that reproduces it.
    card = write_rtn_card(tmp_path / "rtn_step.onnx", tmp_path / LAST, report, "canis export-rtn")
    text = card.read_text()
    assert "frame encoder 32-32, target and offset encoders 8-8, one 32-unit LSTM" in text
    assert "--batch-size 4 --units 32 --lr" in text


def test_a_rotations_rtn_exports_and_the_runtime_runs_it_at_any_batch(tiny_transitions, tmp_path):
    """The rotations residual's step (quaternions in the graph) exports with the rollout
    parity, and the runtime's transition_to runs it for one dog and for three."""
    from dataclasses import replace

    from canis.export.rtn_export import export_rtn
    from canis.training.train_rtn import LAST

    config = replace(tiny_rtn_config(tiny_transitions, units=32), residual="rotations")
    train_rtn(config, tmp_path, progress=False)
    report = export_rtn(tmp_path / LAST, tmp_path / "rtn_step.onnx", tiny_transitions)
    assert max(report["rollout_max_abs_error"].values()) < 1e-3
    model = TransitionModel(tmp_path / "rtn_step.onnx")
    assert model.metadata["canis.residual"] == "rotations"
    for count in (1, 3):
        c = Controller(MotionModel(MANN), count=count, transition_model=model)
        still = ControlState(np.zeros((count, 2)), np.zeros(count), np.zeros(count, dtype=int))
        c.step(still)
        started = c.transition_to("sit", 8)
        for _ in range(started.frames):
            c.step(still)
        assert np.all(np.isfinite(c.display_pose()[0])) and not c.in_transition().any()


def controller(tiny_rtn, count=2) -> Controller:
    return Controller(MotionModel(MANN), count=count, transition_model=TransitionModel(tiny_rtn))


def test_transition_reaches_its_target_and_hands_back(tiny_rtn):
    c = controller(tiny_rtn)
    trot = ControlState(
        np.array([[0.0, 1.5], [0.3, 0.8]]), np.zeros(2), np.full(2, ACTIONS.index("move"))
    )
    for _ in range(90):
        c.step(trot)
    frames = 20
    place = c.root_xz_m + [0.2, 0.4]
    started = c.transition_to("sit", frames, at_xz_m=place, yaw_rad=[0.5, -1.0])
    assert c.in_transition().all() and started.frames == LEAD_FRAMES + frames + 1
    np.testing.assert_allclose(started.final_xz_m, place)
    for _ in range(LEAD_FRAMES):  # the lead: the dogs go on as they were commanded
        before = c.root_xz_m.copy()
        c.step(ControlState(np.zeros((2, 2)), np.zeros(2), np.zeros(2, dtype=int)))
        assert np.all(np.linalg.norm(c.root_xz_m - before, axis=1) > 0.5 / 60)
    for _ in range(frames + 1):
        c.step(trot)  # the command is ignored while the transition plays
    assert not c.in_transition().any()
    assert c.action_weights.argmax(axis=1).tolist() == [ACTIONS.index("sit")] * 2
    # The motion network reads the keyframe at rest next: a lie reached at a slide from a trot,
    # read with its joints' velocities, diverged after the hand-back (transition_player.py).
    assert not c.pose.velocities_mps.any()
    key = c.keyframes["sit"]
    wanted = np.repeat(keyframe_shown_m(c.skeleton, key)[None], 2, axis=0).astype(np.float64)
    wanted[..., [0, 2]] = from_root_xz(wanted[..., [0, 2]], c.root_xz_m, c.root_yaw_rad)
    np.testing.assert_allclose(c.root_xz_m, place, atol=1e-5)  # where it was asked to be
    positions, _ = c.display_pose()
    assert np.linalg.norm(positions - wanted, axis=-1).max() < 0.01  # within 1 cm
    np.testing.assert_allclose(c.root_yaw_rad, [0.5, -1.0], atol=1e-5)
    sit = ControlState(np.zeros((2, 2)), c.root_yaw_rad.copy(), np.full(2, ACTIONS.index("sit")))
    c.step(sit)  # the motion network's first frame: the display carries the difference
    offsets = c.state.display_offset
    first = max(np.abs(o).max() for o in vars(offsets).values())
    for _ in range(60):  # the motion network carries on from the transition's state
        c.step(sit)
        assert np.all(np.isfinite(c.display_pose()[0]))
    left = vars(c.state.display_offset).values()
    assert first > 0 and all(np.abs(o).max() < 1e-3 * first for o in left)


def test_a_transition_writes_the_history_as_the_motion_network_steps_do(tiny_rtn):
    """Each played frame pushes the root's velocity and the asked speed (the desired future's
    current sample, as Controller._apply does), not the root's speed: asked at once from a
    canter, a transition still slides at its last frames, and read as the dog's speed that
    history made MANN-8 rear up after the hand-back to a sit."""
    c = controller(tiny_rtn, count=1)
    canter = ControlState(np.array([[0.0, 3.3]]), np.zeros(1), np.array([ACTIONS.index("move")]))
    for _ in range(120):
        c.step(canter)
    frames = 20
    c.transition_to("sit", frames, at_xz_m=c.root_xz_m + [0.0, 1.5])
    still = ControlState(np.zeros((1, 2)), np.zeros(1), np.array([ACTIONS.index("sit")]))
    asked = []
    for _ in range(LEAD_FRAMES + frames + 1):
        c.step(still)
        asked.append(c.desired_future.speeds_mps[0, 0])
    assert not c.in_transition().any()
    played = slice(-(frames + 1), None)
    history = c.state.history
    np.testing.assert_allclose(history.speeds_mps[0, played], asked[played])
    root_speeds = np.linalg.norm(history.velocities_xz_mps[0, played], axis=-1)
    assert np.abs(root_speeds - history.speeds_mps[0, played]).max() > 0.5


def test_only_the_asked_characters_transition(tiny_rtn):
    c = controller(tiny_rtn, count=3)
    c.transition_to("lie", 10, characters=[1])
    assert c.in_transition().tolist() == [False, True, False]
    idle = ControlState(np.zeros((3, 2)), np.zeros(3), np.zeros(3, dtype=int))
    for _ in range(LEAD_FRAMES + 4):
        c.step(idle)
    started = c.transition_to("beg", 20, characters=[1])  # replaces the one playing
    assert c.in_transition().tolist() == [False, True, False]
    for _ in range(started.frames):
        c.step(idle)
    assert not c.in_transition().any() and np.all(np.isfinite(c.display_pose()[0]))


def test_a_streamed_transition_is_the_one_generated_at_once(tiny_rtn):
    """Generated step by step over the frames that play it, in calls shared with another
    dog's transition at another stage, a transition is the one TransitionModel.generate makes
    at once from the same context, with the same target blend; no frame runs more than
    STEPS_PER_FRAME RTN steps (and the hidden state's initialisation once per transition),
    and asking for one runs nothing of the RTN."""
    from canis.runtime.poses import keyframe_pose
    from canis.runtime.root import yaw_from_direction
    from canis.runtime.transition_frames import frame_vector, split_frame

    c = controller(tiny_rtn, count=2)
    calls = []
    step, init = c.transition_model.step, c.transition_model.init
    c.transition_model.step = lambda *a: calls.append("step") or step(*a)
    c.transition_model.init = lambda *a: calls.append("init") or init(*a)
    trot = ControlState(
        np.array([[0.0, 1.5], [0.4, 0.9]]), np.array([0.0, 0.6]), np.full(2, ACTIONS.index("move"))
    )
    for _ in range(60):
        c.step(trot)
    asked = {0: ("sit", 20, 0), 1: ("lie", 7, 3)}  # target, frames, steps after dog 0's ask
    started, context, shown = {}, {}, {0: [], 1: []}
    for frame in range(LEAD_FRAMES + 30):
        for dog, (target, frames, at) in asked.items():
            if frame == at:
                calls.clear()
                started[dog] = c.transition_to(target, frames, characters=[dog])
                assert calls == []
        calls.clear()
        c.step(trot)
        assert calls.count("step") <= STEPS_PER_FRAME and calls.count("init") <= 1
        for dog, (_, _, at) in asked.items():
            if frame - at == LEAD_FRAMES - 1:  # the lead's last frame: the context is complete
                h = c.state.history
                context[dog] = (
                    c.state.frame_history[dog].copy(),
                    h.positions_xz_m[dog, -CONTEXT_FRAMES:].copy(),
                    yaw_from_direction(h.directions_xz[dog, -CONTEXT_FRAMES:]),
                )
            elif LEAD_FRAMES <= frame - at < started[dog].frames:
                shown[dog].append(
                    (c.root_xz_m[dog].copy(), c.root_yaw_rad[dog], c.pose.positions_m[dog].copy())
                )
    assert not c.in_transition().any()
    for dog, (target, frames, _) in asked.items():
        target_frame = frame_vector(
            np.zeros((1, 2)), np.zeros(1), keyframe_pose(c.skeleton, c.keyframes[target])
        )
        frames_10, past_xz, past_yaw = context[dog]
        final_xz, final_yaw = started[dog].final_xz_m, started[dog].final_yaw_rad
        places = placement(
            past_xz, past_yaw, np.repeat(final_xz, CONTEXT_FRAMES, 0), np.repeat(final_yaw, 10)
        )
        made, made_places = c.transition_model.generate(
            frames_10[None], places[None], target_frame, frames
        )
        assert 1 < blend_window(frames) < frames + 1  # the window streaming allows
        made, made_places = target_blend(made, made_places, target_frame, blend_window(frames))
        xz, yaw = placement_to_world(
            made_places[0].astype(np.float64),
            np.repeat(final_xz, frames + 1, 0),
            np.repeat(final_yaw, frames + 1),
        )
        positions = split_frame(made[0], c.skeleton.parents).positions_m
        assert len(shown[dog]) == frames + 1
        for k, (shown_xz, shown_yaw, shown_positions) in enumerate(shown[dog]):
            np.testing.assert_allclose(shown_xz, xz[k], atol=1e-5)
            np.testing.assert_allclose(shown_yaw, yaw[k], atol=1e-5)
            np.testing.assert_allclose(shown_positions, positions[k], atol=1e-5)


def test_a_transition_for_some_dogs_leaves_the_others_in_theirs(tiny_rtn):
    """Issue 20: asking dog 0 to lie while both dogs sit used to drop dog 1's sit (no
    hand-back, no offset). Each dog's transition is its own."""
    c = controller(tiny_rtn, count=2)
    move = ControlState(
        np.array([[0.0, 1.2], [0.5, 1.0]]), np.zeros(2), np.full(2, ACTIONS.index("move"))
    )
    for _ in range(30):
        c.step(move)
    both = c.transition_to("sit", 40)
    for _ in range(5):
        c.step(move)
    one = c.transition_to("lie", 30, characters=[0])
    assert c.in_transition().tolist() == [True, True]
    for _ in range(one.frames):
        c.step(move)
    assert c.in_transition().tolist() == [False, True]  # dog 0 lay down, dog 1 sits on
    np.testing.assert_allclose(c.root_xz_m[0], one.final_xz_m[0], atol=1e-5)
    assert c.action_weights[0].argmax() == ACTIONS.index("lie")
    for _ in range(both.frames - 5 - one.frames):
        c.step(move)
    assert not c.in_transition().any()  # dog 1 sat down where and when it was asked to
    np.testing.assert_allclose(c.root_xz_m[1], both.final_xz_m[1], atol=1e-5)
    np.testing.assert_allclose(c.root_yaw_rad[1], both.final_yaw_rad[1], atol=1e-5)
    assert c.action_weights[1].argmax() == ACTIONS.index("sit")
    c.step(move)  # dog 1 handed back: the display eases over the motion network's difference
    assert np.abs(c.state.display_offset.forwards[1]).max() > 0


def test_bad_transition_requests_are_refused_clearly(tiny_rtn):
    c = controller(tiny_rtn, count=1)
    sit = c.keyframes["sit"]
    short = Keyframe("short", sit.local_rotations[:20], sit.hips_height_m, "test")
    with pytest.raises(ValueError, match="the dog has 27 joints"):
        c.transition_to(short, 20)
    broken = sit.local_rotations.copy()
    broken[3, 1] = np.nan
    with pytest.raises(ValueError, match="non-finite"):
        c.transition_to(Keyframe("nan", broken, sit.hips_height_m, "test"), 20)
    with pytest.raises(ValueError, match="no keyframe 'roll'"):
        c.transition_to("roll", 20)
    with pytest.raises(ValueError, match="trained on 5 to 60"):
        c.transition_to("sit", 90)
    with pytest.raises(ValueError, match="not finite"):
        c.transition_to("sit", 20, at_xz_m=[np.inf, 0])
    assert not c.in_transition().any()  # nothing half-started
    with pytest.raises(RuntimeError, match="transition_model"):
        Controller(MotionModel(MANN)).transition_to("sit", 20)


def test_a_motion_model_is_not_a_transition_model(tmp_path):
    step = tmp_path / "x_step.onnx"
    step.write_bytes(MANN.read_bytes())
    (tmp_path / "x_init.onnx").write_bytes(MANN.read_bytes())
    with pytest.raises(ModelError, match="is a 'mann' model, not 'rtn_step'"):
        TransitionModel(step)
    with pytest.raises(FileNotFoundError, match="no such transition model"):
        TransitionModel(tmp_path / "y_step.onnx")


def test_metrics_are_zero_for_the_truth_and_sign_blind(rng):
    from conftest import random_quaternions

    rotations = random_quaternions(rng, (3, 12, 27)).astype(np.float64)
    positions = rng.normal(size=(3, 12, 27, 3))
    std = np.ones((27, 3))
    assert l2q(rotations, rotations) == 0 and l2q(-rotations, rotations) == 0
    assert l2p(positions, positions, std) == 0
    assert npss(rotations, rotations) == pytest.approx(0, abs=1e-12)
    assert l2p(positions + [0.0, 0.0, 1.0], positions, std) == pytest.approx(np.sqrt(27))
    noisy = rotations + rng.normal(scale=0.1, size=rotations.shape)
    assert l2q(noisy, rotations) > 0 and npss(noisy, rotations) > 0


def test_evaluation_and_upsampling_on_the_synthetic_dogs(tiny_rtn, tiny_transitions, tmp_path):
    from canis.evaluation.transitions import evaluate, write

    results = evaluate(tiny_rtn, tiny_transitions, stride=40)
    for method in ("rtn", "interp", "zerovel"):
        for metric in ("l2p", "l2q", "npss"):
            assert set(results[method][metric]) == {"5", "15", "30", "45"}
            assert all(np.isfinite(v) and v >= 0 for v in results[method][metric].values())
    assert results["upsample"]["regenerated_frames"] > 0
    doc = tmp_path / "RESULTS.md"
    doc.write_text("# Evaluation\n\nintro\n")
    write(results, tmp_path / "t.json", doc, "cmd")
    write(results, None, doc, "cmd")  # rewritten in place, not appended twice
    text = doc.read_text()
    assert text.count("## Transitions") == 1 and "intro" in text and "| L2P |" in text


def test_upsample_keeps_the_kept_frames(tiny_rtn, tmp_path):
    from canis.training.bvh import read_bvh
    from canis.training.transition_data import keyframe_indices, upsample_clip
    from synthetic_dog import standard_clips

    assert keyframe_indices(200, 60) == [69, 129, 189, 199]  # a 9-frame tail: one more
    assert keyframe_indices(193, 60) == [69, 129, 189]  # a 2-frame tail stays as captured
    with pytest.raises(ValueError, match="keep every 6 to 61 frames"):
        keyframe_indices(200, 100)
    clip = standard_clips(tmp_path / "clips")["walk"]
    report = upsample_clip(tiny_rtn, clip, tmp_path / "up.bvh", 30)
    original, upsampled = read_bvh(clip), read_bvh(tmp_path / "up.bvh")
    assert upsampled.frame_count == original.frame_count
    assert report["regenerated"] > 0.8 * original.frame_count
    for kept in [0, 5, CONTEXT_FRAMES - 1, *keyframe_indices(original.frame_count, 30)]:
        np.testing.assert_allclose(
            upsampled.root_positions_cm[kept], original.root_positions_cm[kept], atol=1e-3
        )


def test_scripts_ask_for_transitions_and_refuse_bad_ones(tiny_rtn, tmp_path):
    import json

    from canis.tools.run import load_script, run

    script = tmp_path / "sit.json"
    events = [
        {"t": 0.0, "move": [0, 1], "speed": 1.0, "action": "move"},
        {"t": 1.0, "transition": {"to": "lie", "frames": 40}},
        {"t": 2.5, "transition": {"to": "stand", "frames": 30}},
    ]
    script.write_text(json.dumps(events))
    summary = run(MANN, 3.5, script=script, transition_model_path=tiny_rtn)
    assert summary["non_finite_frames"] == 0
    assert "transition" in summary["frame_time"]["stages"]
    for bad, message in (
        ({"to": "roll", "frames": 30}, "unknown keyframe 'roll'"),
        ({"to": "sit", "frames": 2}, "from 5 to 60, got 2"),
        ({"to": "sit"}, "must be"),
        ({"to": "sit", "frames": 30, "variation": -1}, r"'variation' must be a finite number"),
        ({"to": "sit", "frames": 30, "seed": 1.5}, r"'seed' must be None or a whole .* got 1.5"),
        ({"to": "sit", "frames": 30, "mood": 1}, "optionally with"),
    ):
        script.write_text(json.dumps([{"t": 0.0, "transition": bad}]))
        with pytest.raises(ValueError, match=message):
            load_script(script)


def test_a_scripts_transition_samples_with_its_variation_and_replays_with_its_seed(tmp_path):
    """{"transition": {..., "variation": V, "seed": S}}: Controller.transition_to's sampled
    transition, the same take again for the same seed."""
    import json

    from canis.tools.run import run

    noisy_rtn = Path(__file__).resolve().parent / "fixtures" / "tiny_rtn_noise_step.onnx"
    shown = {}
    for name, asked in (("a", {"seed": 7}), ("again", {"seed": 7}), ("other", {"seed": 8})):
        script = tmp_path / f"{name}.json"
        transition = {"to": "lie", "frames": 30, "variation": 1.0} | asked
        script.write_text(json.dumps([{"t": 0.1, "transition": transition}]))
        record = tmp_path / f"{name}.npz"
        run(MANN, 0.8, script=script, transition_model_path=noisy_rtn, record=record)
        shown[name] = np.load(record)["positions"]
    assert np.array_equal(shown["a"], shown["again"])
    assert not np.array_equal(shown["a"], shown["other"])


def test_torch_forward_kinematics_matches_the_data(tiny_transitions, dog):
    """The FK term trains on what the runtime shows: the torch FK of a frame's joint axes
    lands every joint where the data (made by the native FK) has it."""
    from canis.runtime.transition_frames import POSITIONS
    from canis.training.rtn import fk_positions
    from canis.training.transition_data import load

    frames = torch.as_tensor(load(tiny_transitions)["frames"][::7])
    shown = fk_positions(frames, dog.parents, torch.as_tensor(dog.offsets_m, dtype=torch.float32))
    truth = frames[:, POSITIONS].reshape(shown.shape)
    assert (shown - truth).norm(dim=-1).max() < 1e-5


def test_a_recorded_frame_is_a_target(tiny_rtn):
    from canis.runtime.poses import keyframe_from_world_pose

    c = controller(tiny_rtn, count=1)
    c.reset(yaw_rad=[0.7])
    positions, rotations = c.display_pose()
    recorded = keyframe_from_world_pose(
        "recorded", c.skeleton, rotations[0], positions_m=positions[0]
    )
    # The standing start, recorded from the screen, is the standing keyframe again.
    stand = c.keyframes["stand"]
    assert recorded.hips_height_m == pytest.approx(stand.hips_height_m, abs=1e-5)
    same = np.abs(np.sum(recorded.local_rotations * stand.local_rotations, axis=1))
    np.testing.assert_allclose(same, 1.0, atol=1e-5)
    trot = ControlState(np.array([[0.0, 1.5]]), np.zeros(1), np.array([ACTIONS.index("move")]))
    for _ in range(60):
        c.step(trot)
    started = c.transition_to(recorded, 15, action="idle")
    for _ in range(started.frames):
        c.step(trot)
    wanted, _ = forward_kinematics(
        c.skeleton, recorded.local_rotations[None], np.array([[0.0, recorded.hips_height_m, 0.0]])
    )
    wanted = wanted.astype(np.float64)
    wanted[..., [0, 2]] = from_root_xz(wanted[..., [0, 2]], c.root_xz_m, c.root_yaw_rad)
    assert np.linalg.norm(c.display_pose()[0] - wanted, axis=-1).max() < 0.01


def test_transition_to_takes_a_mask_and_names_bad_shapes():
    c = Controller(MotionModel(MANN), count=2, transition_model=TransitionModel())
    with pytest.raises(ValueError, match=r"transition_to: at_xz_m must have shape \(2, 2\) for 2"):
        c.transition_to("sit", 20, at_xz_m=[[0, 0, 0]])
    with pytest.raises(ValueError, match=r"transition_to: characters as a mask must have shape"):
        c.transition_to("sit", 20, characters=np.array([True, False, True]))
    assert not c.in_transition().any()  # nothing half-started
    start = c.transition_to("sit", 20, characters=np.array([False, True]))
    assert start.characters.tolist() == [1]
    assert c.in_transition().tolist() == [False, True]


def test_postures_asked_while_moving_stop_first_then_start(tiny_rtn):
    """runtime/transition_requests.py: a still dog starts at once; a moving one is slowed to
    speed 0 over SLOW_DOWN_S (whatever the game asks meanwhile) and starts when it is slow
    enough or has waited MAX_STOP_S; bad requests fail at the call and leave nothing waiting."""
    from canis.runtime.transition_requests import MAX_STOP_S, SLOW_DOWN_S, PostureRequests

    c = controller(tiny_rtn, count=2)
    postures = PostureRequests(c)
    still = ControlState(np.zeros((2, 2)), np.zeros(2), np.zeros(2, dtype=int))
    for _ in range(20):
        c.step(still)
    started = postures.request("sit", 20, characters=[1], action="sit")
    assert len(started) == 1 and started[0].characters.tolist() == [1]
    assert not postures.waiting().any() and c.in_transition().tolist() == [False, True]

    move = ControlState(np.array([[0.0, 2.0]] * 2), np.zeros(2), np.ones(2, dtype=int))
    c = controller(tiny_rtn, count=2)
    postures = PostureRequests(c, stop_speed_mps=0.3)
    for _ in range(60):
        c.step(move)
    moving = np.linalg.norm(c.root_velocity_xz_mps, axis=1) > 0.3
    assert moving.all(), "the tiny model should move when asked for 2 m/s"
    with pytest.raises(ValueError, match="no keyframe 'sitt'"):
        postures.request("sitt", 20, characters=[0])
    with pytest.raises(ValueError, match="transition of 200 frames"):
        postures.request("sit", 200, characters=[0])
    assert not postures.waiting().any()
    assert postures.request("lie", 20, characters=[0]) == []
    own = np.linalg.norm(c.root_velocity_xz_mps[0])
    asked = postures.control(move)
    assert np.linalg.norm(asked.velocity_mps[0]) == pytest.approx(own)  # slowing from there
    assert asked.velocity_mps[1].tolist() == [0.0, 2.0]  # the other dog as asked
    frames, starts = 0, []
    while not starts:
        if frames == SLOW_DOWN_S * 60:
            asked = postures.control(move)
            assert asked.velocity_mps[0].tolist() == [0.0, 0.0] and asked.action[0] == 0
        starts = postures.step(move)
        frames += 1
    speed = np.linalg.norm(c.root_velocity_xz_mps[0])
    assert speed < 0.3 or frames >= MAX_STOP_S * 60
    assert starts[0].characters.tolist() == [0] and c.in_transition().tolist() == [True, False]
    postures.request("sit", 20, characters=[1])
    postures.cancel([1])
    assert not postures.waiting().any()


def test_a_posture_asked_with_a_variation_starts_sampled_and_replays_with_its_seed(tiny_rtn):
    """PostureRequests.request(variation=, seed=) passes both to transition_to when the dog
    has stopped; a bad variation, or one the transition model cannot sample, fails at the call
    and leaves nothing waiting."""
    from canis.runtime.transition_requests import PostureRequests

    noisy_rtn = Path(__file__).resolve().parent / "fixtures" / "tiny_rtn_noise_step.onnx"
    models = MotionModel(MANN), TransitionModel(noisy_rtn)
    move = ControlState(np.array([[0.0, 2.0]]), np.zeros(1), np.ones(1, dtype=int))

    def shown(seed):
        c = Controller(models[0], transition_model=models[1])
        postures = PostureRequests(c, stop_speed_mps=0.3)
        for _ in range(30):
            c.step(move)
        assert postures.request("lie", 20, variation=1.0, seed=seed) == []  # stops first
        frames = []
        while postures.waiting()[0] or c.in_transition()[0]:
            postures.step(move)
            frames.append(c.display_pose()[0][0])
        return np.array(frames)

    first, again, other = shown(5), shown(5), shown(6)
    assert np.array_equal(first, again) and not np.array_equal(first, other)
    postures = PostureRequests(controller(tiny_rtn, count=1))
    with pytest.raises(ValueError, match=r"request: variation must be a finite number .* got -1"):
        postures.request("sit", 20, variation=-1)
    with pytest.raises(ValueError, match="needs a transition model trained with target noise"):
        postures.request("sit", 20, variation=1.0)
    with pytest.raises(ValueError, match="request: seed"):
        postures.request("sit", 20, seed=-3)
    assert not postures.waiting().any() and not postures.controller.in_transition().any()


def test_train_rtn_refuses_a_network_of_no_units(tiny_transitions, tmp_path, capsys):
    from canis.cli import main

    out = tmp_path / "run"
    assert (
        main(["train-rtn", "--dataset", str(tiny_transitions), "--out", str(out), "--units", "0"])
        == 2
    )
    assert "--units 0: must be from 1 to 65536 units" in capsys.readouterr().err
    assert not out.exists()
    base = ["train-rtn", "--dataset", str(tiny_transitions), "--out", str(out)]
    for option, wanted in (
        (["--teacher-forcing", "2"], "--teacher-forcing 2: must be a probability, from 0 to 1"),
        (["--steps", "0"], "--steps 0: must be a whole number from 1 to 10^7"),
        (["--lr", "inf"], "--lr inf: must be a finite learning rate over 0"),
    ):
        assert main([*base, *option]) == 2
        err = capsys.readouterr().err
        assert wanted in err and len(err.splitlines()) == 1
    assert not out.exists()


def test_getting_up_is_measured_from_each_posture_and_its_worst_named(tiny_rtn, tiny_model):
    """The evaluation's getting-up table (the demo's way up from sit, lie and beg): a row per
    ground and posture, the frame counted from the hand-back, and the line tests/test_demo.py
    reads naming the largest row."""
    import re

    from canis.evaluation.handback import getting_up_markdown, getting_up_report

    report = getting_up_report(TransitionModel(tiny_rtn), tiny_model)
    rows = report["runs"]
    assert [(r["ground"], r["posture"]) for r in rows] == [
        (g, p) for g in ("flat", "hills") for p in ("sit", "lie", "beg")
    ]
    for r in rows:
        assert np.isfinite(r["cm_per_frame"]) and r["cm_per_frame"] >= 0
        assert r["where"] in ("lead", "RTN start", "playback", "target blend", "hand-back", "after")
        assert (r["where"] in ("hand-back", "after")) == (r["after_frame"] > 0)
    rows[4] = rows[4] | {"cm_per_frame": 99.5, "joint": "Tail1", "where": "after"}
    text = "\n".join(getting_up_markdown(report))
    found = re.search(r"Worst getting up: ([0-9.]+) cm/frame \(hills, lie -> stand, Tail1", text)
    assert found and float(found.group(1)) == 99.5


def test_export_refuses_the_wrong_checkpoint_or_out_before_writing(
    tiny_transitions, tmp_path, capsys
):
    """An RTN checkpoint given to `canis export` said "retrain on a dataset built with this
    version"; an --out that is a folder, or under a file, was a traceback after the work (and
    left a .partial behind). Each is one line naming it, and nothing is written."""
    from canis.training.train_rtn import LAST as RTN_LAST
    from canis.training.train_rtn import train_rtn
    from conftest import tiny_rtn_config

    from canis.cli import main

    run = tmp_path / "rtn"
    train_rtn(
        tiny_rtn_config(tiny_transitions, steps=1, eval_every=1, units=32), run, progress=False
    )
    checkpoint = str(run / RTN_LAST)
    a_file = tmp_path / "file"
    a_file.write_text("x")
    cases = [
        (
            ["export", checkpoint, "--out", str(tmp_path / "m.onnx")],
            "an RTN checkpoint; export it with `canis export-rtn`",
        ),
        (["export-rtn", checkpoint, "--out", str(tmp_path)], "is a folder"),
        (
            ["export-rtn", checkpoint, "--out", str(a_file / "x_step.onnx")],
            "is a file, not a folder",
        ),
        (["export-rtn", checkpoint, "--out", str(tmp_path / "x.onnx")], "<name>_step.onnx"),
        (["export", checkpoint, "--out", str(tmp_path / "m.txt")], "FILE.onnx"),
    ]
    before = sorted(tmp_path.rglob("*"))
    for args, message in cases:
        assert main(args) == 2, args
        err = capsys.readouterr().err
        assert message in err and len(err.splitlines()) == 1, err
    assert sorted(tmp_path.rglob("*")) == before


def test_a_run_stopped_before_its_first_checkpoint_says_nothing_was_written(
    tiny_transitions, tmp_path, capsys
):
    """`--stop-after 2` printed "done: ... (last.safetensors, best.safetensors, log.csv)" with
    nothing written (issue 62): the line names only what exists."""
    from canis.cli import main

    out = tmp_path / "run"
    args = ["train-rtn", "--dataset", str(tiny_transitions), "--out", str(out)]
    assert (
        main([*args, "--steps", "10", "--stop-after", "1", "--units", "16", "--batch-size", "4"])
        == 0
    )
    assert (
        capsys.readouterr()
        .out.strip()
        .endswith(f"nothing written to {out}: no epoch or step finished")
    )
    assert not (out / "last.safetensors").exists()

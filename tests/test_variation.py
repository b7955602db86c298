"""Varied transitions (issue 17 item 5): RMI's scheduled target noise in the RTN's step, its
training, export and runtime feed, and Controller.transition_to(variation=..., seed=...)."""

from pathlib import Path

import numpy as np
import pytest
import torch
from canis.runtime.controller import Controller
from canis.runtime.features import ACTIONS
from canis.runtime.inference import MotionModel
from canis.runtime.trajectory import ControlState
from canis.runtime.transition import TransitionModel
from canis.runtime.transition_frames import FRAME_SIZE
from canis.training.rtn import empty_rtn, rollout, target_noise_scale
from conftest import FIXTURES, tiny_rtn_config

MANN = Path(__file__).resolve().parent.parent / "assets" / "models" / "mann8.onnx"
NOISY_RTN = FIXTURES / "tiny_rtn_noise_step.onnx"


def test_the_noise_schedule_is_rmis():
    """RMI eq. 4: 1 from 30 frames to arrival, (tta - 5) / 25 between, 0 under 5."""
    tta = torch.tensor([[60.0], [30.0], [29.0], [17.5], [5.0], [4.0], [1.0]])
    expected = torch.tensor([[1.0], [1.0], [24 / 25], [0.5], [0.0], [0.0], [0.0]])
    torch.testing.assert_close(target_noise_scale(tta), expected)


def random_inputs(n=3, units=32, seed=0):
    g = torch.Generator().manual_seed(seed)
    frames = torch.randn(n, FRAME_SIZE, generator=g)
    yaw = torch.rand(n, 1, generator=g) * 6.0
    placements = torch.cat([torch.randn(n, 2, generator=g), yaw.sin(), yaw.cos()], dim=1)
    targets = torch.randn(n, FRAME_SIZE, generator=g)
    h, c = torch.randn(n, units, generator=g), torch.randn(n, units, generator=g)
    return frames, placements, targets, h, c


def test_zero_noise_is_the_step_without_noise_and_noise_fades_before_the_target():
    torch.manual_seed(0)
    model = empty_rtn(units=32, noise_sigma=0.5)
    for p in model.decoder[-1].parameters():  # not the zero start: corrections show noise
        torch.nn.init.normal_(p, std=0.1)
    frames, placements, targets, h, c = random_inputs()
    noise = torch.randn(3, model.noise_width)
    with torch.no_grad():
        for tta, changes in ((40.0, True), (20.0, True), (5.0, False), (2.0, False)):
            ones = torch.full((3, 1), tta)
            plain = model.step(frames, placements, targets, ones, h, c)
            zero = model.step(frames, placements, targets, ones, h, c, torch.zeros_like(noise))
            noisy = model.step(frames, placements, targets, ones, h, c, noise)
            for a, b in zip(plain, zero, strict=True):
                assert torch.equal(a, b)  # bit for bit
            differs = any(not torch.equal(a, b) for a, b in zip(plain, noisy, strict=True))
            assert differs == changes, tta


def test_a_model_without_noise_refuses_a_noise_sigma_that_is_not_a_number():
    with pytest.raises(ValueError, match="noise_sigma must be a finite number >= 0"):
        empty_rtn(units=32, noise_sigma=float("nan"))


def test_training_with_noise_resumes_and_exports_with_the_noise_input(tiny_transitions, tmp_path):
    """One z per window on the noisy run; the export gets `target_noise` and its parity is
    checked with noise on as well (runtime draws vs the torch rollout given the same z)."""
    from dataclasses import replace

    from canis.export.rtn_export import export_rtn
    from canis.training.train_rtn import LAST, train_rtn

    config = replace(tiny_rtn_config(tiny_transitions, units=32), target_noise=0.5)
    train_rtn(config, tmp_path / "run", progress=False, stop_after=2)
    train_rtn(config, tmp_path / "run", resume=True, progress=False)
    with pytest.raises(ValueError, match="resume with the same settings"):
        train_rtn(replace(config, target_noise=0.25), tmp_path / "run", resume=True)
    report = export_rtn(tmp_path / "run" / LAST, tmp_path / "v_step.onnx", tiny_transitions)
    assert {"real_30_noise", "random_60_noise"} <= set(report["rollout_max_abs_error"])
    assert max(report["rollout_max_abs_error"].values()) < 1e-3
    model = TransitionModel(tmp_path / "v_step.onnx")
    assert model.noise_width == 2 * 8  # the tiny RTN's target and offset codes, 8 each
    assert model.metadata["canis.target_noise_sigma"] == "0.5"


def test_the_shipped_rtn_is_rebuilt_from_its_onnx_graphs():
    """training/checkpoint_from_onnx.rtn_weights_from_onnx: the torch RTN made of an exported
    one's weights rolls out what the graphs do (the fine-tuning starts from the shipped RTN)."""
    from canis.training.checkpoint_from_onnx import rtn_weights_from_onnx

    model = empty_rtn(units=32)
    model.load_state_dict(rtn_weights_from_onnx(FIXTURES / "tiny_rtn_step.onnx", model))
    model.eval()
    rng = np.random.default_rng(0)
    mean, std = model.frame_mean.numpy(), model.frame_std.numpy()
    context = (mean + std * rng.normal(size=(2, 10, FRAME_SIZE))).astype(np.float32)
    placements = np.tile(np.float32([0.5, -1.0, 0.0, 1.0]), (2, 10, 1))
    target = (mean + std * rng.normal(size=(2, FRAME_SIZE))).astype(np.float32)
    got = TransitionModel(FIXTURES / "tiny_rtn_step.onnx").generate(context, placements, target, 20)
    with torch.no_grad():
        expected = rollout(model, *map(torch.as_tensor, (context, placements, target)), 20)
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, e.numpy(), atol=1e-4)
    with pytest.raises(ValueError, match=r"expected one \(64, 256\) hidden-gate matrix, found 0"):
        rtn_weights_from_onnx(FIXTURES / "tiny_rtn_step.onnx", empty_rtn(units=64))
    # The rotations residual has the interpolation residual's layers: it may start from it;
    # the paper's residual (no root corrections) may not.
    rotations = empty_rtn("rotations", units=32)
    rotations.load_state_dict(rtn_weights_from_onnx(FIXTURES / "tiny_rtn_step.onnx", rotations))
    with pytest.raises(ValueError, match="residual 'interpolation', whose layers are not those"):
        rtn_weights_from_onnx(FIXTURES / "tiny_rtn_step.onnx", empty_rtn("previous", units=32))


def request(seed=0):
    rng = np.random.default_rng(seed)
    model = TransitionModel(NOISY_RTN)
    context = rng.normal(size=(2, 10, FRAME_SIZE)).astype(np.float32) * 0.1
    placements = np.tile(np.float32([0.5, -1.0, 0.0, 1.0]), (2, 10, 1))
    target = rng.normal(size=(2, FRAME_SIZE)).astype(np.float32) * 0.1
    return model, (context, placements, target, 40)


def test_generate_samples_with_a_variation_and_reproduces_with_a_seed():
    model, args = request()
    default = model.generate(*args)
    zero = model.generate(*args, variation=0.0, rng=np.random.default_rng(5))
    for a, b in zip(default, zero, strict=True):
        assert np.array_equal(a, b)  # variation 0 is the deterministic transition
    one = model.generate(*args, variation=1.0, rng=np.random.default_rng(1))
    again = model.generate(*args, variation=1.0, rng=np.random.default_rng(1))
    other = model.generate(*args, variation=1.0, rng=np.random.default_rng(2))
    assert all(np.array_equal(a, b) for a, b in zip(one, again, strict=True))
    assert not np.array_equal(one[0], other[0]) and not np.array_equal(one[0], default[0])


def test_the_old_models_refuse_a_variation_naming_the_model(tiny_rtn):
    model, args = TransitionModel(tiny_rtn), request()[1]
    assert model.noise_width == 0
    model.generate(*args, variation=0.0)  # the default path is untouched
    with pytest.raises(ValueError, match=r"tiny_rtn_step.onnx has no 'target_noise' input") as e:
        model.generate(*args, variation=0.5)
    assert "\n" not in str(e.value) and str(e.value).startswith("variation 0.5 needs")


def played(controller_seed=None, **ask):
    """The displayed poses of two dogs over a transition asked from a trot."""
    c = Controller(
        MotionModel(MANN),
        count=2,
        transition_model=TransitionModel(NOISY_RTN),
        seed=controller_seed,
    )
    trot = ControlState(np.array([[0.0, 1.5]] * 2), np.zeros(2), np.full(2, ACTIONS.index("move")))
    for _ in range(30):
        c.step(trot)
    started = c.transition_to("sit", 30, **ask)
    poses = []
    for _ in range(started.frames):
        c.step(trot)
        poses.append(c.display_pose()[0].copy())
    assert not c.in_transition().any()
    return np.array(poses)


def test_transition_to_with_a_variation_samples_and_a_seed_reproduces():
    default = played()
    np.testing.assert_array_equal(played(variation=0.0), default)  # bit for bit
    one = played(variation=1.0, seed=1)
    np.testing.assert_array_equal(played(variation=1.0, seed=1), one)
    other = played(variation=1.0, seed=2)
    assert np.abs(one - other).max() > 1e-4 and np.abs(one - default).max() > 1e-4
    # Each dog draws its own noise: two dogs asked at once, from the same state, differ.
    assert np.abs(one[:, 0] - one[:, 1]).max() > 1e-4
    np.testing.assert_array_equal(played(7, variation=1.0), played(7, variation=1.0))
    # The noise fades to none before the target: every sample ends on the keyframe.
    np.testing.assert_allclose(one[-1], default[-1], atol=1e-4)


@pytest.mark.parametrize(
    "variation, shown",
    [(-0.5, "-0.5"), (float("nan"), "nan"), (float("inf"), "inf"), ("a lot", "'a lot'")],
)
def test_a_bad_variation_is_a_one_line_error_and_starts_nothing(variation, shown):
    c = Controller(MotionModel(MANN), transition_model=TransitionModel(NOISY_RTN))
    with pytest.raises(ValueError) as raised:
        c.transition_to("sit", 30, variation=variation)
    assert str(raised.value) == (
        f"transition_to: variation must be a finite number within [0, 1], got {shown}"
    )
    assert not c.in_transition().any()


def test_a_bad_seed_is_a_one_line_error():
    c = Controller(MotionModel(MANN), transition_model=TransitionModel(NOISY_RTN))
    with pytest.raises(ValueError, match=r"^transition_to: seed must be None or a whole number"):
        c.transition_to("sit", 30, variation=1.0, seed=-1)
    with pytest.raises(ValueError, match=r"^Controller: seed must be None or a whole number"):
        Controller(MotionModel(MANN), seed=1.5)
    assert not c.in_transition().any()


def test_variation_evaluation_measures_diversity(tiny_transitions, tmp_path):
    from canis.evaluation.variation import evaluate_variation, write

    results = evaluate_variation(NOISY_RTN, tiny_transitions, (0.0, 1.0), samples=3, stride=200)
    levels = results["levels"]
    assert all(v == 0 for v in levels["0"]["diversity_cm"].values())
    assert all(v > 0 for v in levels["1"]["diversity_cm"].values())
    doc = tmp_path / "RESULTS.md"
    write(results, None, doc, "./run canis evaluate variation", "this machine")
    assert "| 1 | " in doc.read_text() and "<!-- variation:begin -->" in doc.read_text()


def test_a_fine_tuned_rtns_card_names_its_start_even_once_the_start_is_overwritten(
    tiny_transitions, tiny_rtn, tmp_path
):
    """Fine-tuning the shipped RTN in place (--init-from assets/models/rtn_step.onnx, then
    exported over it) once made its card describe the new file as its own start: the card read
    the start when it was written. The run records it when it starts."""
    import shutil

    from canis.export.rtn_export import export_rtn, write_rtn_card
    from canis.runtime.transition import TransitionModel
    from canis.training.train_rtn import LAST, train_rtn

    start = tmp_path / "shipped_step.onnx"  # the tiny RTN: 40 steps
    shutil.copy(tiny_rtn, start)
    exported = TransitionModel(tiny_rtn).metadata["canis.exported"]
    shutil.copy(tiny_rtn.with_name("tiny_rtn_init.onnx"), tmp_path / "shipped_init.onnx")
    config = tiny_rtn_config(tiny_transitions, steps=3, eval_every=3, units=32)
    config.init_from = str(start)
    train_rtn(config, tmp_path / "tuned", progress=False)
    report = export_rtn(tmp_path / "tuned" / LAST, start)  # over its own start
    card = write_rtn_card(start, tmp_path / "tuned" / LAST, report, "test").read_text()
    assert f"(exported {exported}, 40 steps of its own schedule" in card

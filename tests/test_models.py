import math

import pytest
import torch
from canis.training.models import (
    MANN,
    PFNN,
    BlendedLinear,
    VanillaNetwork,
    catmull_rom_weights,
    create_model,
)


def test_blending_outputs_equals_blending_weights():
    torch.manual_seed(0)
    layer = BlendedLinear(480, 512, 8)
    x = torch.randn(16, 480)
    blend = torch.softmax(torch.randn(16, 8), dim=-1)
    fast = layer(x, blend)
    slow = layer.forward_blending_weights(x, blend)
    assert torch.allclose(fast, slow, atol=1e-5)
    # Blend weights that pick one set give exactly that set's plain linear layer.
    one_hot = torch.zeros(16, 8)
    one_hot[:, 3] = 1
    weights = layer.weight.view(480, 8, 512)[:, 3]
    assert torch.allclose(layer(x, one_hot), x @ weights + layer.bias[3], atol=1e-5)


def paper_catmull_rom(phase_rad: float, points: list[float]) -> float:
    """REFERENCE.md section 2's spline, transcribed as written: the value at the phase of a
    cyclic spline through `points` (4 scalars), for checking catmull_rom_weights' blend."""
    position = (phase_rad % (2 * math.pi)) * 4 / (2 * math.pi)
    k1 = int(position)
    mu = position - k1
    y0, y1, y2, y3 = (points[(k1 + i) % 4] for i in (-1, 0, 1, 2))
    return (
        y1
        + mu * (-0.5 * y0 + 0.5 * y2)
        + mu**2 * (y0 - 2.5 * y1 + 2 * y2 - 0.5 * y3)
        + mu**3 * (-0.5 * y0 + 1.5 * y1 - 1.5 * y2 + 0.5 * y3)
    )


def test_catmull_rom_weights_blend_as_the_papers_formula():
    """Between the control points too, and for phases outside [0, 2pi) (they wrap)."""
    generator = torch.Generator().manual_seed(3)
    points = torch.randn(4, generator=generator, dtype=torch.float64)
    phases = torch.cat(
        [
            torch.rand(200, generator=generator, dtype=torch.float64) * 6 * math.pi - 2 * math.pi,
            torch.tensor([0.0, math.pi / 2 - 1e-9, math.pi / 2, 2 * math.pi - 1e-9, -1e-9]),
        ]
    ).double()
    blended = catmull_rom_weights(phases) @ points
    expected = [paper_catmull_rom(float(p), points.tolist()) for p in phases]
    assert torch.allclose(blended, torch.tensor(expected, dtype=torch.float64), atol=1e-9)


def test_catmull_rom_weights_interpolate_the_control_points():
    phases = torch.tensor([0.0, math.pi / 2, math.pi, 3 * math.pi / 2])
    assert torch.allclose(catmull_rom_weights(phases), torch.eye(4), atol=1e-6)
    many = torch.linspace(0, 2 * math.pi, 401)
    weights = catmull_rom_weights(many)
    assert torch.allclose(weights.sum(1), torch.ones(401), atol=1e-5)  # affine blend
    # Continuous everywhere, including across 2pi -> 0.
    assert (weights[1:] - weights[:-1]).abs().max() < 0.05
    assert torch.allclose(weights[0], weights[-1], atol=1e-5)


def test_parameter_counts_match_the_paper():
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    mann8, mann4, pfnn, vnn = MANN(8), MANN(4), PFNN(), VanillaNetwork()
    assert count(mann8) * 4 / 1e6 == pytest.approx(22.3, abs=0.1)  # the paper's ~22 MB
    # The vanilla network matches MANN-4's hidden units (4 x 512), not its parameter count.
    assert vnn.layers[0].out_features == 4 * 512 and count(vnn) == 5_925_227
    assert count(pfnn) == pytest.approx(count(mann4), rel=0.01)


@pytest.mark.parametrize("kind", ["mann", "pfnn", "vnn"])
def test_one_training_step_reduces_the_loss(kind):
    torch.manual_seed(1)
    model = create_model(kind, experts=4)
    model.eval()  # no dropout, so the two losses compare the same function
    x, phase = torch.randn(64, 480), torch.rand(64) * 2 * math.pi
    target = torch.randn(64, 364 if kind == "pfnn" else 363)

    def loss():
        out = model(x, phase) if kind == "pfnn" else model(x)
        return torch.nn.functional.mse_loss(out[0] if isinstance(out, tuple) else out, target)

    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    before = loss()
    optimizer.zero_grad()
    before.backward()
    optimizer.step()
    assert loss().item() < before.item()


def test_unknown_kind_is_named():
    with pytest.raises(ValueError, match="unknown model kind 'gan'"):
        create_model("gan")

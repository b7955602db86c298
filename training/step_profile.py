"""Times one training step of a controller (forward, MSE, backward, AdamW) under the options
torch offers on CPU (issue 17 item 6), all in one process so the ratios are side by side:
`python -m canis.training.step_profile [--kind mann] [--batch 32] [--seconds 10]`.
Random standardised rows of the real shapes: the step's cost does not depend on the values.
bf16 autocast is also checked for quality: its loss and gradient on one batch against fp32."""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from canis.runtime.features import INPUT, OUTPUT
from canis.training.models import create_model
from canis.training.train import WEIGHT_DECAY, _predict
from torch import nn


def _step_fn(model, optimizer, kind: str, bf16: bool):
    def step(x, y, phase):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            prediction = _predict(model, kind, x, phase)
        loss = nn.functional.mse_loss(prediction.float(), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return loss

    return step


def samples_per_s(kind, batch, seconds, threads, fused=False, compiled=False, bf16=False):
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = create_model(kind, 8)
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=1e-4, weight_decay=WEIGHT_DECAY, fused=fused or None
    )
    step = _step_fn(model, optimizer, kind, bf16)
    if compiled:
        step = torch.compile(step)
    x, y = torch.randn(batch, INPUT.size), torch.randn(batch, OUTPUT.size + (kind == "pfnn"))
    phase = torch.rand(batch) * 6.28
    for _ in range(5):  # warm-up (and compilation)
        step(x, y, phase)
    times, end = [], time.perf_counter() + seconds
    while time.perf_counter() < end:
        started = time.perf_counter()
        step(x, y, phase)
        times.append(time.perf_counter() - started)
    return batch / statistics.median(times), len(times)


def bf16_error(kind: str, batch: int) -> tuple[float, float]:
    """(relative loss error, relative gradient-norm error) of bf16 autocast against fp32."""
    torch.manual_seed(0)
    model = create_model(kind, 8)
    x, y = torch.randn(batch, INPUT.size), torch.randn(batch, OUTPUT.size + (kind == "pfnn"))
    phase = torch.rand(batch) * 6.28
    results = []
    for bf16 in (False, True):
        model.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            prediction = _predict(model, kind, x, phase)
        loss = nn.functional.mse_loss(prediction.float(), y)
        loss.backward()
        grads = torch.cat([p.grad.reshape(-1) for p in model.parameters() if p.grad is not None])
        results.append((loss.item(), grads))
    (loss32, g32), (loss16, g16) = results
    return abs(loss16 - loss32) / loss32, ((g16 - g32).norm() / g32.norm()).item()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m canis.training.step_profile")
    parser.add_argument("--kind", default="mann")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args(argv)
    variants = [
        ("baseline (1 thread, AdamW foreach)", dict(threads=1)),
        (f"{args.threads} threads", dict(threads=args.threads)),
        (f"{args.threads} threads + fused AdamW", dict(threads=args.threads, fused=True)),
        (
            f"{args.threads} threads + fused + bf16 autocast",
            dict(threads=args.threads, fused=True, bf16=True),
        ),
        (
            f"{args.threads} threads + fused + torch.compile",
            dict(threads=args.threads, fused=True, compiled=True),
        ),
    ]
    print(
        f"{args.kind} batch {args.batch}, torch {torch.__version__}, median of {args.seconds}s each"
    )
    for name, options in variants:
        try:
            rate, steps = samples_per_s(args.kind, args.batch, args.seconds, **options)
            print(f"| {name} | {rate:.0f} samples/s | {steps} steps |", flush=True)
        except Exception as error:  # noqa: BLE001 - a variant torch cannot run here is reported
            print(f"| {name} | failed: {type(error).__name__}: {str(error)[:120]} |", flush=True)
    loss_error, grad_error = bf16_error(args.kind, args.batch)
    print(
        f"bf16 autocast vs fp32 on one batch: loss {loss_error:.2e} relative, "
        f"gradient {grad_error:.2e} relative"
    )


if __name__ == "__main__":
    main()

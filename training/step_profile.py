"""Times one training step (forward, loss, backward, optimiser) of a controller or of the RTN
under the options torch offers on CPU (issue 17 item 6), all in one process and alternated
(blocks of a few steps of each variant in turn, tools/benchmark.time_alternating), so the
ratios hold on a loaded machine:

    python -m canis.training.step_profile [--kind mann|pfnn|vnn|rtn] [--batch 128]
        [--rounds 20] [--compile-limit-s 300] [--profile]

Controllers train on random standardised rows of the real shapes (the step's cost does not
depend on the values); the RTN on windows of data/dog_transitions.npz (its step length does).
Reports, per variant, the median and p99 step time and samples/s (batch / median). bf16
autocast is also checked for quality: its loss and gradient on one batch against fp32.
`--profile` prints torch.profiler's operator table of the default step instead.
"""

from __future__ import annotations

import argparse
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from canis.runtime.features import INPUT, OUTPUT
from canis.tools.benchmark import time_alternating
from canis.training.models import BlendedLinear, create_model
from canis.training.precision import autocast, describe_cpu
from canis.training.train import WEIGHT_DECAY, _predict
from torch import nn
from torch.profiler import record_function

BLOCK = 4  # steps of one variant in a row; the first, after another variant's, not counted


@dataclass
class TrainingStep:
    run: Callable[[], torch.Tensor]  # one step; returns the loss
    model: nn.Module
    optimizer: torch.optim.Optimizer


@dataclass(frozen=True)
class Variant:
    name: str
    threads: int = 2
    fused: bool = True
    precision: str = "fp32"
    blend: str = "sum"  # "sum": BlendedLinear's broadcast multiply and sum; "bmm": one bmm
    compiled: bool = False


def _blend_by_bmm(layer: BlendedLinear, x: torch.Tensor, blend: torch.Tensor) -> torch.Tensor:
    """BlendedLinear.forward with the blend as a batched (1, sets) x (sets, outputs) matmul:
    measured against the broadcast multiply and sum (no faster here, so not adopted)."""
    per_set = (x @ layer.weight).view(-1, layer.sets, layer.outputs) + layer.bias
    return torch.bmm(blend.unsqueeze(1), per_set).squeeze(1)


def _use_blend(model: nn.Module, blend: str) -> None:
    for layer in model.modules():
        if isinstance(layer, BlendedLinear) and blend == "bmm":
            layer.forward = lambda x, w, layer=layer: _blend_by_bmm(layer, x, w)


def controller_step(kind: str, batch: int, variant: Variant, seed: int = 0):
    """A closure doing one training step as training/train.py does, on fixed random rows."""
    torch.manual_seed(seed)
    model = create_model(kind, 8)
    _use_blend(model, variant.blend)
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=1e-4, weight_decay=WEIGHT_DECAY, fused=variant.fused or None
    )
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, INPUT.size, generator=generator)
    y = torch.randn(batch, OUTPUT.size + (kind == "pfnn"), generator=generator)
    phase = torch.rand(batch, generator=generator) * 2 * np.pi
    forward = torch.compile(_predict, dynamic=False) if variant.compiled else _predict

    def step():
        with record_function("forward"), autocast(variant.precision, torch.device("cpu")):
            prediction = forward(model, kind, x, phase)
        loss = nn.functional.mse_loss(prediction.float(), y)
        with record_function("backward"):
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
        with record_function("optimizer"):
            optimizer.step()
        return loss

    return TrainingStep(step, model, optimizer)


def rtn_step(batch: int, variant: Variant, seed: int = 0, dataset="data/dog_transitions.npz"):
    """A closure doing one step of training/train_rtn.py on a fixed 30-frame window batch."""
    from canis.training.rtn import rollout
    from canis.training.train_rtn import create_rtn, losses, skeleton_tensors, windows
    from canis.training.transition_data import load as load_transitions

    data = load_transitions(dataset)
    model = create_rtn(data, seed, "interpolation")
    optimizer = torch.optim.Adam(
        model.parameters(), lr=5e-4, amsgrad=True, fused=variant.fused or None
    )
    skeleton = skeleton_tensors()
    length = 30
    rng = np.random.default_rng(seed)
    starts = rng.choice(data.window_starts(data.clips(validation=False), length), size=batch)
    context, context_placements, target, truth = windows(data, starts, length)

    def step():
        generator = torch.Generator().manual_seed(seed)
        with record_function("forward"), autocast(variant.precision, torch.device("cpu")):
            predicted = rollout(
                model, context, context_placements, target, length, truth, 0.2, generator
            )
        predicted = tuple(p.float() for p in predicted)
        terms = losses(model, predicted, truth, 0.5, skeleton)
        with record_function("backward"):
            optimizer.zero_grad(set_to_none=True)
            terms["total"].backward()
        with record_function("optimizer"):
            optimizer.step()
        return terms["total"]

    return TrainingStep(step, model, optimizer)


def make_step(kind: str, batch: int, variant: Variant) -> TrainingStep:
    if kind == "rtn":
        return rtn_step(batch, variant)
    return controller_step(kind, batch, variant)


class _CompileTimeout(Exception):
    pass


def _warm(step: Callable, limit_s: float) -> float:
    """Runs the first steps (compilation happens here); seconds taken, or _CompileTimeout."""

    def expire(*_):
        raise _CompileTimeout

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(max(1, int(limit_s)))
    started = time.perf_counter()
    try:
        for _ in range(3):
            step()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    return time.perf_counter() - started


def bf16_error(kind: str, batch: int, trained_steps: int = 10) -> tuple[float, float]:
    """(relative loss error, relative gradient error) of bf16 autocast against fp32 on one
    batch from the same weights, after `trained_steps` fp32 steps (the untrained RTN's decoder
    outputs zeros, the same in both precisions), with dropout off so both see one function."""
    fp32 = make_step(kind, batch, Variant("fp32"))
    bf16 = make_step(kind, batch, Variant("bf16", precision="bf16"))
    for _ in range(trained_steps):
        fp32.run()
    bf16.model.load_state_dict(fp32.model.state_dict())
    results = []
    for step in (fp32, bf16):
        step.model.eval()
        step.optimizer.step = lambda: None  # the gradient is measured, not applied
        loss = step.run().item()
        grads = [p.grad.reshape(-1) for p in step.model.parameters() if p.grad is not None]
        results.append((loss, torch.cat(grads)))
    (loss32, g32), (loss16, g16) = results
    return abs(loss16 - loss32) / loss32, ((g16 - g32).norm() / g32.norm()).item()


def variants_for(threads: int, compile_too: bool, one_thread_too: bool = True) -> list[Variant]:
    """Each change against the one before, at `threads` threads and at 1 (a loaded machine)."""
    chosen = []
    for count in dict.fromkeys((threads, 1) if one_thread_too else (threads,)):
        chosen += [
            Variant(f"before: AdamW for-loop, {count} th", count, fused=False),
            Variant(f"fused AdamW, {count} th", count),
            Variant(f"fused AdamW + bmm blend (not adopted), {count} th", count, blend="bmm"),
            Variant(f"fused AdamW + bf16 autocast, {count} th", count, precision="bf16"),
        ]
    if compile_too:
        chosen.append(Variant("fused AdamW + torch.compile, 1 th", 1, compiled=True))
    return chosen


def profile_table(kind: str, batch: int, variant: Variant, steps: int = 20) -> str:
    from torch.profiler import ProfilerActivity, profile

    step = make_step(kind, batch, variant).run
    for _ in range(3):
        step()
    with profile(activities=[ProfilerActivity.CPU]) as profiler:
        for _ in range(steps):
            step()
    return profiler.key_averages().table(sort_by="cpu_time_total", row_limit=30)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m canis.training.step_profile")
    parser.add_argument("--kind", choices=("mann", "pfnn", "vnn", "rtn"), default="mann")
    parser.add_argument("--batch", type=int, default=128, help="the cpu schedule's (RTN: 64)")
    parser.add_argument(
        "--rounds", type=int, default=20, help=f"blocks of {BLOCK} steps of each variant in turn"
    )
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument(
        "--compile-limit-s",
        type=float,
        default=0.0,
        help="also time torch.compile, giving its compilation this long (0: skip it)",
    )
    parser.add_argument(
        "--only-threads",
        action="store_true",
        help="time only at --threads (no 1-thread variants, so the process never switches)",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="print torch.profiler's operator table of --rounds steps before and after",
    )
    args = parser.parse_args(argv)
    print(f"{args.kind} batch {args.batch}, torch {torch.__version__}, {describe_cpu()}")
    torch.set_num_threads(args.threads)
    if args.profile:
        for variant in (
            Variant("before: AdamW for-loop", args.threads, fused=False),
            Variant("fused AdamW", args.threads),
            Variant("fused AdamW + bf16 autocast", args.threads, precision="bf16"),
        ):
            print(f"-- {variant.name} --")
            print(profile_table(args.kind, args.batch, variant, args.rounds))
        return
    variants = variants_for(args.threads, args.compile_limit_s > 0, not args.only_threads)
    if args.kind in ("vnn", "rtn"):  # no blended layers
        variants = [v for v in variants if v.blend == "sum"]
    steps, threads = {}, {}
    for variant in variants:
        torch.set_num_threads(variant.threads)
        step = make_step(args.kind, args.batch, variant).run
        try:
            warm_s = _warm(step, args.compile_limit_s if variant.compiled else 600)
        except _CompileTimeout:
            print(
                f"| {variant.name} | still compiling after {args.compile_limit_s:.0f} s: left out |"
            )
            continue
        except Exception as error:  # noqa: BLE001 - a variant torch cannot run here is reported
            print(f"| {variant.name} | failed: {type(error).__name__}: {str(error)[:160]} |")
            continue
        if variant.compiled:
            print(f"torch.compile: first 3 steps (compilation) took {warm_s:.1f} s", flush=True)
        steps[variant.name], threads[variant.name] = step, variant.threads
    load_before = _load()
    calls = {name: _with_threads(step, threads[name]) for name, step in steps.items()}
    timings = time_alternating(calls, args.rounds, block=BLOCK, warmup=1)
    print(f"load average {load_before} before, {_load()} after")
    print("| variant | median step ms | p99 step ms | samples/s (median) | steps |")
    print("|---|---|---|---|---|")
    for name, timing in timings.items():
        median, p99 = timing["p50_ms"], timing["p99_ms"]
        print(
            f"| {name} | {median:.1f} | {p99:.1f} | {args.batch / median * 1e3:.0f} "
            f"| {timing['calls']} |"
        )
    torch.set_num_threads(args.threads)
    loss_error, grad_error = bf16_error(args.kind, args.batch)
    print(
        f"bf16 autocast vs fp32 on one batch: loss {loss_error:.2e} relative, "
        f"gradient {grad_error:.2e} relative"
    )


def _with_threads(step: Callable, threads: int) -> Callable:
    def call():
        torch.set_num_threads(threads)  # each variant's own count (a no-op within a block)
        step()

    return call


def _load() -> str:
    with open("/proc/loadavg") as file:
        return " ".join(file.read().split()[:3])


if __name__ == "__main__":
    main()

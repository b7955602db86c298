"""`canis evaluate precision`: the quality gate that decides which precision of a motion model
ships. Each variant of one fp32 export (fp16 and int8 by export/precision.py) is driven in
closed loop exactly as the controller evaluation and the model card drive it, beside fp32, and
every figure is compared:

- foot skating, all and back legs, in the walk, canter and turn scenarios (lower is better);
- leg stiffness in the same scenarios (closer to the mocap's is better);
- mean speed reached in each scenario and at each gait speed (closer to the asked is better);
- path deviation on the four shipped paths, cm and degrees (lower is better);
- the gait verdict at each of the paper's speeds (the same, or the mocap's gait there);
- the card's closed-loop check: each run finite, its speed (tracked and untracked) and its
  lowest hips, and the check's overall verdict.

Runs are deterministic, yet one run of each file is one sample: a closed loop can carry a small
change of the outputs into a different trajectory, and some of the figures answer such a change
by far more than the tolerance. (Nudged to move its outputs as far as int8's conversion does,
the recipe's fp32 MANN-8 measured its walk's skating between 0.147 and 0.277 cm/frame and the
star path's error between 2.5 and 4.5 cm, where its file alone measured 0.147 and 3.9.) So each
side is measured from several starts: the fp32 file and `nudges` copies of it whose weight
matrices are nudged by a relative NUDGE_RELATIVE (seeded), each variant made from each of them.
The nudge moves the outputs about as far as int8's conversion does (the report gives both), so
the spread of fp32's starts is how far the closed loop moves for a change of that size, and
that of a variant's starts is its conversion's as well.

A figure passes when the variant's mean over its starts is within TOLERANCE of fp32's mean or
better, or when the two means differ by no more than the loops' noise: NOISE_MULTIPLE standard
errors of the difference, from each side's spread over its starts (a difference a change of
that size makes by chance is not the variant's). A verdict (a gait, a check's pass) passes when
every start's is one of fp32's starts' or better. The default to ship is the fastest variant
(inference at batch 1, one thread, timed side by side) whose every figure passes.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
import time
from pathlib import Path

import numpy as np
from canis.evaluation.controllers import (
    SCENARIOS,
    gait_emergence,
    ground_truth,
    load_clips,
    path_following,
    scenario_quality,
)
from canis.export.closed_loop import closed_loop_report
from canis.runtime.inference import MotionModel
from canis.runtime.skeleton import Skeleton, shipped_dog_skeleton_path

TOLERANCE = 0.05
VARIANTS = ("fp32", "fp16", "int8")
NUDGES = 4  # nudged fp32 copies: each side is measured from 1 + NUDGES starts
# Each weight matrix's entries times (1 + NUDGE_RELATIVE * N(0, 1)): the recipe's MANN-8's
# outputs then move 3.2e-3 of their standard deviation on average, its int8 file's 2.6e-3
# (export/precision.py's motion_parity; the report measures it for each file). 1e-5 moves them
# 3.2e-6, a thousandth of int8's, too little to show the loop's answer to int8's size of change.
NUDGE_RELATIVE = 1e-2
# A mean differing from fp32's by more than this many standard errors of the difference is the
# variant's (about 95% where the loops' spreads are normal).
NOISE_MULTIPLE = 2.0


def nudged_copy(source: Path, seed: int, out: Path, relative: float = NUDGE_RELATIVE) -> Path:
    """`source` (fp32 ONNX) with every weight matrix's entries scaled by (1 + `relative` x a
    standard normal draw, seeded), metadata kept: a network whose outputs differ about as much
    as int8's at the default nudge, and a different closed loop. Vectors (biases, the
    standardisation) are left as they are."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(source))
    rng = np.random.default_rng(seed)
    for tensor in model.graph.initializer:
        weights = numpy_helper.to_array(tensor)
        if weights.dtype == np.float32 and weights.ndim >= 2:
            scale = 1 + relative * rng.standard_normal(weights.shape)
            tensor.CopyFrom(
                numpy_helper.from_array((weights * scale).astype(np.float32), tensor.name)
            )
    entry = model.metadata_props.add()
    entry.key, entry.value = "canis.nudged", f"relative {relative:g}, seed {seed}"
    onnx.save(model, str(out))
    return out


def make_variant(source: Path, name: str, folder: Path) -> Path:
    from canis.export.precision import convert_motion_model

    out = folder / f"{source.stem}.{name}.onnx"
    convert_motion_model(source, out, name)
    return out


def measure(path: Path, skeleton: Skeleton, commands: dict, card_seconds: float) -> dict:
    """Every figure the gate compares, for one model file."""
    started = time.perf_counter()
    model = MotionModel(path, device="cpu")
    quality = scenario_quality(model, skeleton, commands)
    verdicts, _ = gait_emergence(model, skeleton)
    return {
        "file": path.name,
        "bytes": path.stat().st_size,
        "quality": {k: v for k, v in quality.items() if k != "steps"},
        "paths": path_following(path),
        "gaits": verdicts,
        "closed_loop": closed_loop_report(path, seconds=card_seconds),
        "measure_seconds": round(time.perf_counter() - started, 1),
    }


def time_inference(paths: dict[str, Path]) -> dict[str, dict]:
    """Batch-1 inference through the runtime (`run_bound`, as the controller calls it) on one
    thread, the variants timed side by side in alternating blocks (evaluation/benchmark.py)."""
    from canis.evaluation.benchmark import time_alternating

    calls = {}
    rng = np.random.default_rng(0)
    for name, path in paths.items():
        model = MotionModel(path, device="cpu", threads=1)
        buffers = model.bind(1)
        buffers.inputs["x"][0] = rng.normal(size=480)
        calls[name] = lambda model=model, buffers=buffers: model.run_bound(buffers)
    return time_alternating(calls)


def _cache_file(
    cache_dir: Path | None, source: Path, name: str, card_seconds: float, relative: float
):
    if cache_dir is None:
        return None
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    # A nudged start is named by how far it was nudged: another nudge is another file.
    nudged = f".r{relative:g}" if "nudge" in name else ""
    return cache_dir / f"{source.stem}.{digest}.{name}{nudged}.card{card_seconds:g}s.json"


def _plain(value):
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON")


def _lower(value, reference, noise: float = 0.0) -> bool:
    return value <= reference * (1 + TOLERANCE) or value - reference <= noise


def _closer(value, reference, target, noise: float = 0.0) -> bool:
    near = abs(value - reference) <= max(TOLERANCE * abs(reference), noise)
    return near or abs(value - target) <= abs(reference - target)


def loop_noise(reference: list[float], values: list[float]) -> float:
    """NOISE_MULTIPLE standard errors of the difference between the two sides' means (Welch's),
    from each side's spread over its starts; 0 where a side has one start (nothing measured)."""
    if len(reference) < 2 or len(values) < 2:
        return 0.0
    variance = np.var(reference, ddof=1) / len(reference) + np.var(values, ddof=1) / len(values)
    return float(NOISE_MULTIPLE * np.sqrt(variance))


def figures(entry: dict, truth: dict, commands: dict) -> list[tuple]:
    """(name, value, rule, target) of every figure the gate compares; rule is 'lower',
    'closer' (to target) or 'same'."""
    q, rows = entry["quality"], []
    for s in SCENARIOS:
        for key in ("skating_cm", "skating_back_cm"):
            rows.append((f"{key} {s}", q[key][s], "lower", None))
        for key in ("stiffness_deg", "stiffness_back_deg"):
            rows.append((f"{key} {s}", q[key][s], "closer", truth[key][s]))
        rows.append((f"speed m/s {s}", q["mean_speed_mps"][s], "closer", commands[s]["speed_mps"]))
        rows.append((f"finite {s}", q["finite"][s], "same", None))
    for path, cm in entry["paths"]["path_cm"].items():
        rows.append((f"path cm {path}", cm, "lower", None))
        rows.append((f"path deg {path}", entry["paths"]["path_deg"][path], "lower", None))
    for speed, g in entry["gaits"].items():
        mocap = truth.get("gaits", {}).get(speed, {}).get("verdict")
        rows.append((f"gait at {speed} m/s", g["verdict"], "same", mocap))
        rows.append((f"gait speed m/s at {speed}", g["mean_speed_mps"], "closer", float(speed)))
    loop = entry["closed_loop"]
    for r in loop["runs"]:
        run = f"card {r['commanded_mps']} m/s{' turning' if r['turn_rate_degps'] else ''}"
        rows.append((f"{run} finite", r["finite"], "same", None))
        rows.append((f"{run} speed m/s", r["mean_speed_mps"], "closer", r["commanded_mps"]))
        raw = r["untracked"]["mean_speed_mps"]
        rows.append((f"{run} untracked speed m/s", raw, "closer", r["commanded_mps"]))
        rows.append((f"{run} min hips m", r["min_hips_height_m"], "closer", np.inf))
    rows.append(("card check passed", loop["passed"], "same", None))
    return rows


def _shown(values: list):
    """One cell for a figure over the starts: the mean of numbers, or the verdicts seen."""
    if all(isinstance(v, bool) for v in values) or any(isinstance(v, str) for v in values):
        seen = list(dict.fromkeys(values))
        return seen[0] if len(seen) == 1 else "/".join(str(v) for v in seen)
    return float(np.mean(values))


def compare(
    reference: list[dict], candidate: list[dict], truth: dict, commands: dict
) -> list[dict]:
    """Each figure of the candidate beside fp32's, and whether it passes: `reference` and
    `candidate` are the measured starts of each (one or more entries of `measure`)."""
    rows_fp32 = [figures(entry, truth, commands) for entry in reference]
    rows_variant = [figures(entry, truth, commands) for entry in candidate]
    out = []
    for i, (name, _, rule, target) in enumerate(rows_fp32[0]):
        refs = [rows[i][1] for rows in rows_fp32]
        values = [rows[i][1] for rows in rows_variant]
        if rule == "same":  # or better: true where fp32 is false, the mocap's gait
            passed = all(v in refs or v == target or (isinstance(v, bool) and v) for v in values)
        else:
            ref, value = float(np.mean(refs)), float(np.mean(values))
            noise = loop_noise(refs, values)
            if rule == "lower":
                passed = bool(_lower(value, ref, noise))
            elif target == np.inf:  # higher is better
                passed = bool(value >= ref * (1 - TOLERANCE) or ref - value <= noise)
            else:
                passed = bool(_closer(value, ref, target, noise))
        row = {"figure": name, "fp32": _shown(refs), "value": _shown(values), "rule": rule}
        if rule != "same":
            row["fp32_range"] = [float(min(refs)), float(max(refs))]
            row["range"] = [float(min(values)), float(max(values))]
            row["noise"] = noise
        out.append(row | {"passed": bool(passed)})
    return out


def evaluate(
    source: Path,
    mocap_dir: Path,
    variants=VARIANTS,
    card_seconds: float = 20.0,
    keep_dir: Path | None = None,
    progress: bool = True,
    cache_dir: Path | None = None,
    nudges: int = NUDGES,
    nudge_relative: float = NUDGE_RELATIVE,
) -> dict:
    """Every variant measured from 1 + `nudges` starts (copies nudged by `nudge_relative`) and
    compared with fp32. With cache_dir,
    each start's figures are kept there (named by the source file's hash, the variant, the
    start and the card's seconds) and reused, so the variants can be measured by separate,
    shorter runs."""
    from canis.export.precision import motion_parity

    started = time.perf_counter()
    skeleton = Skeleton.from_json(shipped_dog_skeleton_path())
    truth = ground_truth(load_clips(mocap_dir, progress))
    commands = truth["commands"]
    with tempfile.TemporaryDirectory() as tmp:
        folder = keep_dir or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        starts = [source] + [
            nudged_copy(source, k, folder / f"{source.stem}.nudge{k}.onnx", nudge_relative)
            for k in range(1, nudges + 1)
        ]
        paths = {
            v: [s if v == "fp32" else make_variant(s, v, folder) for s in starts]
            for v in dict.fromkeys(["fp32", *variants])
        }
        timing = time_inference({v: files[0] for v, files in paths.items()})
        entries = {}
        for name, files in paths.items():
            measured = []
            for k, path in enumerate(files):
                label = name if k == 0 else f"{name}.nudge{k}"
                cached = _cache_file(cache_dir, source, label, card_seconds, nudge_relative)
                if cached is not None and cached.is_file():
                    entry = json.loads(cached.read_text())
                    if "output_error" not in entry:  # kept before the gate measured it
                        entry["output_error"] = motion_parity(source, path)
                    measured.append(entry)
                    continue
                if progress:
                    print(f"[{label}] closed loop", flush=True)
                entry = measure(path, skeleton, commands, card_seconds)
                entry["output_error"] = motion_parity(source, path)
                measured.append(entry)
                if cached is not None:
                    cached.parent.mkdir(parents=True, exist_ok=True)
                    cached.write_text(json.dumps(entry, default=_plain))
            entries[name] = measured[0] | {"starts": measured, "inference": timing[name]}
    for entry in entries.values():
        rows = compare(entries["fp32"]["starts"], entry["starts"], truth["quality"], commands)
        entry["gate"] = rows
        entry["passed"] = all(r["passed"] for r in rows)
    passing = [n for n, e in entries.items() if e["passed"]]
    default = min(passing, key=lambda n: entries[n]["inference"]["p50_ms"])
    return {
        "source": str(source),
        "variants": entries,
        "default": default,
        "setup": {
            "tolerance": TOLERANCE,
            "card_seconds": card_seconds,
            "nudges": nudges,
            "nudge_relative": nudge_relative,
            "noise_multiple": NOISE_MULTIPLE,
            "commands": commands,
            "seconds": round(time.perf_counter() - started, 1),
        },
    }


def markdown(results: dict, command: str, machine: str) -> str:
    from canis.export.precision import PARITY_ROWS

    entries, setup = results["variants"], results["setup"]
    names = list(entries)
    fp32 = entries["fp32"]
    lines = [
        "## Precision (the quality gate for reduced-precision models)",
        "",
        f"Reproduce: `{command}` ({_seconds(results)} on {machine}). Each variant of "
        f"`{Path(results['source']).name}` is driven in closed loop as the controller "
        "evaluation above and the model card drive it: the three scenarios (23 s each), one "
        "lap of each path, 10 s at each gait speed, and the card's check (forward and turning "
        f"at each paper speed, tracked and untracked) at {setup['card_seconds']:.0f} s per run "
        f"instead of the card's 60 s. {_starts(setup)} A figure passes when its mean over the "
        f"starts is within {setup['tolerance']:.0%} of fp32's or better (lower skating and path "
        "deviation; stiffness closer to the mocap's; speed closer to the asked; hips no lower) "
        f"or differs from fp32's by no more than the loops' noise ({_multiple(setup)} standard "
        "errors of the difference, from both sides' spreads over their starts), "
        "a verdict when every start's is one of fp32's or better (a gait verdict or the "
        "mocap's; the check's results). The default to ship is the "
        "fastest variant that passes every figure. Variants: fp16 and int8 by ONNX Runtime's "
        "tools (export/precision.py; int8 keeps the small gating network in float32).",
        "",
        "| variant | file MB | output error (std) | inference p50 ms | p99 ms | "
        "speed-up over fp32 | figures passed | verdict |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name in names:
        e = entries[name]
        passed = sum(r["passed"] for r in e["gate"])
        lines.append(
            f"| {name} | {e['bytes'] / 1e6:.1f} | {_output_error(e)} | "
            f"{e['inference']['p50_ms']:.3f} | "
            f"{e['inference']['p99_ms']:.3f} | "
            f"{fp32['inference']['p50_ms'] / e['inference']['p50_ms']:.2f}x | "
            f"{passed} of {len(e['gate'])} | " + _verdict(name, e, results["default"]) + " |"
        )
    lines += [
        "",
        "Inference: batch 1, one thread, through the runtime (`MotionModel.run_bound`), the "
        "variants timed side by side in one process in alternating blocks of 50 calls, while "
        "this gate's closed loops ran: the speed-up column is this run's, under its load. The one "
        "int8 speed-up the docs quote is docs/RESULTS.md, *int8 against fp32*. Output error: "
        f"the mean |difference| of y from the fp32 file's over {PARITY_ROWS} random standardised "
        "inputs, in y's standard deviations (export/precision.py's `motion_parity`), the "
        "largest over the starts.",
        "",
        _noise(entries),
        "",
        "Every figure beside fp32's, means over the starts (a cross marks one outside the "
        "gate; fp32's range is its starts' lowest and highest):",
        "",
        f"| figure | fp32 range | {' | '.join(names)} |",
        "|---" * (len(names) + 2) + "|",
    ]
    for i, row in enumerate(fp32["gate"]):
        low, high = row.get("fp32_range", (None, None))
        cells = ["" if low is None else f"{_cell(low)}-{_cell(high)}"]
        for name in names:
            r = entries[name]["gate"][i]
            cells.append(_cell(r["value"]) + ("" if r["passed"] else " ✗"))
        lines.append(f"| {row['figure']} | {' | '.join(cells)} |")
    return "\n".join(lines) + "\n\n"


def _multiple(setup: dict) -> str:
    return f"{setup.get('noise_multiple', NOISE_MULTIPLE):g}"


def _starts(setup: dict) -> str:
    if not setup["nudges"]:
        return "Each is measured from its own file alone."
    return (
        f"Each is measured from {1 + setup['nudges']} starts: made from the fp32 file and from "
        f"{setup['nudges']} copies of it with every weight matrix's entries nudged by a "
        f"relative {setup['nudge_relative']:g} (seeded; evaluation/precision_gate.py): fp32's "
        "starts measure how far the closed loop moves for a change of the outputs that size "
        "(output error below), a variant's add how its conversion rounds each start."
    )


def _output_error(entry: dict) -> str:
    errors = [s["output_error"]["y_mean_error_std"] for s in entry["starts"]]
    return f"{max(errors):.1e}"


def _noise(entries: dict) -> str:
    """How far each variant's starts measured apart: its widest skating figure, relative to the
    figure's mean (fp32's is the loop's own noise)."""
    parts = []
    for name, entry in entries.items():
        spreads = {
            r["figure"]: (r["range"][1] - r["range"][0]) / abs(r["value"])
            for r in entry["gate"]
            if r["figure"].startswith("skating") and r["value"]
        }
        if len(entry["starts"]) > 1 and spreads:
            widest = max(spreads, key=spreads.get)
            parts.append(f"{name} {spreads[widest]:.1%} ({widest})")
    if not parts:
        return "Each variant was measured from one start: the gate's noise is not measured."
    return (
        "How far each variant's starts measured apart, its widest skating figure relative to "
        "its mean: " + ", ".join(parts) + "."
    )


def _seconds(results: dict) -> str:
    """How long the measuring took: the closed-loop runs of each start of each variant,
    wherever they ran (a cached one's in an earlier run), and this run's own time."""
    loops = sum(
        s.get("measure_seconds", 0.0) for e in results["variants"].values() for s in e["starts"]
    )
    return f"closed loops {loops:.0f} s, this run {results['setup']['seconds']:.0f} s in all"


def _verdict(name: str, entry: dict, default: str) -> str:
    if name == default:
        return "**default**"
    return "passes" if entry["passed"] else "fails"


def _cell(value) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str):
        return value
    return f"{value:.3f}"


def write(results: dict, json_path: Path | None, doc: Path | None, command: str, machine: str):
    from canis.evaluation.doc_sections import replace_section

    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(results, indent=1, default=_plain) + "\n")
    if doc is not None:
        replace_section(doc, "precision", markdown(results, command, machine))

"""The Markdown report and JSON of `canis evaluate controllers` (docs/RESULTS.md, its
controllers section), from the figures evaluation/controllers.py measures."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from canis.evaluation.controllers import (
    ABLATION_TURN_DEGPS,
    ABLATION_TURN_SPEED_MPS,
    BROKEN,
    COURSE_BAR_DEG,
    GT_SPEED_BAND_MPS,
    JUMP_HOLD_S,
    JUMP_RUN_MPS,
    PATHS,
    PROFILE_WINDOW_S,
    SCENARIOS,
    SKATING_WORSE,
)
from canis.evaluation.model_registry import TRAIN_COMMANDS
from canis.runtime.kinematics import CONTACT_SPEED_MPS


def _schedule(entry: dict) -> str:
    import json

    try:
        s = json.loads(entry["schedule"])
    except (KeyError, ValueError):
        return "not recorded"
    return f"`{s.get('schedule')}`: {s.get('epochs')} epochs, batch {s.get('batch_size')}"


def _quality_table(results, names, metric: str, unit: str) -> list[str]:
    lines = [f"| motion | legs | {' | '.join(names)} | {unit} |", "|---" * (len(names) + 3) + "|"]
    for scenario in SCENARIOS:
        for legs, key in (("all", metric), ("back", metric.replace("_", "_back_", 1))):
            cells = " | ".join(f"{results[n][key][scenario]:.3f}" for n in names)
            lines.append(f"| {scenario if legs == 'all' else ''} | {legs} | {cells} | |")
    return lines + [""]


def _paws_planted_line(results, names) -> list[str]:
    """The share of paw-steps down and still (under the runtime's contact speed in the world),
    front and hind paws apart: paws that shuffle just under 2.5 cm are down, not planted."""

    def shares(n, paws):
        return " / ".join(f"{results[n][f'paws_planted_{paws}_share'][s]:.0%}" for s in SCENARIOS)

    cells = "; ".join(f"{n} front {shares(n, 'front')}, hind {shares(n, 'hind')}" for n in names)
    return [
        f"Paw-steps planted, under 2.5 cm and moving under {CONTACT_SPEED_MPS:g} m/s in the "
        f"world (the runtime's contact speed), front and hind paws ({' / '.join(SCENARIOS)}): "
        f"{cells}. A paw that slides just under 2.5 cm is down, and skates little by the "
        "measure, without being planted.",
        "",
    ]


def _paws_down_line(results, names) -> list[str]:
    """The share of paw-steps the skating measure counts at all (under 2.5 cm), all paws and
    front and hind apart: a dog that carries its paws higher than the mocap's skates less by
    the measure without planting them better, and one that never puts its hind paws down
    (as a network trained on one-step losses only did in its canters) skates nothing with
    them."""

    def shares(n, key):
        return " / ".join(f"{results[n][key][s]:.0%}" for s in SCENARIOS)

    def per_step_down(n):
        down, skating = results[n]["paws_down_share"], results[n]["skating_cm"]
        return " / ".join(f"{skating[s] / down[s]:.2f}" if down[s] > 0 else "-" for s in SCENARIOS)

    cells = "; ".join(
        f"{n} {shares(n, 'paws_down_share')} (front {shares(n, 'paws_down_front_share')}, "
        f"hind {shares(n, 'paws_down_hind_share')})"
        for n in names
    )
    per_step = "; ".join(f"{n} {per_step_down(n)}" for n in names)
    scenarios = " / ".join(SCENARIOS)
    return [
        f"Paw-steps under 2.5 cm, where the measure counts skating at all ({scenarios}): {cells}."
        " A dog that carries its paws higher than the mocap skates less by the "
        "measure without planting them better, and a paw that never comes down skates nothing."
        " So the skating per paw-step down (the table's skating over the share down, cm/frame), "
        f"which compares dogs that put their paws down differently: {per_step}.",
        "",
    ]


def _foot_lock_table(results, models) -> list[str]:
    with_lock = [n for n in models if "with_foot_lock" in results[n]]
    if not with_lock:
        return []
    lines = [
        "With the runtime's foot lock (`Controller(foot_lock=True)`, runtime/kinematics.py: a "
        "planted paw is pinned where it landed until it lifts; a post-process like the terrain "
        "IK, so the table above is the networks alone), all legs, cm/frame:",
        "",
        f"| motion | GT | {' | '.join(f'{n} + lock' for n in with_lock)} |",
        "|---" * (len(with_lock) + 2) + "|",
    ]
    for s in SCENARIOS:
        cells = " | ".join(
            f"{results[n]['with_foot_lock']['skating_cm'][s]:.3f}" for n in with_lock
        )
        lines.append(f"| {s} | {results['GT']['skating_cm'][s]:.3f} | {cells} |")
    return lines + [""]


SKATING_BAR = 1.25  # the release bar: MANN-8's skating at most this times the mocap's


def checks(results: dict) -> list[str]:
    """The release bar for MANN-8, stated from the figures (whichever models were run)."""
    lines = []
    if "MANN8" not in results:
        return lines
    mann, truth = results["MANN8"]["skating_cm"], results["GT"]["skating_cm"]
    for s in SCENARIOS:  # at most SKATING_BAR times the mocap's in each
        ratio = mann[s] / truth[s]
        verdict = "within" if ratio <= SKATING_BAR else "OVER"
        # Far under the mocap's is not better by itself: paws carried just above the measure's
        # 2.5 cm are not counted (the paws-down line above tells them apart).
        under = " (far under the mocap's: read it with the paws-down line)" if ratio < 0.75 else ""
        lines.append(
            f"- MANN8 skating in {s}: {mann[s]:.3f} vs ground truth {truth[s]:.3f} cm/frame "
            f"({ratio:.2f}x): {verdict} the {SKATING_BAR:g}x bar{under}."
        )
    if "with_foot_lock" in results["MANN8"]:
        locked = results["MANN8"]["with_foot_lock"]["skating_cm"]
        lines.append(
            "- With the runtime's foot lock (not the network alone): MANN8 skating "
            + ", ".join(
                f"{s} {locked[s]:.3f} ({100 * (locked[s] - truth[s]) / truth[s]:+.0f}% vs GT)"
                for s in SCENARIOS
            )
            + "."
        )
    for baseline in ("PFNN", "VNN"):  # below both in all three
        if baseline not in results:
            continue
        other = results[baseline]["skating_cm"]
        lower = [s for s in SCENARIOS if mann[s] < other[s]]
        lines.append(
            f"- MANN8 skating below {baseline}'s in {len(lower)} of 3 scenarios"
            + (f" ({', '.join(lower)})" if lower else "")
            + ": "
            + ", ".join(f"{s} {mann[s]:.3f} vs {other[s]:.3f}" for s in SCENARIOS)
            + "."
        )
    return lines + [""]


def markdown(results: dict, command: str, figures_link: str = "images") -> str:
    setup = results["setup"]
    models = list(setup["models"])
    names = ["GT", *models]
    c = setup["commands"]
    lines = [
        "## Controllers (the MANN paper's Tables 2-5, Figs. 2 and 9)",
        "",
        f"Reproduce: `{command}` ({setup['seconds']:.0f} s on the machine that wrote it). "
        "Models run through the runtime on flat ground (ONNX Runtime, CPU), as shipped "
        "(speed tracking on) unless said otherwise. GT is the mocap as captured (43 clips). "
        "Schedules: "
        + "; ".join(f"{n} {_schedule(results[n])} ({results[n]['file']})" for n in models)
        + ". "
        + " ".join(
            f"{n} is not shipped (it would take the repository's models past 50 MB); it was "
            f"trained and exported by `{TRAIN_COMMANDS[n]}`."
            for n in models
            if n in TRAIN_COMMANDS and not results[n]["file"].startswith("assets/")
        ),
        "",
        "Scenarios: on the mocap, *walk* and *canter* are the frames the labels give that gait "
        f"with the facing turning under {setup['straight_max_yaw_rate_degps']:.0f} deg/s, "
        f"*turn* any gait turning at {setup['turn_min_yaw_rate_degps']:.0f} deg/s or more "
        f"(frames: {results['GT']['steps']}). Each model is asked for the median of those "
        f"frames: walk {c['walk']['speed_mps']} m/s, canter {c['canter']['speed_mps']} m/s, "
        f"turn {c['turn']['speed_mps']} m/s turning {c['turn']['turn_degps']} deg/s (left and "
        f"right every {setup['turn_switch_s']:.0f} s), measured for {setup['measure_s']:.0f} s "
        f"after {setup['settle_s']:.0f} s of settling.",
        "",
        "### Foot skating (Table 2), cm/frame, lower is better",
        "",
        *_quality_table(results, names, "skating_cm", "cm/frame"),
        *_paws_down_line(results, names),
        *_paws_planted_line(results, names),
        *checks(results),
        *_foot_lock_table(results, models),
        "### Leg stiffness (Table 3): mean angular update per leg joint, degrees/frame, "
        "closer to GT is better",
        "",
        *_quality_table(results, names, "stiffness_deg", "deg/frame"),
        "Mean root speed reached in each scenario (m/s): "
        + "; ".join(
            f"{n} " + ", ".join(f"{s} {results[n]['mean_speed_mps'][s]:.2f}" for s in SCENARIOS)
            for n in models
        )
        + ".",
        "",
        "### Path following (Table 4), tau = 0.5",
        "",
        "One lap of each path in `assets/paths/` at 1.1 m/s (`./run canis run --path "
        "assets/paths/NAME.json --model M --seconds S`), starting on it: the desired trajectory "
        "is the path ahead of the dog (`follow_path`), blended with the network's by tau; mean "
        "distance of the root from the path and mean angle between the root's facing and the "
        "path's tangent. The paper's MANN: circle 2.98 cm / 3.21 deg, square 4.65 / 7.21, "
        "star 6.61 / 8.76, custom 5.31 / 6.75 (its own paths).",
        "",
        f"| path | | {' | '.join(models)} |",
        "|---" * (len(models) + 2) + "|",
    ]
    for path in PATHS:
        lines.append(
            f"| {path} | cm | "
            + " | ".join(f"{results[n]['path_cm'][path]:.1f}" for n in models)
            + " |"
        )
        lines.append(
            "| | deg | " + " | ".join(f"{results[n]['path_deg'][path]:.1f}" for n in models) + " |"
        )
    lines += ["", "### Gait emergence at the paper's speeds (its Fig. 2)", ""]
    speeds = list(results[models[0]]["gaits"])
    lines += [
        "Forward for 10 s at each speed; footfalls of the shown paws by the labels' contact "
        "detector with its speed thresholds scaled to the body's speed (a sliding stance paw "
        "is still down), the gait classifier's majority verdict over the last 7 s (share of "
        "frames), the speed reached and how far off the asked direction the dog went (its "
        "course over the last 7 s, degrees, left positive); GT: the labelled gaits of the "
        f"mocap's locomotion frames within {GT_SPEED_BAND_MPS} m/s of each speed (and their "
        "mean speed). The paper's dog: walk 0.5, pace 1.1, trot 1.9, canter 3.3 m/s.",
        "",
        f"| model | {' | '.join(f'{s} m/s' for s in speeds)} |",
        "|---" * (len(speeds) + 1) + "|",
    ]
    for n in (["GT"] if "gaits" in results["GT"] else []) + models:
        g = results[n]["gaits"]
        lines.append(
            f"| {n} | "
            + " | ".join(
                f"{g[s]['verdict']} ({g[s]['share']:.0%}), {g[s]['mean_speed_mps']:.2f} m/s"
                + (f", {g[s]['course_deg']:+.1f} deg" if "course_deg" in g[s] else "")
                for s in speeds
            )
            + " |"
        )
    courses = []
    for n in models:
        g = results[n]["gaits"]
        if not all("course_deg" in g[s] for s in speeds):
            continue
        worst = max(speeds, key=lambda s: abs(g[s]["course_deg"]))
        courses.append(
            f"- {n} goes furthest off the asked direction at {worst} m/s: "
            f"{g[worst]['course_deg']:+.1f} deg (its body {g[worst]['body_yaw_deg']:+.1f})"
            + (
                f": over {COURSE_BAR_DEG:g} degrees."
                if abs(g[worst]["course_deg"]) > COURSE_BAR_DEG
                else f", within {COURSE_BAR_DEG:g} degrees."
            )
        )
    if courses:
        lines += ["", *courses]
    figures = results.get("figures", {})
    if "footfalls" in figures:
        lines += ["", f"![footfalls]({figures_link}/{Path(figures['footfalls']).name})"]
    lines += [""]
    lines += jumps_and_stops_lines(results, models)
    for n in models:
        if "ablation" not in results[n]:
            continue
        lines += [
            f"### Expert ablation of {n} (Table 5)",
            "",
            "Each expert's blending coefficient set to 0 and the rest renormalised "
            "(export/expert_ablation.py), measured with the network's own speed (no speed "
            f"tracking): speed reached when asked 1.9 and 3.3 m/s, the gait at 3.3, the turn "
            f"rate reached when the facing is turned at {ABLATION_TURN_DEGPS:.0f} deg/s at "
            f"{ABLATION_TURN_SPEED_MPS} m/s, the hips' rise when asked to jump from a "
            f"{JUMP_RUN_MPS} m/s run, and when asked the walk scenario's speed: speed, hips "
            "height, share of paw-frames under 2.5 cm and skating. The verdict lists the "
            "measures under "
            + ", ".join(
                f"{100 * low:.0f}%"
                + (f" or over {100 * high:.0f}%" if high else "")
                + f" of the intact {what}"
                for what, low, high in BROKEN.values()
            )
            + f", a changed gait, or walk skating over {SKATING_WORSE}x.",
            "",
            "| disabled | m/s at 1.9 | m/s at 3.3 | gait at 3.3 | left deg/s | right deg/s | "
            "jump m | walk m/s | walk hips m | walk paws down | walk skating | verdict |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in results[n]["ablation"]:
            lines.append(
                f"| {r['disabled'] or 'none'} | {r['speed_at_1.9_mps']:.2f} | "
                f"{r['speed_at_3.3_mps']:.2f} | {r['gait_at_3.3']} | {r['turn_left_degps']:.0f} | "
                f"{r['turn_right_degps']:.0f} | {r['jump_height_m']:.2f} | {r['walk_mps']:.2f} | "
                f"{r['walk_hips_m']:.2f} | {r['walk_paws_down']:.0%} | "
                f"{r['walk_skating_cm']:.3f} | {r['verdict']} |"
            )
        lines += [""]
    if "activations" in figures:
        lines += [
            "### Expert activations (Fig. 9)",
            "",
            f"Blending weights over {PROFILE_WINDOW_S} s of walk, canter, sitting down from a "
            "walk and a jump from a run:",
            "",
            f"![expert activations]({figures_link}/{Path(figures['activations']).name})",
            "",
        ]
    return "\n".join(lines)


def write(results: dict, json_path: Path | None, doc: Path | None, command: str) -> None:
    import json

    from canis.evaluation.doc_sections import replace_section

    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(results, indent=1, default=_plain) + "\n")
    if doc is not None:
        replace_section(doc, "controllers", markdown(results, command))


def _plain(value):
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON")


def jumps_and_stops_lines(results: dict, models: list[str]) -> list[str]:
    """The section of evaluation/jumps_and_stops.py's measures, for the models that have them."""
    from canis.evaluation import jumps_and_stops as js
    from canis.runtime.transition_requests import SLOW_DOWN_S

    measured = [n for n in models if "jumps_and_stops" in results[n]]
    if not measured:
        return []
    jump_speeds = list(results[measured[0]]["jumps_and_stops"]["jump_rise_m"])
    stop_speeds = list(results[measured[0]]["jumps_and_stops"]["stops"])
    rises = results["GT"].get("jump_rises_m", [])
    lines = [
        "### Jumps and stops (not in the paper's tables)",
        "",
        "What the steady scenarios above never ask (evaluation/jumps_and_stops.py), each asked "
        f"{len(js.PHASES_FRAMES)} times, {js.PHASES_FRAMES[0]}-{js.PHASES_FRAMES[-1]} frames "
        f"past {js.ASK_AT_S:.0f} s of the gait (a canter stride): **jump**, asked for "
        f"{JUMP_HOLD_S} s with the network's own speed (no speed tracking), the hips' rise "
        "above their median the second before (the median over the requests); **stop**, the "
        f"asked speed falling to zero over {SLOW_DOWN_S} s and then idle (a player letting "
        "go; a posture asked while moving stops so too), as shipped (speed tracking on): the "
        f"largest distance a shown joint moves in one frame over the {js.STOP_WATCH_S:.0f} s "
        f"after the request (the worst request, and which joint), and the gait's own over its "
        f"last {js.GAIT_WATCH_S:.0f} s before it. A stop faster than "
        f"{js.POP_OVER_GAIT}x its gait's own is a pop.",
        "",
        f"| model | jump rise from {' / '.join(jump_speeds)} m/s (m) | stop from "
        f"{' / '.join(stop_speeds)} m/s: fastest joint (cm/frame) | the gait's own |",
        "|---|---|---|---|",
    ]
    if rises:
        lines.append(
            f"| GT | median {np.median(rises):.2f} over {len(rises)} jumps "
            f"({min(rises):.2f}-{max(rises):.2f}), at any speed | | |"
        )
    findings = []
    for n in measured:
        found = results[n]["jumps_and_stops"]
        stops = found["stops"]
        lines.append(
            f"| {n} | "
            + " / ".join(f"{v:.2f}" for v in found["jump_rise_m"].values())
            + " | "
            + " / ".join(f"{s['stop_cm_per_frame']:.1f} ({s['joint']})" for s in stops.values())
            + " | "
            + " / ".join(f"{s['gait_cm_per_frame']:.1f}" for s in stops.values())
            + " |"
        )
        popped = js.pops(stops)
        findings.append(
            f"- {n} stopping " + "; ".join(popped) + ": a pop."
            if popped
            else f"- {n}: no stop outruns its gait by more than {js.POP_OVER_GAIT}x."
        )
    return lines + [""] + findings + [""]

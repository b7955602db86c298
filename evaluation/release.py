"""`canis evaluate` with no part named: every part a release needs, in turn, each writing its
own section of one results page and its JSON (evaluation/cli.py holds each part's parser
and handler; this runs them as their subcommands would)."""

from __future__ import annotations

import argparse
from pathlib import Path

from canis.evaluation.doc_sections import RESULTS_DOC

OUT_DIR = Path("out/evaluation")
# What `canis evaluate` runs, in this order (`canis bench` last: its timings want a quiet
# machine, not one still writing the other parts' figures).
PARTS = ("replay", "controllers", "transitions", "variation", "precision", "speed", "bench")


def run_evaluate_all(args) -> int:
    """`canis evaluate` with no part named: each part in turn with its own defaults, each
    writing its section of one page and its JSON into --out. The parts and the output are
    checked before any runs, so a typo costs nothing."""
    if args.evaluate_command is not None:  # a part's own handler runs instead
        raise AssertionError("unreachable: a part's handler is set by its subparser")
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = [p for p in parts if p not in PARTS]
    if unknown or not parts:
        raise ValueError(
            f"--parts {args.parts!r}: unknown {', '.join(unknown) or '(none given)'}; "
            f"choose from {', '.join(PARTS)}"
        )
    if args.out.exists() and not args.out.is_dir():
        raise ValueError(f"--out {args.out}: exists and is not a folder")
    page = RESULTS_DOC if args.write_docs else args.out / "RESULTS.md"
    args.out.mkdir(parents=True, exist_ok=True)
    parsers = part_parsers()
    for part in parts:
        print(f"== canis evaluate: {part}", flush=True)
        part_args = parsers[part].parse_args([])
        if part == "bench":
            part_args.markdown, part_args.write_docs = page, False
        else:
            part_args.doc, part_args.write_docs = page, False
        if hasattr(part_args, "json"):
            part_args.json = args.out / f"{part}.json"
        status = part_args.handler(part_args)
        if status:
            return status
    print(f"wrote {page}")
    return 0


def part_parsers() -> dict[str, argparse.ArgumentParser]:
    """Each part's own parser, so `canis evaluate` runs every part exactly as its subcommand
    would with no options given."""
    from canis.evaluation import bench
    from canis.evaluation.cli import add_commands

    root = argparse.ArgumentParser(add_help=False)
    commands = root.add_subparsers(dest="command")
    add_commands(commands)
    bench.add_command(commands)
    evaluate = commands.choices["evaluate"]
    parts = dict(evaluate._subparsers._group_actions[0].choices)
    # The ablation judges networks fine-tuned by hand for it (evaluation/ablation.py): not a
    # release's measurement of the shipped models.
    del parts["ablation"]
    parts["bench"] = commands.choices["bench"]
    return parts

"""`canis SUBCOMMAND ...`. Each package registers its own subcommands; handlers import their
heavy dependencies (torch, pyglet) only when run, so `canis --help` works with any install."""

from __future__ import annotations

import argparse
import sys

import demo.cli
import runtime.cli
import training.cli
from canis import __version__, bench


class UserError(Exception):
    """A problem the user can fix; printed as one line, no traceback."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="canis",
        description="Neural quadruped character controller: data, training, export, runtime, demo.",
    )
    parser.add_argument("--version", action="version", version=f"canis {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo.cli.add_commands(commands)
    runtime.cli.add_commands(commands)
    bench.add_command(commands)
    training.cli.add_commands(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "handler", None):
        parser.print_help()
        return 0
    try:
        return int(args.handler(args) or 0)
    except (UserError, FileNotFoundError, ValueError) as error:
        print(f"canis {args.command}: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

"""`canis SUBCOMMAND ...`. Each package registers its own subcommands (runtime < training <
export < evaluation, tools, demo: the lower layers never import the higher); handlers import their
heavy dependencies (torch, pyglet) only when run, so `canis --help` works with any install."""

from __future__ import annotations

import argparse
import sys

from canis import __version__
from canis.demo import cli as demo_cli
from canis.evaluation import bench
from canis.evaluation import cli as evaluation_cli
from canis.export import cli as export_cli
from canis.tools import cli as tools_cli
from canis.training import cli as training_cli


class UserError(Exception):
    """A problem the user can fix; printed as one line, no traceback."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="canis",
        description="Neural quadruped character controller: data, training, export, runtime, demo.",
    )
    parser.add_argument("--version", action="version", version=f"canis {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo_cli.add_commands(commands)
    tools_cli.add_commands(commands)
    bench.add_command(commands)
    training_cli.add_commands(commands, recipe=export_cli.run_recipe)
    export_cli.add_commands(commands)
    evaluation_cli.add_commands(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "handler", None):
        parser.print_help()
        return 0
    try:
        return int(args.handler(args) or 0)
    except (
        UserError,
        FileNotFoundError,
        PermissionError,
        NotADirectoryError,
        IsADirectoryError,
        ValueError,
        FloatingPointError,
    ) as error:
        print(f"canis {args.command}: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        # Every writer goes through a temporary file and a rename, so what was written
        # before the interrupt is whole, and nothing half-written is left.
        print(f"canis {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

"""Subcommands of the training package: the top-level wiring only. Each command group's parser
sits beside its handler in its own module (cli_data, cli_train, cli_finetune). export's
commands (export/cli.py) and the evaluation's are wired in canis/cli.py: training imports
nothing of the layers above it."""

from __future__ import annotations

import argparse

from canis.training import cli_data, cli_finetune, cli_train


def add_commands(commands: argparse._SubParsersAction, recipe=None) -> None:
    """`recipe`: the handler of `canis train --config` (export/recipe.py)."""
    cli_data.add_commands(commands)
    cli_train.add_commands(commands, recipe)
    cli_finetune.add_commands(commands)

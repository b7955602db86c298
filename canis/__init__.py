"""The `canis` command: one entry point whose subcommands come from the project's packages."""

__version__ = "0.1.0"

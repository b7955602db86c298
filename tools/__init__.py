"""The harness beside the runtime: headless runs from scripts and paths, the soak, benchmarks,
closed-loop checks and the runtime's CLI commands. Not needed by a game."""

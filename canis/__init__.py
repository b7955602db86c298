"""canis: a neural character controller for a quadruped. The design's layers install as
canis.runtime (what a game embeds), canis.training, canis.export, canis.demo and canis.tools
(the harness: headless runs, soak, benchmarks); the shipped data is canis.assets."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("canis")
except PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"

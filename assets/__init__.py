"""The shipped data, installed as package data of `canis.assets`. Located only through
canis.runtime.assets (importlib.resources), never by a path relative to a source file."""

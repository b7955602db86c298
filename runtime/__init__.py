"""canis runtime: what a game embeds. numpy, ONNX Runtime and the native core; never torch.

The embedding API (see docs/EMBEDDING.md):
    MotionModel     an exported network, checked against the feature contract at load
    Controller      N dogs stepped together at 60 Hz; display_pose() gives what to draw
    ControlState    what each dog is asked to do (velocity, facing, action)
    Heightmap, load_terrain, procedural   terrains the IK fits the paws onto
    FixedTimestep   the accumulator that decouples simulation from the display rate
    Profiler        per-stage frame timing, rolling p50/p99, Chrome trace
    follow_path     the control that keeps a dog on a polyline
    TransitionModel, Keyframe   the RTN for Controller.transition_to, and its target poses
"""

_EXPORTS = {
    "MotionModel": "canis.runtime.inference",
    "Controller": "canis.runtime.controller",
    "ControlState": "canis.runtime.trajectory",
    "Heightmap": "canis.runtime.terrain",
    "load_terrain": "canis.runtime.terrain",
    "procedural": "canis.runtime.terrain",
    "FixedTimestep": "canis.runtime.loop",
    "Profiler": "canis.runtime.profiler",
    "follow_path": "canis.runtime.control",
    "load_path": "canis.runtime.control",
    "shipped_model_path": "canis.runtime.assets",
    "TransitionModel": "canis.runtime.transition",
    "Keyframe": "canis.runtime.poses",
}
__all__ = list(_EXPORTS)


def __dir__() -> list[str]:
    # The lazy names too, so that dir(canis.runtime) and editors list the embedding API.
    return sorted(set(globals()) | set(_EXPORTS))


def __getattr__(name: str):
    # Lazy, so that `import runtime.skeleton` (as training does) does not load ONNX Runtime.
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'runtime' has no attribute {name!r}")

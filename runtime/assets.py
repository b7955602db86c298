"""The shipped assets (skeleton, keyframes, paths, scripts, models), found through
importlib.resources so that a checkout, an editable install and an installed wheel all
resolve them the same way. The one manifest of shipped motion models is here too."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

ASSETS_PACKAGE = "canis.assets"

# Display name -> file under models/. The first is the default a game gets: MANN-8 at int8,
# which passed the precision gate (docs/RESULTS.md, Precision) and runs several times faster
# than fp32 on a CPU. The fp32 file stays as the reference the variants are made from and
# measured against (no checkpoint ships to remake it).
SHIPPED_MOTION_MODELS = {
    "MANN-8": "models/mann8.int8.onnx",
    "MANN-8 fp32": "models/mann8.onnx",
    "PFNN": "models/pfnn.onnx",
}
DEFAULT_MOTION_MODEL = "MANN-8"
SHIPPED_TRANSITION_MODEL = "models/rtn_step.onnx"


class MissingAssetError(FileNotFoundError):
    """A shipped asset that the installed package does not hold."""


def assets_dir() -> Path:
    """The folder holding the shipped assets."""
    return Path(str(resources.files(ASSETS_PACKAGE)))


def asset_path(relative: str, must_exist: bool = True) -> Path:
    """`relative` (e.g. "skeleton/dog.json") inside the shipped assets; a clear error naming
    the asset and where the package looked when it is missing."""
    path = assets_dir() / relative
    if must_exist and not path.is_file():
        raise MissingAssetError(
            f"shipped asset {relative!r} is missing from the installed canis package "
            f"(looked in {assets_dir()}); reinstall canis, or pass your own file"
        )
    return path


def shipped_model_path(name: str = DEFAULT_MOTION_MODEL) -> Path:
    """The ONNX file of a shipped motion model by its display name ("MANN-8", "PFNN")."""
    if name not in SHIPPED_MOTION_MODELS:
        raise ValueError(
            f"no shipped motion model {name!r}: known {', '.join(SHIPPED_MOTION_MODELS)}"
        )
    return asset_path(SHIPPED_MOTION_MODELS[name])


def shipped_models_dir() -> Path:
    return assets_dir() / "models"


def display_path(path: str | Path) -> str:
    """A path as a report shows it: "assets/..." for a shipped asset wherever the package is
    installed, else as given."""
    path = Path(path)
    try:
        return str(Path("assets") / path.resolve().relative_to(assets_dir().resolve()))
    except ValueError:
        return str(path)


def present_shipped_models() -> dict[str, Path]:
    """The shipped motion models whose files the installed package holds, by display name."""
    paths = {
        name: asset_path(relative, must_exist=False)
        for name, relative in SHIPPED_MOTION_MODELS.items()
    }
    return {name: path for name, path in paths.items() if path.is_file()}


def model_reference(path: str | Path) -> str:
    """How a recording names its model: a shipped model by its display name (found again
    wherever canis is installed), any other file by its absolute path."""
    for name, shipped in present_shipped_models().items():
        if Path(path).resolve() == shipped.resolve():
            return name
    return str(Path(path).resolve())


def referenced_model_path(reference: str, relative_to: Path) -> Path:
    """The model a recording names (model_reference's inverse): a shipped model's display
    name, or a path, a relative one taken from the folder `relative_to`."""
    if reference in SHIPPED_MOTION_MODELS:
        return shipped_model_path(reference)
    path = Path(reference)
    return path if path.is_absolute() else relative_to / path


def file_sha256(path) -> str:
    """The file's SHA-256, hex: how a snapshot, a converted model and an averaged checkpoint
    name the files they came from (torch-free, so the runtime's tools can use it)."""
    import hashlib

    return hashlib.sha256(Path(path).read_bytes()).hexdigest()

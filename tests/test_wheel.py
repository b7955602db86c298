"""The package as a game gets it: a wheel built from this checkout, installed into a virtual
environment that holds the runtime's dependencies only, imported from a folder outside the
checkout. An editable install hides missing package data and stray top-level modules; this
does not."""

import hashlib
import json
import os
import subprocess
import sys
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
GENERIC_TOP_LEVEL = {"runtime", "training", "export", "demo", "tools", "assets"}

# Drives the shipped dog for 3 s on hills through the public API only, then reports what a
# game would check: it moved, it stayed finite, and torch was never imported.
DRIVE = """
import json, sys
from importlib.metadata import distributions
import numpy as np
import canis
from canis.runtime import Controller, ControlState, MotionModel, procedural, shipped_model_path
from canis.runtime.features import ACTIONS

dogs = Controller(MotionModel(shipped_model_path()), terrain=procedural("hills"))
start = dogs.root_xz_m.copy()
move = ControlState(np.array([[0.0, 1.1]]), np.zeros(1), np.array([ACTIONS.index("move")]))
for _ in range(180):
    dogs.step(move)
positions, _ = dogs.display_pose()
print(json.dumps({
    "version": canis.__version__,
    "moved_m": float(np.linalg.norm(dogs.root_xz_m - start)),
    "finite": bool(np.isfinite(positions).all()),
    "torch_imported": "torch" in sys.modules,
    "package_dir": canis.__file__,
    "installed": sorted(d.metadata["Name"].lower() for d in distributions()),
}))
"""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """Built without build isolation, in a build folder kept between runs (build/wheel-test):
    an isolated build puts nanobind in a new temporary folder each time, so CMake recompiled
    the whole native core and nanobind every run (25 of the test's 40 s). The wheel's content
    is the same; that build-system.requires suffices is what ./run's install from a fresh
    clone checks (.ci/run), as a game's `pip install` would."""
    out = tmp_path_factory.mktemp("wheel")
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
        + ["-C", "build-dir=build/wheel-test/{wheel_tag}", "-w", str(out), str(REPO)],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert build.returncode == 0, f"pip wheel failed:\n{build.stderr[-3000:]}"
    (path,) = out.glob("canis-*.whl")
    return path


def test_wheel_holds_one_namespace_and_the_assets(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names if not n.startswith("canis-")}
    assert top == {"canis"}, f"generic top-level entries in the wheel: {top - {'canis'}}"
    for asset in (
        "canis/assets/skeleton/dog.json",
        "canis/assets/poses/dog_keyframes.json",
        "canis/assets/paths/circle.json",
        "canis/assets/scripts/walk_trot_turn.json",
        "canis/assets/scripts/tour.json",  # the one the demo's no-display message names
        "canis/assets/models/mann8.onnx",
        "canis/assets/models/rtn_step.onnx",
    ):
        assert asset in names, f"{asset} missing from the wheel"
    assert any(n.startswith("canis/runtime/_kinematics") for n in names)


def runtime_environment(wheel: Path) -> Path:
    """A virtual environment that holds the wheel's runtime dependencies and nothing else,
    kept between runs in build/wheel-test-env/KEY, KEY being the wheel's requirements and this
    Python: unpacking onnxruntime-gpu (470 MB installed) into a new environment was half of
    this test's CPU time. A wheel that asks for other dependencies gets an environment of its
    own, made empty (venv, no pip in it), so what the environment holds is still only what
    these requirements pulled in; the canis wheel itself is reinstalled every run."""
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = archive.read(name).decode()
    requires = sorted(line for line in metadata.splitlines() if line.startswith("Requires-Dist:"))
    runtime = [line for line in requires if "extra ==" not in line]
    key = hashlib.sha256("\n".join([sys.version, sys.base_prefix, *runtime]).encode())
    env_dir = REPO / "build" / "wheel-test-env" / key.hexdigest()[:16]
    if not (env_dir / "bin" / "python").exists():
        venv.create(env_dir, with_pip=False)
    return env_dir


def test_installed_wheel_drives_the_shipped_dog_without_torch(wheel, tmp_path):
    # Filled by this pip (`pip --python`): the same install as the environment's own pip
    # would make, without bootstrapping one (ensurepip), and without byte-compiling every
    # installed module ahead (--no-compile: Python compiles what the drive imports as it
    # imports it); together 4 s of CPU less. The previous run's canis is removed first, so
    # this wheel is installed, and pip checks its requirements against what is there.
    env_dir = runtime_environment(wheel)
    python = env_dir / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", str(python)]
    removed = subprocess.run([*pip, "uninstall", "-y", "-q", "canis"], capture_output=True)
    assert removed.returncode == 0, removed.stderr[-3000:]
    install = subprocess.run(
        [*pip, "install", "-q", "--no-compile", str(wheel)],
        capture_output=True,
        text=True,
    )
    assert install.returncode == 0, f"installing the wheel failed:\n{install.stderr[-3000:]}"
    game = tmp_path / "my_game"  # a folder outside the checkout
    game.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    result = subprocess.run(
        [str(python), "-c", DRIVE], cwd=game, capture_output=True, text=True, env=env
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    packages = set(report["installed"])
    assert "canis" in packages and "onnxruntime-gpu" in packages
    assert "torch" not in packages and "pyglet" not in packages  # runtime dependencies only
    assert str(env_dir) in report["package_dir"]  # the installed copy, not the checkout
    assert not report["torch_imported"]
    assert report["finite"]
    assert report["moved_m"] > 1.0  # 3 s asked at 1.1 m/s
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert report["version"] == version  # from the package metadata


def test_missing_asset_names_the_asset_and_the_package():
    from canis.runtime.assets import MissingAssetError, asset_path

    with pytest.raises(MissingAssetError, match=r"'models/nope.onnx'.*looked in .*assets"):
        asset_path("models/nope.onnx")

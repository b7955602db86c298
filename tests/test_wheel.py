"""The package as a game gets it: a wheel built from this checkout, installed into a fresh
virtual environment with the runtime's dependencies only, imported from a folder outside the
checkout. An editable install hides missing package data and stray top-level modules; this
does not."""

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
}))
"""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(REPO)],
        capture_output=True,
        text=True,
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
        "canis/assets/models/mann8.onnx",
        "canis/assets/models/rtn_step.onnx",
    ):
        assert asset in names, f"{asset} missing from the wheel"
    assert any(n.startswith("canis/runtime/_kinematics") for n in names)


def test_installed_wheel_drives_the_shipped_dog_without_torch(wheel, tmp_path):
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", str(wheel)], capture_output=True, text=True
    )
    assert install.returncode == 0, f"installing the wheel failed:\n{install.stderr[-3000:]}"
    installed = subprocess.run(
        [str(python), "-m", "pip", "list", "--format", "json"], capture_output=True, text=True
    )
    packages = {p["name"].lower() for p in json.loads(installed.stdout)}
    assert "torch" not in packages and "pyglet" not in packages  # runtime dependencies only
    game = tmp_path / "my_game"  # a folder outside the checkout
    game.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    result = subprocess.run(
        [str(python), "-c", DRIVE], cwd=game, capture_output=True, text=True, env=env
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
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

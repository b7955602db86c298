"""The plain C header builds into a shared library that a C program links and runs."""

import shutil
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake not installed")
def test_c_example_links_the_shared_library():
    # A build folder kept between runs (git-ignored): CMake rebuilds what changed and relinks,
    # so the example is still this checkout's; a fresh folder recompiled it all each run (7 s).
    build = REPO_ROOT / "build" / "c-example"
    subprocess.run(
        ["cmake", "-S", str(REPO_ROOT), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release"],
        check=True,
        capture_output=True,
    )
    subprocess.run(["cmake", "--build", str(build), "-j2"], check=True, capture_output=True)
    assert any(build.glob("libcanis_kinematics.*"))
    result = subprocess.run(
        [str(build / "canis_fk_example")], capture_output=True, text=True, check=True
    )
    # The elbow's 90° turn about +y sends the second bone from +x to -z.
    assert result.stdout.strip() == "tip 1.0000 0.0000 -1.0000"

import os
import shutil
import sys
from pathlib import Path

# One intra-op thread per test process, set before torch is first imported. The tests' models
# are small: two threads spin-waiting on each other for every small op made the tiny RTN's
# training 6x slower on the shared 2-core machine (75 s against 12 s for the same two steps),
# and pytest-xdist (./run test) already runs a process per core. An explicit setting wins.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from canis.runtime.skeleton import Skeleton, shipped_dog_skeleton_path
from canis.training.clips import default_mocap_dir

FIXTURES = Path(__file__).resolve().parent / "fixtures"

# The runtime's tests (and the demo's and the harness's, which sit on it) run without torch:
# while one of these modules' tests runs, `import torch` fails, so a runtime code path or a
# fixture that trains is caught. The wheel test checks the same for an installed package.
TORCH_FREE_MODULES = {
    "test_api",
    "test_benchmark",
    "test_body",
    "test_body_view",
    "test_compare",
    "test_controller",
    "test_demo",
    "test_demo_x11",
    "test_dog_ids",
    "test_features",
    "test_foot_lock",
    "test_gamepad",
    "test_ik",
    "test_inference",
    "test_input",
    "test_kinematics",
    "test_look_at",
    "test_loop_profiler",
    "test_motion_export",
    "test_native_c_api",
    "test_native_frame",
    "test_panda3d_example",
    "test_poses",
    "test_readout_cache",
    "test_restore_cases",
    "test_rotations",
    "test_run",
    "test_skeleton",
    "test_soak",
    "test_speed_calibration",
    "test_terrain",
    "test_trace_readers",
    "test_trajectory",
    "test_transition_worker",
}


# The test files that take longest, longest first (`./run test -n 0 --durations=0`, summed
# per file, on the 2-core Xeon; docs/RELIABILITY.md "The test suite's time"). `./run test`
# hands whole files to its two workers in collection order (--dist loadfile
# --no-loadscope-reorder; xdist would otherwise hand out the files with the most tests first,
# which put the wheel build and the X11 demo, three and two tests, last): longest first, no
# worker is left alone at the end on a long file while the other has finished.
LONGEST_FILES_FIRST = (
    "test_demo_x11.py",  # 21 s, half of it waiting on the demo's real-time frames
    "test_transitions.py",
    "test_demo.py",
    "test_distributed.py",
    "test_dataset.py",
    "test_wheel.py",
    "test_benchmark.py",
    "test_variation.py",
    "test_evaluate_controllers.py",
    "test_cli.py",
    "test_training.py",
    "test_body.py",
    "test_finetune.py",
    "test_trace_readers.py",
    "test_soak.py",
)


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(LONGEST_FILES_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: files stay whole


@pytest.fixture(autouse=True)
def _no_torch_in_runtime_tests(request, monkeypatch):
    if request.module.__name__.rsplit(".", 1)[-1] in TORCH_FREE_MODULES:
        monkeypatch.setitem(sys.modules, "torch", None)  # makes `import torch` raise
    yield


# A tiny dog-like BVH: root with 6 channels, ZXY rotations, an end site; written with CRLF.
TINY_BVH = """HIERARCHY
ROOT Hips
{
  OFFSET 5 5 5
  CHANNELS 6 Xposition Yposition Zposition Zrotation Xrotation Yrotation
  JOINT Spine
  {
    OFFSET 10 0 0
    CHANNELS 3 Zrotation Xrotation Yrotation
    End Site
    {
      OFFSET 20 0 0
    }
  }
}
MOTION
Frames: 2
Frame Time: 0.0166667
1 2 3 0 0 0 0 0 0
1 2 3 90 0 0 0 0 0
"""


def write_tiny_bvh(folder: Path, text: str = TINY_BVH, name: str = "clip.bvh") -> Path:
    path = folder / name
    path.write_bytes(text.replace("\n", "\r\n").encode())
    return path


@pytest.fixture(scope="session")
def mocap_dir() -> Path:
    folder = default_mocap_dir()
    if folder is None or not any(folder.glob("*.bvh")):
        pytest.skip("dog mocap not available (set CANIS_MOCAP_DIR or place ../shared/data)")
    return folder


@pytest.fixture(scope="session")
def dog() -> Skeleton:
    return Skeleton.from_json(shipped_dog_skeleton_path())


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)


def random_quaternions(rng: np.random.Generator, shape, max_angle_rad=np.pi) -> np.ndarray:
    """Uniformly random axes with angles up to max_angle_rad, as float32 (w, x, y, z)."""
    axes = rng.normal(size=(*shape, 3))
    axes /= np.linalg.norm(axes, axis=-1, keepdims=True)
    half = 0.5 * rng.uniform(0, max_angle_rad, size=shape)
    q = np.concatenate([np.cos(half)[..., None], np.sin(half)[..., None] * axes], axis=-1)
    return q.astype(np.float32)


# The tiny runs' hidden layers: 32 units, not the paper's 512. The code paths are the same;
# MANN-4 at 512 wrote 71 MB checkpoints (the optimiser's moments included), three a run, and
# its steps were most of the training tests' CPU time (issue 20, docs/RELIABILITY.md).
TINY_HIDDEN = 32


def tiny_config(dataset_path, kind="mann", epochs=1):
    """A training run of a few steps: enough to exercise the whole pipeline in seconds."""
    from canis.training.train import TrainConfig

    return TrainConfig(
        kind=kind,
        experts=4,
        epochs=epochs,
        batch_size=8,
        lr=1e-3,
        restart_epochs=1,
        steps_per_epoch=3,
        hidden=TINY_HIDDEN,
        dataset=str(dataset_path),
    )


def built_once(tmp_path_factory, name: str, make) -> Path:
    """The file `make(folder)` builds and returns, built once per test run. Under
    pytest-xdist every worker is a process with its own session fixtures; training the tiny
    models in each would double the suite's slowest part, so the first worker builds them in
    the folder all workers share and the others wait for it and reuse the result."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        return make(tmp_path_factory.mktemp(name))
    from filelock import FileLock

    shared = tmp_path_factory.getbasetemp().parent
    folder, done = shared / name, shared / f"{name}.done"
    with FileLock(str(shared / f"{name}.lock")):
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)  # a worker that died half-way
            folder.mkdir()
            done.write_text(str(make(folder).relative_to(folder)))
    return folder / done.read_text()


@pytest.fixture(scope="session")
def tiny_dataset(tmp_path_factory) -> Path:
    """A dataset built from the synthetic dogs (tests/synthetic_dog.py)."""
    from canis.training import dataset
    from synthetic_dog import standard_clips

    def make(folder):
        standard_clips(folder / "clips")
        dataset.save(dataset.build(folder / "clips", progress=False), folder / "tiny.npz")
        return folder / "tiny.npz"

    return built_once(tmp_path_factory, "tiny", make)


@pytest.fixture(scope="session")
def tiny_model() -> Path:
    """A tiny MANN-4 (16 hidden units) trained for a few steps on the synthetic dogs and
    exported: the real contract and metadata, not good motion. Committed, so the runtime's
    tests need no torch (tests/fixtures/make_fixtures.py regenerates it)."""
    return FIXTURES / "tiny_mann4.onnx"


@pytest.fixture(scope="session")
def tiny_transitions(tmp_path_factory) -> Path:
    from canis.training import transition_data
    from synthetic_dog import standard_clips

    def make(folder):
        standard_clips(folder / "clips")
        path = folder / "transitions.npz"
        transition_data.save(transition_data.build(folder / "clips", progress=False), path)
        return path

    return built_once(tmp_path_factory, "tiny_transitions", make)


def tiny_rtn_config(path, steps=4, eval_every=2, units=512):
    """A few steps, validated on 4 windows per length instead of 64: the loop, checkpoints
    and resume are the same, in a fraction of the time."""
    from canis.training.train_rtn import RtnTrainConfig

    return RtnTrainConfig(
        steps=steps,
        batch_size=4,
        eval_every=eval_every,
        validation_windows=4,
        units=units,
        dataset=str(path),
    )


@pytest.fixture(scope="session")
def tiny_rtn() -> Path:
    """A tiny RTN (32 LSTM units) with tiny_rtn_init.onnx beside it, made and committed like
    tiny_model; test_transitions checks that the export matches torch."""
    return FIXTURES / "tiny_rtn_step.onnx"


def finetune_run(dataset, start, out, resume=False, **settings) -> int:
    """`canis finetune` of `start` into `out` with `settings` (training/finetune_config.py's
    keys), written as its config file beside `out` (OUT.json); its exit code."""
    import json

    from canis.cli import main

    out = Path(out)
    config = out.parent / f"{out.name}.json"
    config.write_text(json.dumps(settings))
    run = ["finetune", "--config", str(config), "--start", str(start), "--dataset", str(dataset)]
    return main([*run, "--out", str(out)] + (["--resume"] if resume else []))


def moving(n: int, speed: float = 1.0):
    """n dogs asked to move straight ahead (+z, facing +z) at `speed` m/s."""
    from canis.runtime.actions import Action
    from canis.runtime.trajectory import ControlState

    return ControlState(np.tile([0.0, speed], (n, 1)), np.zeros(n), np.full(n, int(Action.MOVE)))

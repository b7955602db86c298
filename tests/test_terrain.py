import numpy as np
import pytest
from canis.runtime.terrain import Heightmap, load_terrain


def plane(a: float, b: float, c: float, rows=5, cols=7, cell=0.5, origin=(-1.0, 2.0)):
    x = origin[0] + cell * np.arange(cols)
    z = origin[1] + cell * np.arange(rows)
    return Heightmap(a * x[None, :] + b * z[:, None] + c, cell, origin)


def test_bilinear_sampling_is_exact_on_a_plane(rng):
    a, b, c = 0.3, -0.2, 1.5
    terrain = plane(a, b, c)
    points = np.stack([rng.uniform(-1.0, 2.0, 200), rng.uniform(2.0, 4.0, 200)], axis=-1)
    heights, normals = terrain.sample(points)
    assert np.allclose(heights, a * points[:, 0] + b * points[:, 1] + c, atol=1e-5)
    expected = np.array([-a, 1.0, -b]) / np.linalg.norm([-a, 1.0, -b])
    assert np.allclose(normals, expected, atol=1e-5)


def test_nodes_and_cell_centres():
    grid = np.array([[0.0, 1.0], [2.0, 5.0]])
    terrain = Heightmap(grid, cell_size_m=2.0)
    nodes = np.array([[0, 0], [2, 0], [0, 2], [2, 2]], dtype=np.float32)
    assert np.allclose(terrain.sample(nodes)[0], [0, 1, 2, 5])
    assert terrain.sample(np.array([1.0, 1.0]))[0] == pytest.approx(2.0)  # mean of the corners
    # dh/dx at the centre = ((1-0) + (5-2)) / 2 / cell = 1; dh/dz = ((2-0) + (5-1)) / 2 / cell = 1.5
    normal = terrain.sample(np.array([1.0, 1.0]))[1]
    assert np.allclose(normal, np.array([-1.0, 1.0, -1.5]) / np.linalg.norm([-1, 1, -1.5]))


def test_outside_the_grid_clamps_to_a_flat_edge():
    terrain = plane(0.3, 0.0, 0.0)
    heights, normals = terrain.sample(np.array([[-10.0, 3.0], [100.0, 3.0]]))
    assert np.allclose(heights, [0.3 * -1.0, 0.3 * 2.0], atol=1e-6)
    assert np.allclose(normals, [[0, 1, 0], [0, 1, 0]])


def test_single_row_and_batched_shapes():
    terrain = Heightmap(np.array([[0.0, 1.0, 4.0]]), cell_size_m=1.0)
    heights, normals = terrain.sample(np.array([[[0.5, 0.0], [1.5, 7.0]]]))
    assert heights.shape == (1, 2) and normals.shape == (1, 2, 3)
    assert np.allclose(heights, [[0.5, 2.5]])


@pytest.mark.parametrize(
    "grid, cell, message",
    [
        (np.zeros((0, 3)), 1.0, "non-empty"),
        (np.array([[0.0, np.nan]]), 1.0, "non-finite"),
        (np.zeros((2, 2)), 0.0, "cell size"),
    ],
)
def test_bad_heightmaps_are_refused(grid, cell, message):
    with pytest.raises(ValueError, match=message):
        Heightmap(grid, cell)


def test_procedural_terrains():
    from canis.runtime.terrain import procedural

    heights = {
        n: procedural(n).sample(np.array([[0.3, 2.0], [-4.0, 6.2]]))[0]
        for n in ("flat", "hills", "slope", "steps")
    }
    assert np.allclose(heights["flat"], 0.0)
    assert np.allclose(heights["slope"], [0.2, 0.62], atol=1e-5)
    assert np.allclose(heights["steps"], [0.1, 0.4], atol=1e-5)
    assert 0.0 < np.abs(heights["hills"]).max() < 0.35
    with pytest.raises(ValueError, match="unknown terrain 'lava'"):
        procedural("lava")


def test_terrain_files(tmp_path):
    from canis.runtime.terrain import load_terrain
    from PIL import Image

    grid = np.linspace(0, 1, 12).reshape(3, 4)
    np.save(tmp_path / "t.npy", grid)
    terrain = load_terrain(str(tmp_path / "t.npy"), cell_size_m=0.5)
    assert terrain.sample(np.array([0.75, 0.5]))[0] == pytest.approx(grid[2, 3], abs=1e-6)
    Image.fromarray((grid * 255).astype(np.uint8)).save(tmp_path / "t.png")
    png = load_terrain(str(tmp_path / "t.png"), cell_size_m=0.5, height_range_m=2.0)
    assert png.sample(np.array([0.75, 0.5]))[0] == pytest.approx(2.0, abs=0.01)
    np.save(tmp_path / "bad.npy", np.full((3, 3), np.nan))
    with pytest.raises(ValueError, match="bad.npy: heightmap holds non-finite"):
        load_terrain(str(tmp_path / "bad.npy"))
    np.save(tmp_path / "huge.npy", np.full((3, 3), 1e300))  # became inf in the float32 grid
    with pytest.raises(ValueError, match="huge.npy: heightmap holds heights past 10000 m"):
        load_terrain(str(tmp_path / "huge.npy"))
    np.save(tmp_path / "flat.npy", np.zeros(5))
    with pytest.raises(ValueError, match="flat.npy: a heightmap must be a 2-D grid"):
        load_terrain(str(tmp_path / "flat.npy"))
    (tmp_path / "junk.png").write_text("no")
    with pytest.raises(ValueError, match="junk.png: not a readable PNG"):
        load_terrain(str(tmp_path / "junk.png"))


@pytest.mark.parametrize(
    "heights", [np.full((3, 3), "0.5"), np.full((3, 3), "hill"), np.ones((3, 3), bool)]
)
def test_a_heightmap_of_strings_or_booleans_names_the_file(tmp_path, heights):
    np.save(tmp_path / "words.npy", heights)
    with pytest.raises(
        ValueError, match=f"words.npy: heights must be numbers in metres, got dtype {heights.dtype}"
    ):
        load_terrain(str(tmp_path / "words.npy"))

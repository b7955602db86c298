"""Terrain as a heightmap grid, sampled bilinearly by the native core.

Grid node (row, col) lies at x = origin_x + col * cell_size_m, z = origin_z + row * cell_size_m;
beyond the grid the terrain continues flat at its edge heights.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from canis.runtime import _kinematics


@dataclass(frozen=True)
class Heightmap:
    heights_m: np.ndarray  # (rows, cols) float32
    cell_size_m: float
    origin_xz_m: tuple[float, float] = (0.0, 0.0)

    def __post_init__(self):
        heights = np.ascontiguousarray(self.heights_m, dtype=np.float32)
        if heights.ndim != 2 or heights.size == 0:
            raise ValueError(f"heightmap must be a non-empty 2-D grid, got shape {heights.shape}")
        if not np.all(np.isfinite(heights)):
            raise ValueError("heightmap contains non-finite heights")
        if not (np.isfinite(self.cell_size_m) and self.cell_size_m > 0):
            raise ValueError(f"heightmap cell size must be positive, got {self.cell_size_m}")
        object.__setattr__(self, "heights_m", heights)

    def sample(self, points_xz_m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Heights (...,) and unit normals (..., 3) under points (..., 2) given as (x, z)."""
        points = np.ascontiguousarray(points_xz_m, dtype=np.float32)
        flat = points.reshape(-1, 2)
        heights = np.empty(len(flat), dtype=np.float32)
        normals = np.empty((len(flat), 3), dtype=np.float32)
        _kinematics.terrain_sample(
            self.heights_m,
            float(self.cell_size_m),
            float(self.origin_xz_m[0]),
            float(self.origin_xz_m[1]),
            flat,
            heights,
            normals,
        )
        return heights.reshape(points.shape[:-1]), normals.reshape(*points.shape[:-1], 3)


PROCEDURAL = ("flat", "hills", "slope", "steps")
PROCEDURAL_SIZE_M = 60.0
PROCEDURAL_CELL_M = 0.1


def procedural(
    name: str, size_m: float = PROCEDURAL_SIZE_M, cell_size_m: float = PROCEDURAL_CELL_M
) -> Heightmap:
    """A built-in terrain centred on the origin: flat, rolling hills, a 10% slope rising
    along +z, or 10 cm steps every 1.5 m along +z."""
    count = int(round(size_m / cell_size_m)) + 1
    coords = (np.arange(count) * cell_size_m) - size_m / 2
    x, z = np.meshgrid(coords, coords)  # rows run along z, columns along x
    if name == "flat":
        heights = np.zeros_like(x)
    elif name == "hills":
        heights = 0.20 * np.sin(2 * np.pi * x / 9.0) * np.sin(2 * np.pi * z / 7.0) + 0.10 * np.sin(
            2 * np.pi * (x + z) / 4.0
        )
    elif name == "slope":
        heights = 0.10 * z
    elif name == "steps":
        heights = 0.10 * np.floor(z / 1.5)
    else:
        raise ValueError(f"unknown terrain {name!r}; built in: {', '.join(PROCEDURAL)}")
    return Heightmap(heights, cell_size_m, (float(coords[0]), float(coords[0])))


MAX_HEIGHT_M = 1e4  # ten kilometres up or down: any more is not a terrain in metres


def load_terrain(spec: str, cell_size_m: float = 0.1, height_range_m: float = 1.0) -> Heightmap:
    """A procedural terrain by name, a .npy heightmap in metres, or a greyscale PNG whose
    black-to-white spans `height_range_m`; either file is centred on the origin."""
    if spec in PROCEDURAL:
        return procedural(spec)
    path = Path(spec)
    if not path.exists():
        raise FileNotFoundError(
            f"{path}: no such terrain file (or use one of {', '.join(PROCEDURAL)})"
        )
    if path.suffix.lower() == ".npy":
        try:
            heights = np.load(path, allow_pickle=False)
        except (ValueError, OSError, EOFError) as error:
            raise ValueError(f"{path}: not a readable .npy heightmap ({error})") from None
        if heights.dtype.kind not in "iuf":  # strings, booleans, complex or records
            raise ValueError(
                f"{path}: heights must be numbers in metres, got dtype {heights.dtype}"
            )
    elif path.suffix.lower() == ".png":
        heights = _read_png(path) * height_range_m
    else:
        raise ValueError(f"{path}: terrain files must be .npy or .png")
    heights = np.asarray(heights, dtype=np.float64)
    if heights.ndim != 2 or min(heights.shape) < 2:
        raise ValueError(
            f"{path}: a heightmap must be a 2-D grid of at least 2x2, got shape {heights.shape}"
        )
    if not np.all(np.isfinite(heights)):
        raise ValueError(f"{path}: heightmap holds non-finite heights")
    if np.abs(heights).max() > MAX_HEIGHT_M:  # 1e300 became inf in the float32 grid
        raise ValueError(
            f"{path}: heightmap holds heights past {MAX_HEIGHT_M:g} m (largest "
            f"{np.abs(heights).max():g}); heights are in metres"
        )
    rows, cols = heights.shape
    origin = (-(cols - 1) * cell_size_m / 2, -(rows - 1) * cell_size_m / 2)
    return Heightmap(heights, cell_size_m, origin)


def _read_png(path: Path) -> np.ndarray:
    try:
        from PIL import Image
    except ImportError:
        raise ImportError("PNG terrains need Pillow: pip install 'canis[demo]' or pillow") from None
    try:
        with Image.open(path) as image:
            grey = np.asarray(image.convert("I;16") if image.mode == "I;16" else image.convert("L"))
    except OSError as error:
        raise ValueError(f"{path}: not a readable PNG ({error})") from None
    return grey.astype(np.float64) / (65535.0 if grey.dtype == np.uint16 else 255.0)

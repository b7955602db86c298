"""Terrain as a heightmap grid, sampled bilinearly by the native core.

Grid node (row, col) lies at x = origin_x + col * cell_size_m, z = origin_z + row * cell_size_m;
beyond the grid the terrain continues flat at its edge heights.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from runtime import _kinematics


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

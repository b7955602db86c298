#include "terrain.h"

#include <algorithm>
#include <cmath>

#include "canis/kinematics.h"

namespace canis {

float terrain_height(const float* heights, int32_t rows, int32_t cols, float cell_size,
                     float origin_x, float origin_z, float x, float z, float* normal) {
    // Grid coordinates, clamped so points off the map see the edge's height: the terrain
    // continues flat beyond its edges, so the slope across a clamped axis is zero.
    float u_raw = (x - origin_x) / cell_size;
    float v_raw = (z - origin_z) / cell_size;
    float u_cells = std::clamp(u_raw, 0.0f, static_cast<float>(cols - 1));
    float v_cells = std::clamp(v_raw, 0.0f, static_cast<float>(rows - 1));
    bool x_clamped = u_cells != u_raw, z_clamped = v_cells != v_raw;
    int32_t c0 = std::min(static_cast<int32_t>(u_cells), std::max(cols - 2, 0));
    int32_t r0 = std::min(static_cast<int32_t>(v_cells), std::max(rows - 2, 0));
    int32_t c1 = std::min(c0 + 1, cols - 1), r1 = std::min(r0 + 1, rows - 1);
    float u = u_cells - c0, v = v_cells - r0;

    float h00 = heights[r0 * cols + c0], h10 = heights[r0 * cols + c1];
    float h01 = heights[r1 * cols + c0], h11 = heights[r1 * cols + c1];
    if (normal) {
        float dh_dx = x_clamped ? 0.0f : ((h10 - h00) * (1 - v) + (h11 - h01) * v) / cell_size;
        float dh_dz = z_clamped ? 0.0f : ((h01 - h00) * (1 - u) + (h11 - h10) * u) / cell_size;
        float inv_length = 1.0f / std::sqrt(dh_dx * dh_dx + 1.0f + dh_dz * dh_dz);
        normal[0] = -dh_dx * inv_length;
        normal[1] = inv_length;
        normal[2] = -dh_dz * inv_length;
    }
    return (h00 * (1 - u) + h10 * u) * (1 - v) + (h01 * (1 - u) + h11 * u) * v;
}

}  // namespace canis

extern "C" int canis_terrain_sample(const float* heights, int32_t rows, int32_t cols,
                                    float cell_size, float origin_x, float origin_z,
                                    int32_t n_points, const float* points_xz,
                                    float* out_heights, float* out_normals) {
    if (!heights || !points_xz || !out_heights) return CANIS_ERROR_NULL_POINTER;
    if (rows < 1 || cols < 1 || n_points < 0 || !(cell_size > 0.0f)) return CANIS_ERROR_BAD_SIZE;
    for (int32_t i = 0; i < n_points; ++i) {
        out_heights[i] = canis::terrain_height(heights, rows, cols, cell_size, origin_x, origin_z,
                                               points_xz[2 * i], points_xz[2 * i + 1],
                                               out_normals ? out_normals + 3 * i : nullptr);
    }
    return CANIS_OK;
}

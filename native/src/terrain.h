// Internal: one bilinear terrain sample, shared by canis_terrain_sample and the full-body IK.
#pragma once

#include <cstdint>

namespace canis {

// Height at (x, z) of the heightmap, flat beyond its edges; writes the unit normal when
// `normal` is not null (3 floats).
float terrain_height(const float* heights, int32_t rows, int32_t cols, float cell_size,
                     float origin_x, float origin_z, float x, float z, float* normal);

}  // namespace canis

// Internal: one character's forward kinematics, shared by the batched FK and the CCD solver.
#pragma once

#include <cstdint>

namespace canis {

// parents[0] == -1 and 0 <= parents[j] < j for j > 0.
bool hierarchy_is_valid(int32_t n_joints, const int32_t* parents);

// Recomputes the global transforms of joints first_joint..n_joints-1 of one character from
// its local rotations; joints before first_joint must already hold valid global transforms.
// Topological order makes that sufficient: no joint's ancestor comes after it.
void forward_kinematics_one(int32_t n_joints, const int32_t* parents, const float* offsets,
                            const float* local_rotations, const float* root_position,
                            float* global_positions, float* global_rotations,
                            int32_t first_joint);

}  // namespace canis

#include <vector>

#include "canis/kinematics.h"
#include "pose.h"
#include "quat.h"

namespace canis {

bool hierarchy_is_valid(int32_t n_joints, const int32_t* parents) {
    if (n_joints < 1 || parents[0] != -1) return false;
    for (int32_t j = 1; j < n_joints; ++j) {
        if (parents[j] < 0 || parents[j] >= j) return false;
    }
    return true;
}

void forward_kinematics_one(int32_t n_joints, const int32_t* parents, const float* offsets,
                            const float* local_rotations, const float* root_position,
                            float* global_positions, float* global_rotations,
                            int32_t first_joint) {
    for (int32_t j = first_joint; j < n_joints; ++j) {
        Quat local = load4(local_rotations + 4 * j);
        int32_t p = parents[j];
        if (p < 0) {
            store3(global_positions + 3 * j, load3(root_position));
            store4(global_rotations + 4 * j, local);
            continue;
        }
        Quat parent_rotation = load4(global_rotations + 4 * p);
        Vec3 position = load3(global_positions + 3 * p) +
                        rotate(parent_rotation, load3(offsets + 3 * j));
        store3(global_positions + 3 * j, position);
        store4(global_rotations + 4 * j, parent_rotation * local);
    }
}

}  // namespace canis

extern "C" int canis_forward_kinematics(int32_t n_characters, int32_t n_joints,
                                        const int32_t* parents, const float* offsets,
                                        const float* local_rotations,
                                        const float* root_positions, float* global_positions,
                                        float* global_rotations) {
    if (!parents || !offsets || !local_rotations || !root_positions || !global_positions)
        return CANIS_ERROR_NULL_POINTER;
    if (n_characters < 0 || n_joints < 1) return CANIS_ERROR_BAD_SIZE;
    if (!canis::hierarchy_is_valid(n_joints, parents)) return CANIS_ERROR_BAD_HIERARCHY;

    // Callers that only want positions still need somewhere to chain rotations through.
    std::vector<float> scratch_rotations;
    if (!global_rotations) scratch_rotations.resize(4 * static_cast<size_t>(n_joints));

    for (int32_t n = 0; n < n_characters; ++n) {
        size_t joint_base = static_cast<size_t>(n) * n_joints;
        float* rotations_out =
            global_rotations ? global_rotations + 4 * joint_base : scratch_rotations.data();
        canis::forward_kinematics_one(n_joints, parents, offsets,
                                      local_rotations + 4 * joint_base, root_positions + 3 * n,
                                      global_positions + 3 * joint_base, rotations_out, 0);
    }
    return CANIS_OK;
}

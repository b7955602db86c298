#include <cmath>
#include <vector>

#include "canis/kinematics.h"
#include "pose.h"
#include "quat.h"

namespace {

using canis::Quat;
using canis::Vec3;

Vec3 normalized(Vec3 v, Vec3 fallback) {
    float n = canis::length(v);
    return n > 1e-12f ? v * (1.0f / n) : fallback;
}

// Shepperd's method: divide by the largest of 4w^2, 4x^2, 4y^2, 4z^2, so the result stays
// accurate for every rotation (runtime/rotations.py quat_from_matrix is the numpy twin).
// Columns of the matrix are the rotated x, y and z axes.
Quat from_axes(Vec3 x, Vec3 y, Vec3 z) {
    float m00 = x.x, m10 = x.y, m20 = x.z;
    float m01 = y.x, m11 = y.y, m21 = y.z;
    float m02 = z.x, m12 = z.y, m22 = z.z;
    float trace = m00 + m11 + m22;
    Quat q;
    if (trace > m00 && trace > m11 && trace > m22) {
        float s = 2.0f * std::sqrt(1.0f + trace);
        q = {0.25f * s, (m21 - m12) / s, (m02 - m20) / s, (m10 - m01) / s};
    } else if (m00 > m11 && m00 > m22) {
        float s = 2.0f * std::sqrt(1.0f + m00 - m11 - m22);
        q = {(m21 - m12) / s, 0.25f * s, (m01 + m10) / s, (m02 + m20) / s};
    } else if (m11 > m22) {
        float s = 2.0f * std::sqrt(1.0f - m00 + m11 - m22);
        q = {(m02 - m20) / s, (m01 + m10) / s, 0.25f * s, (m12 + m21) / s};
    } else {
        float s = 2.0f * std::sqrt(1.0f - m00 - m11 + m22);
        q = {(m10 - m01) / s, (m02 + m20) / s, (m12 + m21) / s, 0.25f * s};
    }
    return canis::normalized(q);
}

}  // namespace

extern "C" int canis_rotations_from_directions(int32_t n_characters, int32_t n_joints,
                                               const int32_t* parents, const float* forwards,
                                               const float* ups, const float* root_yaws,
                                               float* local_rotations, float* global_rotations) {
    if (!parents || !forwards || !ups || !root_yaws || !local_rotations)
        return CANIS_ERROR_NULL_POINTER;
    if (n_characters < 0 || n_joints < 1) return CANIS_ERROR_BAD_SIZE;
    if (!canis::hierarchy_is_valid(n_joints, parents)) return CANIS_ERROR_BAD_HIERARCHY;

    std::vector<Quat> global(static_cast<size_t>(n_joints));
    for (int32_t n = 0; n < n_characters; ++n) {
        const Quat yaw = canis::from_axis_angle({0.0f, 1.0f, 0.0f}, root_yaws[n]);
        for (int32_t j = 0; j < n_joints; ++j) {
            size_t at = static_cast<size_t>(n) * n_joints + j;
            Vec3 z = normalized(canis::load3(forwards + 3 * at), {0.0f, 0.0f, 1.0f});
            // Up parallel to forward carries no roll: any perpendicular axis will do.
            Vec3 hint = canis::load3(ups + 3 * at);
            Vec3 x_raw = canis::cross(hint, z);
            if (canis::length(x_raw) < 1e-6f)
                x_raw = canis::cross(std::fabs(z.y) < 0.9f ? Vec3{0, 1, 0} : Vec3{1, 0, 0}, z);
            Vec3 x = normalized(x_raw, {1.0f, 0.0f, 0.0f});
            Vec3 y = canis::cross(z, x);
            global[j] = yaw * from_axes(x, y, z);
            Quat local = parents[j] < 0 ? global[j]
                                        : canis::conjugate(global[parents[j]]) * global[j];
            canis::store4(local_rotations + 4 * at, local);
            if (global_rotations) canis::store4(global_rotations + 4 * at, global[j]);
        }
    }
    return CANIS_OK;
}

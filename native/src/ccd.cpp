#include <algorithm>
#include <cmath>
#include <vector>

#include "canis/kinematics.h"
#include "ccd.h"
#include "pose.h"
#include "quat.h"

namespace {

using canis::Quat;
using canis::Vec3;

// The rotation turning direction `from` toward `to`, scaled down to `weight` of its angle.
// Returns identity when either vector is degenerate or they already agree.
Quat weighted_arc(Vec3 from, Vec3 to, float weight) {
    const float identity_epsilon = 1e-12f;
    float from_length = canis::length(from), to_length = canis::length(to);
    if (from_length < identity_epsilon || to_length < identity_epsilon) return {1, 0, 0, 0};
    Vec3 a = from * (1.0f / from_length), b = to * (1.0f / to_length);
    Vec3 axis = canis::cross(a, b);
    float sin_angle = canis::length(axis), cos_angle = canis::dot(a, b);
    if (sin_angle < 1e-7f) {
        if (cos_angle > 0.0f) return {1, 0, 0, 0};
        // Exactly opposite: any axis perpendicular to `a` works; pick the most stable one.
        Vec3 helper = std::fabs(a.x) < 0.9f ? Vec3{1, 0, 0} : Vec3{0, 1, 0};
        axis = canis::cross(a, helper);
        sin_angle = canis::length(axis);
    }
    float angle = std::atan2(canis::length(canis::cross(a, b)), cos_angle);
    return canis::from_axis_angle(axis * (1.0f / sin_angle), weight * angle);
}

}  // namespace

namespace canis {

bool chain_is_valid(int32_t n_joints, const int32_t* parents, int32_t chain_length,
                    const int32_t* chain) {
    for (int32_t k = 0; k < chain_length; ++k) {
        if (chain[k] < 0 || chain[k] >= n_joints) return false;
    }
    for (int32_t k = 0; k + 1 < chain_length; ++k) {
        int32_t j = parents[chain[k + 1]];
        while (j >= 0 && j != chain[k]) j = parents[j];
        if (j != chain[k]) return false;
    }
    return true;
}

Chain make_chain(int32_t n_joints, const int32_t* parents, int32_t chain_length,
                 const int32_t* chain) {
    Chain result;
    result.joints.assign(chain, chain + chain_length);
    for (int32_t j = chain[chain_length - 1]; j != chain[0]; j = parents[j])
        result.path.push_back(j);
    result.path.push_back(chain[0]);
    std::reverse(result.path.begin(), result.path.end());
    result.path_position.assign(n_joints, -1);
    for (size_t i = 0; i < result.path.size(); ++i)
        result.path_position[result.path[i]] = static_cast<int32_t>(i);
    return result;
}

float ccd_one(const Chain& chain, const int32_t* parents, const float* offsets, float* local,
              float* positions, float* rotations, const float* joint_weights, Vec3 target,
              int32_t max_iterations, float tolerance) {
    const std::vector<int32_t>& path = chain.path;
    const int32_t chain_length = static_cast<int32_t>(chain.joints.size());
    const int32_t effector = chain.joints.back();
    auto update_path_from = [&](size_t first) {
        for (size_t i = first; i < path.size(); ++i) {
            int32_t j = path[i], p = parents[j];
            Quat parent_rotation = load4(rotations + 4 * p);
            store3(positions + 3 * j,
                   load3(positions + 3 * p) + rotate(parent_rotation, load3(offsets + 3 * j)));
            store4(rotations + 4 * j, parent_rotation * load4(local + 4 * j));
        }
    };
    auto residual = [&] { return length(target - load3(positions + 3 * effector)); };
    auto correct_joint = [&](int32_t k) {
        const int32_t j = chain.joints[k];
        Vec3 joint_position = load3(positions + 3 * j);
        Quat correction = weighted_arc(load3(positions + 3 * effector) - joint_position,
                                       target - joint_position,
                                       std::clamp(joint_weights[k], 0.0f, 1.0f));
        Quat global = normalized(correction * load4(rotations + 4 * j));
        int32_t p = parents[j];
        Quat new_local = p < 0 ? global : conjugate(load4(rotations + 4 * p)) * global;
        store4(local + 4 * j, normalized(new_local));
        store4(rotations + 4 * j, global);
        update_path_from(static_cast<size_t>(chain.path_position[j]) + 1);
    };
    for (int32_t iteration = 0; iteration < max_iterations && residual() > tolerance;
         ++iteration) {
        // Effector-side joints first (classic CCD): it keeps the proximal joints' corrections
        // small and the pose natural. (Alternating the sweep direction was measured to
        // converge slower on the dog's legs.)
        for (int32_t k = chain_length - 2; k >= 0; --k) correct_joint(k);
    }
    return residual();
}

}  // namespace canis

extern "C" int canis_ccd_solve(int32_t n_characters, int32_t n_joints, const int32_t* parents,
                               const float* offsets, float* local_rotations,
                               const float* root_positions, int32_t chain_length,
                               const int32_t* chain, const float* joint_weights,
                               const float* targets, int32_t max_iterations, float tolerance,
                               float* residuals) {
    if (!parents || !offsets || !local_rotations || !root_positions || !chain ||
        !joint_weights || !targets)
        return CANIS_ERROR_NULL_POINTER;
    if (n_characters < 0 || n_joints < 1 || chain_length < 2 || max_iterations < 0)
        return CANIS_ERROR_BAD_SIZE;
    if (!canis::hierarchy_is_valid(n_joints, parents)) return CANIS_ERROR_BAD_HIERARCHY;
    if (!canis::chain_is_valid(n_joints, parents, chain_length, chain))
        return CANIS_ERROR_BAD_CHAIN;

    const canis::Chain prepared = canis::make_chain(n_joints, parents, chain_length, chain);
    std::vector<float> positions(3 * static_cast<size_t>(n_joints));
    std::vector<float> rotations(4 * static_cast<size_t>(n_joints));
    for (int32_t n = 0; n < n_characters; ++n) {
        float* local = local_rotations + 4 * static_cast<size_t>(n) * n_joints;
        canis::forward_kinematics_one(n_joints, parents, offsets, local, root_positions + 3 * n,
                                      positions.data(), rotations.data(), 0);
        float residual = canis::ccd_one(prepared, parents, offsets, local, positions.data(),
                                        rotations.data(), joint_weights,
                                        canis::load3(targets + 3 * n), max_iterations,
                                        tolerance);
        if (residuals) residuals[n] = residual;
    }
    return CANIS_OK;
}

// The shown pose in one call (runtime/pose.py shown_pose; with the foot lock on, up to the
// lock, which the caller applies before FK): the network's root-frame pose (hand-back offsets
// added by the caller) through
// canis_rotations_from_directions, placed at the hips in the world, fitted to the terrain by
// canis_fullbody_ik and put through canis_forward_kinematics, with the paws' contacts. The
// kinematics are the functions an engine calls; what this adds is the sequence and the few
// lines of glue between them, which in numpy were a dozen calls each frame.
#include <algorithm>
#include <cmath>
#include <vector>

#include "canis/kinematics.h"

extern "C" int canis_display_pose(
    int32_t n_characters, int32_t n_joints, const int32_t* parents, const float* offsets,
    const double* positions_root, const double* forwards_root, const double* ups_root,
    const double* velocities_root, const double* root_xz, const double* root_yaw,
    int32_t paw_count, const int32_t* paws, double* paw_xz, double* paw_speeds, double dt_s,
    double contact_height_m, double contact_speed_mps, const float* ik_weights,
    int32_t leg_count, int32_t front_legs, const int32_t* leg_starts, const int32_t* leg_joints,
    const float* leg_joint_weights, const float* leg_lengths, int32_t tail_length,
    const int32_t* tail_joints, float max_reach, int32_t iterations, float tolerance, const float* heights, int32_t rows, int32_t cols,
    float cell_size, float origin_x, float origin_z, int32_t only_below_ground,
    float below_ground_m, int32_t stop_before_fk, float* local_rotations, float* hips_out,
    float* positions, float* rotations, uint8_t* contacts, int32_t* solved) {
    if (!positions_root || !forwards_root || !ups_root || !velocities_root || !root_xz ||
        !root_yaw || !paws || !paw_xz || !paw_speeds || !ik_weights || !heights || !contacts ||
        !solved)
        return CANIS_ERROR_NULL_POINTER;
    if (stop_before_fk ? (!local_rotations || !hips_out) : (!positions || !rotations))
        return CANIS_ERROR_NULL_POINTER;
    if (n_characters < 0 || n_joints <= 0 || paw_count <= 0) return CANIS_ERROR_BAD_SIZE;
    for (int32_t k = 0; k < paw_count; ++k)
        if (paws[k] < 0 || paws[k] >= n_joints) return CANIS_ERROR_BAD_SIZE;
    const int64_t values = static_cast<int64_t>(n_characters) * n_joints * 3;
    std::vector<float> forwards(values), ups(values), yaws(n_characters);
    for (int64_t v = 0; v < values; ++v) {
        forwards[v] = static_cast<float>(forwards_root[v]);
        ups[v] = static_cast<float>(ups_root[v]);
    }
    std::vector<float> hips(3 * n_characters), facing(3 * n_characters),
        ground(n_characters, 0.0f);
    for (int32_t i = 0; i < n_characters; ++i) {
        yaws[i] = static_cast<float>(root_yaw[i]);
        const double c = std::cos(root_yaw[i]), s = std::sin(root_yaw[i]);
        const double* hip = positions_root + static_cast<int64_t>(i) * n_joints * 3;
        // runtime/root.py from_root_xz: the row vector (x, z) times [[c, -s], [s, c]], + root
        hips[3 * i] = static_cast<float>(hip[0] * c + hip[2] * s + root_xz[2 * i]);
        hips[3 * i + 1] = static_cast<float>(hip[1]);
        hips[3 * i + 2] = static_cast<float>(hip[0] * -s + hip[2] * c + root_xz[2 * i + 1]);
        facing[3 * i] = static_cast<float>(s);
        facing[3 * i + 1] = 0.0f;
        facing[3 * i + 2] = static_cast<float>(c);
        // runtime/kinematics.py paw_speeds_mps and estimate_contacts: the paws placed as the hips,
        // their speed from where they were shown last (kept when no time has passed), still
        // by it or by the predicted velocity.
        for (int32_t k = 0; k < paw_count; ++k) {
            const int64_t joint = (static_cast<int64_t>(i) * n_joints + paws[k]) * 3;
            const double *paw = positions_root + joint, *v = velocities_root + joint;
            const int64_t at = static_cast<int64_t>(i) * paw_count + k;
            double* before = paw_xz + 2 * at;
            const double x = paw[0] * c + paw[2] * s + root_xz[2 * i];
            const double z = paw[0] * -s + paw[2] * c + root_xz[2 * i + 1];
            if (dt_s > 0) {
                const double dx = x - before[0], dz = z - before[1];
                paw_speeds[at] = std::sqrt(dx * dx + dz * dz) / dt_s;
            }
            before[0] = x;
            before[1] = z;
            const double predicted = std::sqrt(v[0] * v[0] + v[2] * v[2]);
            contacts[at] = paw[1] < contact_height_m &&
                           std::min(paw_speeds[at], predicted) < contact_speed_mps;
        }
    }
    std::vector<float> local(static_cast<int64_t>(n_characters) * n_joints * 4);
    int status = canis_rotations_from_directions(n_characters, n_joints, parents,
                                                 forwards.data(), ups.data(), yaws.data(),
                                                 local.data(), nullptr);
    if (status != CANIS_OK) return status;
    auto fit = [&]() {
        return canis_fullbody_ik(n_characters, n_joints, parents, offsets, local.data(),
                                 hips.data(), ground.data(), facing.data(), ik_weights,
                                 leg_count, front_legs, leg_starts, leg_joints,
                                 leg_joint_weights, leg_lengths, tail_length, tail_joints,
                                 max_reach, iterations, tolerance, heights, rows, cols,
                                 cell_size, origin_x, origin_z, nullptr);
    };
    auto shape = [&]() {
        return canis_forward_kinematics(n_characters, n_joints, parents, offsets, local.data(),
                                        hips.data(), positions, rotations);
    };
    *solved = 0;
    if (!only_below_ground) {
        if ((status = fit()) != CANIS_OK) return status;
        *solved = 1;
    }
    if (stop_before_fk) {  // the caller goes on (the foot lock, then FK)
        std::copy(local.begin(), local.end(), local_rotations);
        std::copy(hips.begin(), hips.end(), hips_out);
        return CANIS_OK;
    }
    if (!only_below_ground) return shape();
    // Flat ground: the IK runs only when the shown pose puts a joint below it
    // (runtime/kinematics.py joints_below_ground), for every dog.
    if ((status = shape()) != CANIS_OK) return status;
    bool below = false;
    for (int64_t v = 1; v < values && !below; v += 3) below = positions[v] < -below_ground_m;
    if (!below) return CANIS_OK;
    if ((status = fit()) != CANIS_OK) return status;
    *solved = 1;
    return shape();
}

// Full-body IK onto a heightmap; runtime/kinematics.py describes the method and owns the settings.
#include <algorithm>
#include <cmath>
#include <vector>

#include "canis/kinematics.h"
#include "ccd.h"
#include "pose.h"
#include "quat.h"
#include "terrain.h"
#include "two_bone.h"

// The most the body pitches nose-up to bring a chest the pose sank back onto the ground.
constexpr float kMaxChestPitch = 1.0471976f;  // 60 degrees
// How deep a front paw may end under the ground before the body rises for it.
constexpr float kFrontPawSlack = 0.005f;

extern "C" int canis_fullbody_ik(
    int32_t n_characters, int32_t n_joints, const int32_t* parents, const float* offsets,
    float* local_rotations, float* hips, const float* ground_y, const float* facing,
    const float* weights, int32_t leg_count, int32_t front_legs, const int32_t* leg_starts,
    const int32_t* leg_joints, const float* leg_joint_weights, const float* leg_lengths,
    float max_reach, int32_t iterations, float tolerance, const float* heights, int32_t rows,
    int32_t cols, float cell_size, float origin_x, float origin_z, float* targets) {
    if (!parents || !offsets || !local_rotations || !hips || !ground_y || !facing || !weights ||
        !leg_starts || !leg_joints || !leg_joint_weights || !leg_lengths || !heights)
        return CANIS_ERROR_NULL_POINTER;
    if (n_characters < 0 || n_joints < 1 || leg_count < 1 || front_legs < 1 ||
        front_legs >= leg_count || rows < 1 || cols < 1 || !(cell_size > 0.0f))
        return CANIS_ERROR_BAD_SIZE;
    if (!canis::hierarchy_is_valid(n_joints, parents)) return CANIS_ERROR_BAD_HIERARCHY;
    std::vector<canis::Chain> legs;
    for (int32_t k = 0; k < leg_count; ++k) {
        int32_t length = leg_starts[k + 1] - leg_starts[k];
        const int32_t* chain = leg_joints + leg_starts[k];
        if (length < 2 || !canis::chain_is_valid(n_joints, parents, length, chain))
            return CANIS_ERROR_BAD_CHAIN;
        legs.push_back(canis::make_chain(n_joints, parents, length, chain));
    }

    using canis::Vec3;
    std::vector<float> positions(3 * static_cast<size_t>(n_joints));
    std::vector<float> rotations(4 * static_cast<size_t>(n_joints));
    std::vector<Vec3> paws(leg_count), goals(leg_count);
    std::vector<float> under(leg_count);
    for (int32_t n = 0; n < n_characters; ++n) {
        float* local = local_rotations + 4 * static_cast<size_t>(n) * n_joints;
        float* hip = hips + 3 * n;
        const float w = weights[n], ground = ground_y[n];
        canis::forward_kinematics_one(n_joints, parents, offsets, local, hip, positions.data(),
                                      rotations.data(), 0);
        Vec3 front{0, 0, 0}, hind{0, 0, 0};
        float front_height = 0.0f, hind_height = 0.0f;
        for (int32_t k = 0; k < leg_count; ++k) {
            paws[k] = canis::load3(positions.data() + 3 * legs[k].joints.back());
            under[k] = canis::terrain_height(heights, rows, cols, cell_size, origin_x, origin_z,
                                             paws[k].x, paws[k].z, nullptr) - ground;
            if (k < front_legs) {
                front = front + paws[k];
                front_height += under[k];
            } else {
                hind = hind + paws[k];
                hind_height += under[k];
            }
        }
        front = front * (1.0f / front_legs);
        hind = hind * (1.0f / (leg_count - front_legs));
        front_height /= front_legs;
        hind_height /= leg_count - front_legs;

        // The hips follow the ground under the hind paws; the body pitches nose-up by the
        // slope between hind and front paws, measured along the body: the horizontal line
        // from the hind legs' first joints to the front legs'. The root's facing only breaks
        // a tie (a torso held upright): a lying dog's root can face anywhere (turned on the
        // spot while the body stays), and pitching about the root's facing tipped such a
        // dog's chest 28 cm into a rise (the soak's worst paws, 12-14 cm under the hills).
        Vec3 shoulders{0, 0, 0}, hip_joints{0, 0, 0};
        for (int32_t k = 0; k < leg_count; ++k) {
            Vec3 root = canis::load3(positions.data() + 3 * legs[k].joints.front());
            if (k < front_legs) shoulders = shoulders + root;
            else hip_joints = hip_joints + root;
        }
        Vec3 torso = shoulders * (1.0f / front_legs) -
                     hip_joints * (1.0f / (leg_count - front_legs)) +
                     canis::load3(facing + 3 * n) * 0.02f;
        torso.y = 0.0f;
        float torso_length = canis::length(torso);
        Vec3 f = torso_length > 1e-6f ? torso * (1.0f / torso_length)
                                      : canis::load3(facing + 3 * n);
        float along = std::max(canis::dot(front - hind, f), 0.2f);
        float pitch = std::atan2(front_height - hind_height, along);
        Vec3 lateral = canis::cross(f, Vec3{0.0f, 1.0f, 0.0f});
        float lateral_length = canis::length(lateral);
        hip[1] += w * hind_height;
        if (lateral_length > 1e-6f) {
            canis::Quat turn =
                canis::from_axis_angle(lateral * (1.0f / lateral_length), w * pitch);
            canis::store4(local, canis::normalized(turn * canis::load4(local)));
        }
        canis::forward_kinematics_one(n_joints, parents, offsets, local, hip, positions.data(),
                                      rotations.data(), 0);

        // A chest the pose puts under the ground leaves the front legs short of it however
        // they bend (the network's lie sometimes dives nose first: shoulders 24 cm and head
        // 43 cm under a hill, a front paw 5.9 cm under, in the hour's soak). The body pitches
        // further nose-up about the hips until the shoulders' midpoint is on the ground, by
        // at most MAX_CHEST_PITCH; a chest above the ground costs one terrain sample.
        if (lateral_length > 1e-6f) {
            Vec3 chest{0, 0, 0};
            for (int32_t k = 0; k < front_legs; ++k)
                chest = chest + canis::load3(positions.data() + 3 * legs[k].joints.front());
            chest = chest * (1.0f / front_legs);
            float deficit = canis::terrain_height(heights, rows, cols, cell_size, origin_x,
                                                  origin_z, chest.x, chest.z, nullptr) -
                            chest.y;
            if (deficit > 0.0f) {
                Vec3 from_hips = chest - canis::load3(hip);
                float up = from_hips.y, ahead = canis::dot(from_hips, f);
                float radius = std::sqrt(up * up + ahead * ahead);
                float lift = radius > 1e-6f ? std::asin(std::clamp((up + deficit) / radius,
                                                                   -1.0f, 1.0f)) -
                                                  std::atan2(up, ahead)
                                            : 0.0f;
                lift = std::clamp(lift, 0.0f, kMaxChestPitch);
                canis::Quat turn =
                    canis::from_axis_angle(lateral * (1.0f / lateral_length), w * lift);
                canis::store4(local, canis::normalized(turn * canis::load4(local)));
                canis::forward_kinematics_one(n_joints, parents, offsets, local, hip,
                                              positions.data(), rotations.data(), 0);
                // A pose standing on its head (shoulders straight under the hips: the hour's
                // soak had one, a front paw 5.8 cm under the hill) is still sunk after the
                // pitch: the whole body rises by what is left.
                Vec3 pitched{0, 0, 0};
                for (int32_t k = 0; k < front_legs; ++k)
                    pitched =
                        pitched + canis::load3(positions.data() + 3 * legs[k].joints.front());
                pitched = pitched * (1.0f / front_legs);
                float left = canis::terrain_height(heights, rows, cols, cell_size, origin_x,
                                                   origin_z, pitched.x, pitched.z, nullptr) -
                             pitched.y;
                if (left > 0.0f) {
                    hip[1] += w * left;
                    canis::forward_kinematics_one(n_joints, parents, offsets, local, hip,
                                                  positions.data(), rotations.data(), 0);
                }
            }
        }

        // Each paw keeps its height above the flat ground, now above the terrain, short of
        // the leg's full reach. A paw the network's rotations put below its flat ground (its
        // own lie and sit sink a front paw up to 24 cm, a hind paw 13 cm, measured) is lifted
        // onto it first. CCD bends a front leg there; a hind leg (hip, knee, hock) is solved
        // in closed form keeping its knee's bend plane and the hock-paw bone's rotation: CCD
        // folded a lifted hind leg the other way from one frame to the next (the hock flipped
        // 7.9 cm in one frame from sit to stand, tests/test_demo.py). Legs are disjoint
        // subtrees, so one leg's solve leaves the others' transforms current.
        for (int32_t k = 0; k < leg_count; ++k) {
            Vec3 goal = paws[k];
            float sunk = std::max(ground - paws[k].y, 0.0f);
            goal.y = paws[k].y + w * (under[k] + sunk);
            Vec3 start = canis::load3(positions.data() + 3 * legs[k].joints.front());
            Vec3 reach = goal - start;
            float distance = canis::length(reach), limit = max_reach * leg_lengths[k];
            if (distance > limit) goal = start + reach * (limit / distance);
            goals[k] = goal;
            if (k >= front_legs && canis::is_three_bone_leg(legs[k]))
                canis::two_bone_one(legs[k], parents, offsets, local, positions.data(),
                                    rotations.data(), goal, f);
            else
                canis::ccd_one(legs[k], parents, offsets, local, positions.data(),
                               rotations.data(), leg_joint_weights + leg_starts[k], goal,
                               iterations, tolerance);
            if (targets) canis::store3(targets + 3 * (static_cast<size_t>(n) * leg_count + k),
                                       goal);
        }

        // A front leg at its reach can still end under the ground (a dived lie over a step's
        // edge: its goal was the ground under where the network put the paw, 4.5 cm out of
        // reach, and the upper step 6 cm higher where the paw ended: 5.56 cm under in the
        // hour's soak). The body rises by the deepest front paw's depth beyond a 5 mm slack
        // (a continuous amount; CCD's own residual is within it) and the hind legs are solved
        // again to their goals.
        float front_depth = 0.0f;
        for (int32_t k = 0; k < front_legs; ++k) {
            Vec3 paw = canis::load3(positions.data() + 3 * legs[k].joints.back());
            // The ground as the weight blends it in: easing the IK out lowers it with the paws.
            float floor = ground + w * (canis::terrain_height(heights, rows, cols, cell_size,
                                                              origin_x, origin_z, paw.x, paw.z,
                                                              nullptr) -
                                        ground);
            front_depth = std::max(front_depth, floor - paw.y - kFrontPawSlack);
        }
        if (front_depth > 0.0f) {
            hip[1] += front_depth;
            canis::forward_kinematics_one(n_joints, parents, offsets, local, hip,
                                          positions.data(), rotations.data(), 0);
            for (int32_t k = front_legs; k < leg_count; ++k) {
                if (canis::is_three_bone_leg(legs[k]))
                    canis::two_bone_one(legs[k], parents, offsets, local, positions.data(),
                                        rotations.data(), goals[k], f);
                else
                    canis::ccd_one(legs[k], parents, offsets, local, positions.data(),
                                   rotations.data(), leg_joint_weights + leg_starts[k],
                                   goals[k], iterations, tolerance);
            }
        }
    }
    return CANIS_OK;
}

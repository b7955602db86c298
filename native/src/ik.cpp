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
// How deep any other joint may be under the ground before the body rises for it, or the tail
// bends up out of it: runtime/kinematics.py BELOW_GROUND_M, below which a flat ground's IK
// runs at all, so the correction starts from nothing where the IK starts.
constexpr float kJointSlack = 0.005f;
// One CCD step turns a single joint exactly onto its goal: a bone pivoted out of the ground.
constexpr float kPivotWeights[2] = {1.0f, 0.0f};

namespace {

using canis::Vec3;

}  // namespace

extern "C" int canis_fullbody_ik(
    int32_t n_characters, int32_t n_joints, const int32_t* parents, const float* offsets,
    float* local_rotations, float* hips, const float* ground_y, const float* facing,
    const float* weights, int32_t leg_count, int32_t front_legs, const int32_t* leg_starts,
    const int32_t* leg_joints, const float* leg_joint_weights, const float* leg_lengths,
    int32_t tail_length, const int32_t* tail_joints, float max_reach, int32_t iterations,
    float tolerance, const float* heights, int32_t rows, int32_t cols, float cell_size,
    float origin_x, float origin_z, float* targets) {
    if (!parents || !offsets || !local_rotations || !hips || !ground_y || !facing || !weights ||
        !leg_starts || !leg_joints || !leg_joint_weights || !leg_lengths || !heights)
        return CANIS_ERROR_NULL_POINTER;
    if (n_characters < 0 || n_joints < 1 || leg_count < 1 || front_legs < 1 ||
        front_legs >= leg_count || rows < 1 || cols < 1 || !(cell_size > 0.0f) ||
        tail_length < 0 || tail_length == 1)
        return CANIS_ERROR_BAD_SIZE;
    if (tail_length > 0 && !tail_joints) return CANIS_ERROR_NULL_POINTER;
    if (!canis::hierarchy_is_valid(n_joints, parents)) return CANIS_ERROR_BAD_HIERARCHY;
    std::vector<canis::Chain> legs;
    for (int32_t k = 0; k < leg_count; ++k) {
        int32_t length = leg_starts[k + 1] - leg_starts[k];
        const int32_t* chain = leg_joints + leg_starts[k];
        if (length < 2 || !canis::chain_is_valid(n_joints, parents, length, chain))
            return CANIS_ERROR_BAD_CHAIN;
        legs.push_back(canis::make_chain(n_joints, parents, length, chain));
    }
    if (tail_length > 0 && !canis::chain_is_valid(n_joints, parents, tail_length, tail_joints))
        return CANIS_ERROR_BAD_CHAIN;
    // The tail bends bone by bone: each pivots about its first joint (a chain of one joint).
    // So does a CCD leg (a front leg), each of its bones: leg_bones[k][i] turns about joint
    // i; leg_uppers[k][i] is the leg from its first joint to joint i.
    std::vector<canis::Chain> tail_bones;
    std::vector<std::vector<canis::Chain>> leg_bones(leg_count), leg_uppers(leg_count);
    for (int32_t i = 1; i < tail_length; ++i)
        tail_bones.push_back(canis::make_chain(n_joints, parents, 2, tail_joints + i - 1));
    for (int32_t k = 0; k < leg_count; ++k) {
        const int32_t length = static_cast<int32_t>(legs[k].joints.size());
        if (length < 3 || (k >= front_legs && canis::is_three_bone_leg(legs[k]))) continue;
        const int32_t* joints = legs[k].joints.data();
        leg_uppers[k].resize(length - 1);  // from joint 1 to the wrist (the one above the paw)
        for (int32_t i = 0; i + 1 < length; ++i) {
            leg_bones[k].push_back(canis::make_chain(n_joints, parents, 2, joints + i));
            if (i > 0) leg_uppers[k][i] = canis::make_chain(n_joints, parents, i + 1, joints);
        }
    }
    // The torso's joints, which the body rises for before the legs reach down: all but the
    // legs past their first joint and the tail past its root, which bends instead. The limbs'
    // joints, which the body rises for after the legs if their legs left them under: a CCD
    // leg's past its first joint, but its paw (the paws have their own rule); a closed-form
    // hind leg's are solved again to their goals after a rise, so a hock would go back down
    // with its paw.
    std::vector<int32_t> torso_joints, limb_joints;
    {
        std::vector<char> torso(n_joints, 1);
        for (int32_t k = 0; k < leg_count; ++k) {
            const std::vector<int32_t>& joints = legs[k].joints;
            for (size_t i = 1; i < joints.size(); ++i) torso[joints[i]] = 0;
            if (!leg_bones[k].empty())
                limb_joints.insert(limb_joints.end(), joints.begin() + 1, joints.end() - 1);
        }
        for (int32_t i = 1; i < tail_length; ++i) torso[tail_joints[i]] = 0;
        for (int32_t j = 0; j < n_joints; ++j)
            if (torso[j]) torso_joints.push_back(j);
    }

    std::vector<float> positions(3 * static_cast<size_t>(n_joints));
    std::vector<float> rotations(4 * static_cast<size_t>(n_joints));
    std::vector<Vec3> paws(leg_count), goals(leg_count);
    std::vector<Vec3> below(n_joints);  // a leg's joints below one being lifted, by position
    std::vector<float> under(leg_count);
    std::vector<float> network_local(4 * static_cast<size_t>(n_joints));
    for (int32_t n = 0; n < n_characters; ++n) {
        float* local = local_rotations + 4 * static_cast<size_t>(n) * n_joints;
        float* hip = hips + 3 * n;
        const float w = weights[n], ground = ground_y[n];
        auto floor_at = [&](Vec3 p) {  // the ground as the weight blends it in
            return ground + w * (canis::terrain_height(heights, rows, cols, cell_size, origin_x,
                                                       origin_z, p.x, p.z, nullptr) -
                                 ground);
        };
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

        // Any joint of the torso still under the ground after that pitch (a lie on its side
        // holds its head and a shoulder under) lifts the body by the deepest one's depth
        // beyond kJointSlack times the weight, before the legs reach down to their goals.
        float torso_depth = 0.0f;
        for (int32_t j : torso_joints) {
            Vec3 joint = canis::load3(positions.data() + 3 * j);
            torso_depth = std::max(torso_depth, floor_at(joint) - kJointSlack - joint.y);
        }
        if (w * torso_depth > 0.0f) {
            hip[1] += w * torso_depth;
            canis::forward_kinematics_one(n_joints, parents, offsets, local, hip,
                                          positions.data(), rotations.data(), 0);
        }

        // Each paw keeps its height above the flat ground, now above the terrain, short of
        // the leg's full reach. A paw the network's rotations put below its flat ground (its
        // own lie and sit sink a front paw up to 24 cm, a hind paw 13 cm, measured) is lifted
        // onto it first. CCD bends a front leg there; a hind leg (hip, knee, hock) is solved
        // in closed form keeping its knee's bend plane and the hock-paw bone's rotation (a
        // folded one its hock instead, the bone turning: native/src/two_bone.h): CCD
        // folded a lifted hind leg the other way from one frame to the next (the hock flipped
        // 7.9 cm in one frame from sit to stand, tests/test_demo.py). Legs are disjoint
        // subtrees, so one leg's solve leaves the others' transforms current.
        // A CCD leg's joints can still be under the ground with its paw on it: the network's
        // lie sinks an elbow 9 cm under flat ground, its lying down a wrist 6.8 cm. Each,
        // from the top down, beyond kJointSlack: the bone below it pivots up about that
        // bone's end by that depth times the weight (a forearm lying on the ground tilts up
        // from its wrist), CCD bends the leg above to it, and the joints below turn back
        // onto where they were, down to the paw. Pivoting the bone above about its start
        // instead bent the leg below back to the paw with the wrist 3.7 cm up for an elbow
        // 1.2 cm under, which fell back at 2-3 cm a frame as the dog got up. A closed-form
        // hind leg's knee under the ground (4.3 cm in a lie on its side) swings up about the
        // hip-hock line by that depth. Its hock-paw bone is kept: pivoting it lifted a hock
        // 1.1 cm under a hill's slope in a sit, but the knee of that folded leg (its hip and
        // hock 3 cm apart) swung out 3 cm in one frame for a 6 mm lift.
        auto solve_leg = [&](int32_t k) {
            if (leg_bones[k].empty()) {
                Vec3 hock = canis::load3(positions.data() + 3 * legs[k].joints[2]);
                float hock_lowest_y =
                    hock.y + std::max(w * (floor_at(hock) - kJointSlack - hock.y), 0.0f);
                float kept = canis::two_bone_one(legs[k], parents, offsets, local,
                                                 positions.data(), rotations.data(), goals[k], f,
                                                 hock_lowest_y);
                // A folded leg's paw turned about its hock moved along the ground, onto
                // ground of another height (a lie on a 30% rise was left 1.1 cm under): it
                // turns once more for the ground where it is now.
                Vec3 paw = canis::load3(positions.data() + 3 * legs[k].joints.back());
                float shift = floor_at(paw) - floor_at(goals[k]);
                if (kept < 1.0f && shift != 0.0f)
                    canis::pivot_paw_to_height(legs[k], parents, offsets, local,
                                               positions.data(), rotations.data(),
                                               goals[k].y + shift, f);
                Vec3 knee = canis::load3(positions.data() + 3 * legs[k].joints[1]);
                float lift = w * (floor_at(knee) - kJointSlack - knee.y);
                if (lift > 0.0f)
                    canis::swing_knee_up(legs[k], parents, offsets, local, positions.data(),
                                         rotations.data(), lift);
                return;
            }
            const float* joint_weights = leg_joint_weights + leg_starts[k];
            const std::vector<int32_t>& joints = legs[k].joints;
            const size_t paw = joints.size() - 1;
            // The paw's bone keeps its rotation in the world and the leg above bends its
            // wrist to where that puts the paw on its goal. CCD over the whole leg turned the
            // paw's bone first, by most of the lift: a lying dog's front paw raised 7 cm onto
            // a hill had its wrist swung 5-7 cm ahead of the paw, until the wrist reached the
            // ground and the leg snapped back, 13 cm in one frame.
            const int32_t wrist = joints[paw - 1];
            const Vec3 paw_bone = canis::load3(positions.data() + 3 * joints[paw]) -
                                  canis::load3(positions.data() + 3 * wrist);
            const canis::Quat wrist_rotation = canis::load4(rotations.data() + 4 * wrist);
            canis::ccd_one(leg_uppers[k][paw - 1], parents, offsets, local, positions.data(),
                           rotations.data(), joint_weights, goals[k] - paw_bone, iterations,
                           tolerance);
            canis::store4(local + 4 * wrist,
                          canis::normalized(canis::conjugate(canis::load4(
                                                rotations.data() + 4 * parents[wrist])) *
                                            wrist_rotation));
            canis::forward_kinematics_one(n_joints, parents, offsets, local, hip,
                                          positions.data(), rotations.data(), wrist);
            for (size_t i = 1; i < paw; ++i) {
                Vec3 c = canis::load3(positions.data() + 3 * joints[i]);
                float lift = w * (floor_at(c) - kJointSlack - c.y);
                if (!(lift > 0.0f)) continue;
                for (size_t m = i + 1; m <= paw; ++m)
                    below[m] = canis::load3(positions.data() + 3 * joints[m]);
                canis::ccd_one(leg_uppers[k][i], parents, offsets, local, positions.data(),
                               rotations.data(), joint_weights,
                               canis::pivoted_up(below[i + 1], c, lift, f * -1.0f), iterations,
                               0.0f);
                for (size_t m = i; m < paw; ++m) {
                    canis::forward_kinematics_one(n_joints, parents, offsets, local, hip,
                                                  positions.data(), rotations.data(),
                                                  joints[m + 1]);
                    canis::ccd_one(leg_bones[k][m], parents, offsets, local, positions.data(),
                                   rotations.data(), kPivotWeights, below[m + 1], 1, 0.0f);
                }
            }
        };
        // The hind legs' rotations as the network left them: solving one again after the body
        // rises starts from these, so the second solve is the first with the hips higher.
        for (int32_t k = front_legs; k < leg_count; ++k)
            for (int32_t j : legs[k].joints)
                std::copy(local + 4 * j, local + 4 * j + 4, network_local.begin() + 4 * j);
        for (int32_t k = 0; k < leg_count; ++k) {
            Vec3 goal = paws[k];
            float sunk = std::max(ground - paws[k].y, 0.0f);
            goal.y = paws[k].y + w * (under[k] + sunk);
            if (leg_bones[k].empty()) {
                // A closed-form hind leg keeps its hock-paw bone, so a hock the pose holds
                // under the ground stays under with its paw on it (a network's lie holds one
                // 1-2 cm under flat ground, more on a slope rising from the paw to the hock):
                // the paw rises by that depth beyond kJointSlack instead, the bone's tilt kept.
                const std::vector<int32_t>& joints = legs[k].joints;
                Vec3 bone = canis::load3(positions.data() + 3 * joints[joints.size() - 2]) -
                            canis::load3(positions.data() + 3 * joints.back());
                Vec3 hock = goal + bone;
                goal.y += std::max(w * (floor_at(hock) - kJointSlack - hock.y), 0.0f);
            }
            Vec3 start = canis::load3(positions.data() + 3 * legs[k].joints.front());
            Vec3 reach = goal - start;
            float distance = canis::length(reach), limit = max_reach * leg_lengths[k];
            if (distance > limit) goal = start + reach * (limit / distance);
            goals[k] = goal;
            solve_leg(k);
            if (targets) canis::store3(targets + 3 * (static_cast<size_t>(n) * leg_count + k),
                                       goal);
        }

        // A front leg at its reach can still end under the ground (a dived lie over a step's
        // edge: its goal was the ground under where the network put the paw, 4.5 cm out of
        // reach, and the upper step 6 cm higher where the paw ended: 5.56 cm under in the
        // hour's soak); so can a joint of a leg that could not bend it out. The body rises by
        // the deepest front paw's depth beyond a 5 mm slack (a continuous amount; CCD's own
        // residual is within it), or the deepest such joint's beyond kJointSlack times the
        // weight, whichever is more, and the hind legs are solved again to their goals.
        float front_depth = 0.0f, limb_depth = 0.0f;
        for (int32_t k = 0; k < front_legs; ++k) {
            Vec3 paw = canis::load3(positions.data() + 3 * legs[k].joints.back());
            front_depth = std::max(front_depth, floor_at(paw) - paw.y - kFrontPawSlack);
        }
        for (int32_t j : limb_joints) {
            Vec3 joint = canis::load3(positions.data() + 3 * j);
            limb_depth = std::max(limb_depth, floor_at(joint) - kJointSlack - joint.y);
        }
        float rise = std::max(front_depth, w * limb_depth);
        if (rise > 0.0f) {
            hip[1] += rise;
            canis::forward_kinematics_one(n_joints, parents, offsets, local, hip,
                                          positions.data(), rotations.data(), 0);
            for (int32_t k = front_legs; k < leg_count; ++k) {
                for (int32_t j : legs[k].joints)
                    std::copy(network_local.begin() + 4 * j, network_local.begin() + 4 * j + 4,
                              local + 4 * j);
                canis::forward_kinematics_one(n_joints, parents, offsets, local, hip,
                                              positions.data(), rotations.data(),
                                              legs[k].joints.front());
                solve_leg(k);
            }
        }

        // The network's sit and beg put the tail's tip 4.4 cm under flat ground and the hills
        // twice that (its own data holds the tail low). From the root out, each tail bone
        // under the ground beyond kJointSlack pivots about its first joint, in the vertical
        // plane it lies in, until its end is up by that depth times the weight: continuous in
        // the depth, nothing at its onset, the end held at the slack when the weight is 1.
        for (size_t i = 0; i < tail_bones.size(); ++i) {
            const int32_t end = tail_joints[i + 1];
            Vec3 to = canis::load3(positions.data() + 3 * end);
            float lift = w * (floor_at(to) - kJointSlack - to.y);
            if (!(lift > 0.0f)) continue;
            // A bone hanging straight down swings backward, away from the torso's direction.
            Vec3 goal = canis::pivoted_up(canis::load3(positions.data() + 3 * tail_joints[i]), to,
                                          lift, f * -1.0f);
            canis::ccd_one(tail_bones[i], parents, offsets, local, positions.data(),
                           rotations.data(), kPivotWeights, goal, 1, 0.0f);
            canis::forward_kinematics_one(n_joints, parents, offsets, local, hip,
                                          positions.data(), rotations.data(), end);
        }
    }
    return CANIS_OK;
}

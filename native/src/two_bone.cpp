#include "two_bone.h"

#include <algorithm>
#include <cmath>

#include "pose.h"

namespace canis {

namespace {

// A hind leg whose hip and hock are closer than kFoldedReach of the leg's length (thigh plus
// shank) starts keeping its hock where the network put it, fully from kFoldBand closer: 13.6
// and 5.1 cm on the dog's 34 cm hind leg. Its canter keeps them 17.6 cm apart or more
// (assets/scripts/transitions.json), its keyframes' sit and beg 12-14% of the leg.
constexpr float kFoldedReach = 0.4f, kFoldBand = 0.25f;

float angle_between(Vec3 a, Vec3 b) {
    return std::atan2(length(cross(a, b)), dot(a, b));
}

Vec3 unit_or_zero(Vec3 v) {
    float n = length(v);
    return n > 1e-12f ? v * (1.0f / n) : Vec3{0, 0, 0};
}

// The shortest rotation turning direction `from` onto `to` (identity when either is
// degenerate or they are opposite: no leg solve here turns a bone half a turn).
Quat arc(Vec3 from, Vec3 to) {
    Vec3 axis = cross(from, to);
    float sin_length = length(axis);
    if (sin_length < 1e-12f || length(from) < 1e-9f || length(to) < 1e-9f) return {1, 0, 0, 0};
    return from_axis_angle(axis * (1.0f / sin_length), angle_between(from, to));
}

// Keeps the leg's global transforms below its hip current (the hip's own position does not
// move) after its hip's rotation and the locals below it changed.
void update_below_hip(const Chain& chain, const int32_t* parents, const float* offsets,
                      const float* local, float* positions, float* rotations) {
    for (size_t i = 1; i < chain.joints.size(); ++i) {
        const int32_t j = chain.joints[i], p = parents[j];
        const Quat parent = load4(rotations + 4 * p);
        store3(positions + 3 * j, load3(positions + 3 * p) + rotate(parent, load3(offsets + 3 * j)));
        store4(rotations + 4 * j, parent * load4(local + 4 * j));
    }
}

}  // namespace

bool is_three_bone_leg(const Chain& chain) {
    return chain.joints.size() == 4 && chain.path.size() == 4;
}

float two_bone_one(const Chain& chain, const int32_t* parents, const float* offsets,
                   float* local, float* positions, float* rotations, Vec3 target, Vec3 forward,
                   float hock_lowest_y) {
    const int32_t hip = chain.joints[0], knee = chain.joints[1], hock = chain.joints[2],
                  paw = chain.joints[3];
    const Vec3 a = load3(positions + 3 * hip), b = load3(positions + 3 * knee),
               c = load3(positions + 3 * hock), d = load3(positions + 3 * paw);
    const Quat hip_rotation = load4(rotations + 4 * hip),
               knee_rotation = load4(rotations + 4 * knee),
               hock_rotation = load4(rotations + 4 * hock);
    const float thigh = length(b - a), shank = length(c - b);
    const Vec3 reach = c - a;
    const float reach_length = length(reach);
    if (thigh < 1e-6f || shank < 1e-6f || reach_length < 1e-6f) return 1.0f;
    // Reachable hip-hock distances, a hair inside the limits where the bend angle's
    // derivative blows up.
    const float margin = 1e-3f * (thigh + shank);
    const float lo = std::fabs(thigh - shank) + margin, hi = thigh + shank - margin;

    // The hock's goal: the target less the hock-paw bone as it is. A paw lifted onto the
    // ground under a folded leg (hip and hock 3-8 cm apart) can put that goal at the hip
    // itself (a beg asked at once from a canter: 2 cm from it or past it), and a hock moved a
    // few cm across so short a hip-hock line turns the whole leg: 30-115 deg a frame. So a
    // leg the network folds (its hip to hock from kFoldedReach of the leg's length down to
    // kFoldedReach - kFoldBand) fades to keeping its hock where the network put it (no lower
    // than `hock_lowest_y`), and the paw's bone turns about the hock instead, in its own
    // vertical plane, to the target's height.
    const Vec3 kept_goal = target - (d - c);
    const float leg = thigh + shank;
    const float unfolded = std::clamp(
        (reach_length - (kFoldedReach - kFoldBand) * leg) / (kFoldBand * leg), 0.0f, 1.0f);
    const float keep = unfolded * unfolded * (3.0f - 2.0f * unfolded);
    Vec3 own_hock = c;
    own_hock.y = std::max(own_hock.y, hock_lowest_y);
    const Vec3 hock_goal = own_hock + (kept_goal - own_hock) * keep;
    const Vec3 goal_reach = hock_goal - a;
    const float wanted = std::clamp(length(goal_reach), lo, hi);

    // The bend plane: the one the knee bends in, off the hip-hock line. Only a leg held
    // nearly straight (knee within 5% of the thigh's length of the line) leans it toward
    // `forward`, fading in as the leg straightens, so a straight leg bends its knee forward
    // and the plane never switches between the two.
    const Vec3 along = reach * (1.0f / reach_length);
    const Vec3 knee_out = (b - a) - along * dot(b - a, along);
    const Vec3 forward_out = forward - along * dot(forward, along);
    const float straight = std::max(0.0f, 1.0f - length(knee_out) / (0.05f * thigh));
    const Vec3 axis =
        unit_or_zero(cross(reach, knee_out + forward_out * (0.05f * thigh * straight * straight)));
    if (length(axis) == 0.0f) return 1.0f;

    // Where the knee and hock go before the swing: the hock on the hip-hock line at `wanted`,
    // the knee on the bend plane's knee side, at the hip angle the triangle's sides give.
    const Vec3 side = unit_or_zero(cross(axis, along));
    const float hip_angle = std::acos(std::clamp(
        (thigh * thigh + wanted * wanted - shank * shank) / (2.0f * thigh * wanted), -1.0f, 1.0f));
    const Vec3 knee_goal =
        a + (along * std::cos(hip_angle) + side * std::sin(hip_angle)) * thigh;
    const Vec3 hock_on_line = a + along * wanted;
    // Shortest arcs: the thigh onto its place, then the shank (as the thigh's turn left it)
    // onto its own, then the whole leg about the hip from the hip-hock line onto the goal.
    const Quat open_hip = arc(b - a, knee_goal - a);
    const Quat open_knee = arc(rotate(open_hip, c - b), hock_on_line - knee_goal);
    const Quat swing = arc(reach, goal_reach);

    const Quat new_hip = normalized(swing * open_hip * hip_rotation);
    const Quat new_knee = normalized(swing * open_knee * open_hip * knee_rotation);
    const int32_t hip_parent = parents[hip];
    const Quat parent_rotation =
        hip_parent < 0 ? Quat{1, 0, 0, 0} : load4(rotations + 4 * hip_parent);
    store4(local + 4 * hip, normalized(conjugate(parent_rotation) * new_hip));
    store4(local + 4 * knee, normalized(conjugate(new_hip) * new_knee));
    store4(local + 4 * hock, normalized(conjugate(new_knee) * hock_rotation));

    store4(rotations + 4 * hip, new_hip);
    update_below_hip(chain, parents, offsets, local, positions, rotations);
    if (keep < 1.0f) pivot_paw_to_height(chain, parents, offsets, local, positions, rotations,
                                         target.y, forward);
    return keep;
}

Vec3 pivoted_up(Vec3 pivot, Vec3 end, float lift, Vec3 away) {
    const Vec3 bone = end - pivot, across{bone.x, 0.0f, bone.z};
    const float bone_length = length(bone), across_length = length(across);
    const float up = std::clamp(bone.y + lift, -bone_length, bone_length);
    if (across_length > 1e-6f) away = across * (1.0f / across_length);
    const float out = std::sqrt(std::max(bone_length * bone_length - up * up, 0.0f));
    return pivot + away * out + Vec3{0.0f, up, 0.0f};
}

void pivot_paw_to_height(const Chain& chain, const int32_t* parents, const float* offsets,
                         float* local, float* positions, float* rotations, float paw_y,
                         Vec3 forward) {
    const int32_t knee = chain.joints[1], hock = chain.joints[2], paw = chain.joints[3];
    const Vec3 c = load3(positions + 3 * hock), d = load3(positions + 3 * paw);
    const Vec3 turned = pivoted_up(c, d, paw_y - d.y, forward) - c;
    const Quat hock_rotation = normalized(arc(d - c, turned) * load4(rotations + 4 * hock));
    store4(local + 4 * hock,
           normalized(conjugate(load4(rotations + 4 * knee)) * hock_rotation));
    update_below_hip(chain, parents, offsets, local, positions, rotations);
}

void swing_knee_up(const Chain& chain, const int32_t* parents, const float* offsets,
                   float* local, float* positions, float* rotations, float lift) {
    const int32_t hip = chain.joints[0], knee = chain.joints[1], hock = chain.joints[2];
    const Vec3 a = load3(positions + 3 * hip), b = load3(positions + 3 * knee),
               c = load3(positions + 3 * hock);
    const Vec3 along = unit_or_zero(c - a);
    if (length(along) == 0.0f) return;
    // The knee's circle about the hip-hock line: centre, and its offset r with r turned a
    // quarter turn about the line; the knee's height at angle t is centre.y + R cos(t - top).
    const Vec3 centre = a + along * dot(b - a, along), r = b - centre, s = cross(along, r);
    const float radius = std::sqrt(r.y * r.y + s.y * s.y);
    if (radius < 1e-6f) return;
    const float top = std::atan2(s.y, r.y);
    const float reach = std::acos(std::clamp((b.y + lift - centre.y) / radius, -1.0f, 1.0f));
    const float angle = top - std::copysign(reach, top);  // 0 at no lift
    const Quat turn = from_axis_angle(along, angle);
    const Quat hip_rotation = load4(rotations + 4 * hip),
               knee_rotation = load4(rotations + 4 * knee),
               hock_rotation = load4(rotations + 4 * hock);
    const Quat new_hip = normalized(turn * hip_rotation);
    const int32_t hip_parent = parents[hip];
    const Quat parent_rotation =
        hip_parent < 0 ? Quat{1, 0, 0, 0} : load4(rotations + 4 * hip_parent);
    store4(local + 4 * hip, normalized(conjugate(parent_rotation) * new_hip));
    store4(local + 4 * hock, normalized(conjugate(turn * knee_rotation) * hock_rotation));
    store4(rotations + 4 * hip, new_hip);
    update_below_hip(chain, parents, offsets, local, positions, rotations);
}

}  // namespace canis

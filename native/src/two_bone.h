// Internal: analytic IK for a three-bone hind leg, used by the full-body IK (ik.cpp).
#pragma once

#include <cstdint>

#include "ccd.h"
#include "quat.h"

namespace canis {

// Whether `chain` is hip, knee, hock, paw with each joint the parent of the next: the shape
// two_bone_one solves.
bool is_three_bone_leg(const Chain& chain);

// Puts the paw of a three-bone leg (is_three_bone_leg) on `target`: the last bone (hock to
// paw) keeps its world rotation, so the hock goes to the target less that bone, and the hip
// and knee bend in the plane the knee already bends in. CCD, which starts from the network's
// pose each frame, can fold such a leg the other way from one frame to the next (a hock
// flipped 7.9 cm in one frame, sit to stand); this solve is a continuous function of the pose
// and the target, so it cannot. `forward` (unit, horizontal) sets the bend plane of a leg
// held straight: the knee goes forward. The hock's distance from the hip is clamped to what
// the two bones reach. `positions`/`rotations` must hold the character's global transforms
// on entry; the leg's are kept current. Updates `local` in place. A folded leg (hip and hock
// closer than 40% of the thigh and shank together, all of it from 10%) fades instead to
// keeping its hock where it is, raised to `hock_lowest_y` if lower, with the hock-paw bone
// turning in its vertical plane to put the paw at the target's height: moving the hock of a
// folded leg across its short hip-hock line turns the whole leg about the hip. Returns how
// much of the bone's rotation it kept: 1 for an open leg, less for a folded one.
float two_bone_one(const Chain& chain, const int32_t* parents, const float* offsets,
                   float* local, float* positions, float* rotations, Vec3 target, Vec3 forward,
                   float hock_lowest_y);

// Where `end` goes when the bone from `pivot` to it turns up about `pivot` by `lift` metres
// of height (down for a negative lift), in the vertical plane the bone lies in (`away`, unit
// and horizontal, when it is vertical): as far from the pivot as before, straight above or
// below it at most, and `end` itself at no lift.
Vec3 pivoted_up(Vec3 pivot, Vec3 end, float lift, Vec3 away);

// Turns a three-bone leg's hock-paw bone in its vertical plane (the one through it and the up
// axis) so the paw is at height `paw_y`, or straight above or below the hock where the bone is
// too short to reach it (pivoted_up about the hock). A bone pointing straight up or down
// turns toward `forward` (unit, horizontal).
// `positions`/`rotations` as for two_bone_one; the leg's are kept current.
void pivot_paw_to_height(const Chain& chain, const int32_t* parents, const float* offsets,
                         float* local, float* positions, float* rotations, float paw_y,
                         Vec3 forward);

// Raises the knee of a three-bone leg by `lift` metres (no further than the top of its circle)
// by turning the hip and knee about the hip-hock line: the hip, hock and paw stay where they
// are, the hock-paw bone keeps its rotation, and no lift leaves the leg as it was.
// `positions`/`rotations` as for two_bone_one; the leg's are kept current.
void swing_knee_up(const Chain& chain, const int32_t* parents, const float* offsets,
                   float* local, float* positions, float* rotations, float lift);

}  // namespace canis

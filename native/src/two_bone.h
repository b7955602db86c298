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
// on entry; the leg's are kept current. Updates `local` in place.
void two_bone_one(const Chain& chain, const int32_t* parents, const float* offsets,
                  float* local, float* positions, float* rotations, Vec3 target, Vec3 forward);

// Raises the knee of a three-bone leg by `lift` metres (no further than the top of its circle)
// by turning the hip and knee about the hip-hock line: the hip, hock and paw stay where they
// are, the hock-paw bone keeps its rotation, and no lift leaves the leg as it was.
// `positions`/`rotations` as for two_bone_one; the leg's are kept current.
void swing_knee_up(const Chain& chain, const int32_t* parents, const float* offsets,
                   float* local, float* positions, float* rotations, float lift);

}  // namespace canis

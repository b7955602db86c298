// Internal: CCD on one chain of one character, shared by canis_ccd_solve and the full-body IK.
#pragma once

#include <cstdint>
#include <vector>

#include "quat.h"

namespace canis {

// A chain checked against the hierarchy, with the ancestor path from its first joint to its
// effector (skipped joints included): the only joints a chain rotation moves that the
// effector depends on, so a CCD sweep costs O(path) instead of O(skeleton).
struct Chain {
    std::vector<int32_t> joints;
    std::vector<int32_t> path;
    std::vector<int32_t> path_position;  // per skeleton joint: index in `path`, or -1
};

bool chain_is_valid(int32_t n_joints, const int32_t* parents, int32_t chain_length,
                    const int32_t* chain);
Chain make_chain(int32_t n_joints, const int32_t* parents, int32_t chain_length,
                 const int32_t* chain);

// `positions`/`rotations` must hold the character's current global transforms on entry; the
// chain's path is kept current. Updates `local` in place; returns the final residual.
float ccd_one(const Chain& chain, const int32_t* parents, const float* offsets, float* local,
              float* positions, float* rotations, const float* joint_weights, Vec3 target,
              int32_t max_iterations, float tolerance);

}  // namespace canis

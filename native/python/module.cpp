// Python binding of the kinematics core. Arrays are passed as views (no copies): inputs must
// be C-contiguous float32/int32 and outputs are written in place, so the runtime can keep
// its state in preallocated numpy buffers. Shape checks live here, next to the raw pointers
// they protect, and raise ValueError naming the argument.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <stdexcept>
#include <string>

#include "canis/kinematics.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace {

template <typename T>
using In = nb::ndarray<const T, nb::c_contig, nb::device::cpu>;
template <typename T>
using Out = nb::ndarray<T, nb::c_contig, nb::device::cpu>;

template <typename Array>
void require_shape(const Array& array, const char* name, std::initializer_list<long> shape) {
    bool ok = array.ndim() == shape.size();
    size_t axis = 0;
    for (long expected : shape) {
        if (!ok) break;
        ok = expected < 0 || static_cast<long>(array.shape(axis)) == expected;
        ++axis;
    }
    if (ok) return;
    std::string wanted = "(", got = "(";
    for (long expected : shape) wanted += (expected < 0 ? "*" : std::to_string(expected)) + ",";
    for (size_t i = 0; i < array.ndim(); ++i) got += std::to_string(array.shape(i)) + ",";
    throw std::invalid_argument(std::string(name) + " must have shape " + wanted + ") but has " +
                                got + ")");
}

void check(int status) {
    if (status != CANIS_OK) throw std::invalid_argument(canis_status_message(status));
}

void forward_kinematics(In<int32_t> parents, In<float> offsets, In<float> local_rotations,
                        In<float> root_positions, Out<float> global_positions,
                        Out<float> global_rotations) {
    long joints = static_cast<long>(parents.shape(0));
    long characters = local_rotations.ndim() == 3 ? static_cast<long>(local_rotations.shape(0)) : -1;
    require_shape(parents, "parents", {joints});
    require_shape(offsets, "offsets", {joints, 3});
    require_shape(local_rotations, "local_rotations", {characters, joints, 4});
    require_shape(root_positions, "root_positions", {characters, 3});
    require_shape(global_positions, "global_positions", {characters, joints, 3});
    require_shape(global_rotations, "global_rotations", {characters, joints, 4});
    nb::gil_scoped_release release;
    check(canis_forward_kinematics(characters, joints, parents.data(), offsets.data(),
                                   local_rotations.data(), root_positions.data(),
                                   global_positions.data(), global_rotations.data()));
}

void ccd_solve(In<int32_t> parents, In<float> offsets, Out<float> local_rotations,
               In<float> root_positions, In<int32_t> chain, In<float> joint_weights,
               In<float> targets, int max_iterations, float tolerance, Out<float> residuals) {
    long joints = static_cast<long>(parents.shape(0));
    long characters = local_rotations.ndim() == 3 ? static_cast<long>(local_rotations.shape(0)) : -1;
    long chain_length = static_cast<long>(chain.shape(0));
    require_shape(parents, "parents", {joints});
    require_shape(offsets, "offsets", {joints, 3});
    require_shape(local_rotations, "local_rotations", {characters, joints, 4});
    require_shape(root_positions, "root_positions", {characters, 3});
    require_shape(chain, "chain", {chain_length});
    require_shape(joint_weights, "joint_weights", {chain_length - 1});
    require_shape(targets, "targets", {characters, 3});
    require_shape(residuals, "residuals", {characters});
    nb::gil_scoped_release release;
    check(canis_ccd_solve(characters, joints, parents.data(), offsets.data(),
                          local_rotations.data(), root_positions.data(), chain_length,
                          chain.data(), joint_weights.data(), targets.data(), max_iterations,
                          tolerance, residuals.data()));
}

void rotations_from_directions(In<int32_t> parents, In<float> forwards, In<float> ups,
                               In<float> root_yaws, Out<float> local_rotations,
                               Out<float> global_rotations) {
    long joints = static_cast<long>(parents.shape(0));
    long characters = forwards.ndim() == 3 ? static_cast<long>(forwards.shape(0)) : -1;
    require_shape(parents, "parents", {joints});
    require_shape(forwards, "forwards", {characters, joints, 3});
    require_shape(ups, "ups", {characters, joints, 3});
    require_shape(root_yaws, "root_yaws", {characters});
    require_shape(local_rotations, "local_rotations", {characters, joints, 4});
    require_shape(global_rotations, "global_rotations", {characters, joints, 4});
    nb::gil_scoped_release release;
    check(canis_rotations_from_directions(characters, joints, parents.data(), forwards.data(),
                                          ups.data(), root_yaws.data(), local_rotations.data(),
                                          global_rotations.data()));
}

void fullbody_ik(In<int32_t> parents, In<float> offsets, Out<float> local_rotations,
                 Out<float> hips, In<float> ground_y, In<float> facing, In<float> weights,
                 int front_legs, In<int32_t> leg_starts, In<int32_t> leg_joints,
                 In<float> leg_joint_weights, In<float> leg_lengths, float max_reach,
                 int iterations, float tolerance, In<float> heights, float cell_size,
                 float origin_x, float origin_z, Out<float> targets) {
    long joints = static_cast<long>(parents.shape(0));
    long characters = local_rotations.ndim() == 3 ? static_cast<long>(local_rotations.shape(0)) : -1;
    long legs = static_cast<long>(leg_lengths.shape(0));
    long flat = static_cast<long>(leg_joints.shape(0));
    require_shape(parents, "parents", {joints});
    require_shape(offsets, "offsets", {joints, 3});
    require_shape(local_rotations, "local_rotations", {characters, joints, 4});
    require_shape(hips, "hips", {characters, 3});
    require_shape(ground_y, "ground_y", {characters});
    require_shape(facing, "facing", {characters, 3});
    require_shape(weights, "weights", {characters});
    require_shape(leg_starts, "leg_starts", {legs + 1});
    require_shape(leg_joint_weights, "leg_joint_weights", {flat});
    require_shape(heights, "heights", {-1, -1});
    require_shape(targets, "targets", {characters, legs, 3});
    const int32_t* starts = leg_starts.data();
    if (starts[0] != 0 || starts[legs] != flat)
        throw std::invalid_argument("leg_starts must run from 0 to len(leg_joints)");
    for (long k = 0; k < legs; ++k)
        if (starts[k + 1] < starts[k])
            throw std::invalid_argument("leg_starts must not decrease");
    nb::gil_scoped_release release;
    check(canis_fullbody_ik(characters, joints, parents.data(), offsets.data(),
                            local_rotations.data(), hips.data(), ground_y.data(), facing.data(),
                            weights.data(), legs, front_legs, starts, leg_joints.data(),
                            leg_joint_weights.data(), leg_lengths.data(), max_reach, iterations,
                            tolerance, heights.data(), static_cast<int32_t>(heights.shape(0)),
                            static_cast<int32_t>(heights.shape(1)), cell_size, origin_x,
                            origin_z, targets.data()));
}

void terrain_sample(In<float> heights, float cell_size, float origin_x, float origin_z,
                    In<float> points_xz, Out<float> out_heights, Out<float> out_normals) {
    long points = points_xz.ndim() == 2 ? static_cast<long>(points_xz.shape(0)) : -1;
    require_shape(heights, "heights", {-1, -1});
    require_shape(points_xz, "points_xz", {points, 2});
    require_shape(out_heights, "out_heights", {points});
    require_shape(out_normals, "out_normals", {points, 3});
    nb::gil_scoped_release release;
    check(canis_terrain_sample(heights.data(), static_cast<int32_t>(heights.shape(0)),
                               static_cast<int32_t>(heights.shape(1)), cell_size, origin_x,
                               origin_z, points, points_xz.data(), out_heights.data(),
                               out_normals.data()));
}

}  // namespace

NB_MODULE(_kinematics, m) {
    m.doc() = "canis native kinematics core (see runtime/kinematics.py for the documented API)";
    // noconvert(): a dtype or layout mismatch must fail loudly rather than silently copy, or
    // outputs would be written into a temporary and lost.
    m.def("forward_kinematics", &forward_kinematics, "parents"_a.noconvert(),
          "offsets"_a.noconvert(), "local_rotations"_a.noconvert(),
          "root_positions"_a.noconvert(), "global_positions"_a.noconvert(),
          "global_rotations"_a.noconvert());
    m.def("ccd_solve", &ccd_solve, "parents"_a.noconvert(), "offsets"_a.noconvert(),
          "local_rotations"_a.noconvert(), "root_positions"_a.noconvert(),
          "chain"_a.noconvert(), "joint_weights"_a.noconvert(), "targets"_a.noconvert(),
          "max_iterations"_a, "tolerance"_a, "residuals"_a.noconvert());
    m.def("rotations_from_directions", &rotations_from_directions, "parents"_a.noconvert(),
          "forwards"_a.noconvert(), "ups"_a.noconvert(), "root_yaws"_a.noconvert(),
          "local_rotations"_a.noconvert(), "global_rotations"_a.noconvert());
    m.def("fullbody_ik", &fullbody_ik, "parents"_a.noconvert(), "offsets"_a.noconvert(),
          "local_rotations"_a.noconvert(), "hips"_a.noconvert(), "ground_y"_a.noconvert(),
          "facing"_a.noconvert(), "weights"_a.noconvert(), "front_legs"_a,
          "leg_starts"_a.noconvert(), "leg_joints"_a.noconvert(),
          "leg_joint_weights"_a.noconvert(), "leg_lengths"_a.noconvert(), "max_reach"_a,
          "iterations"_a, "tolerance"_a, "heights"_a.noconvert(), "cell_size"_a, "origin_x"_a,
          "origin_z"_a, "targets"_a.noconvert());
    m.def("terrain_sample", &terrain_sample, "heights"_a.noconvert(), "cell_size"_a,
          "origin_x"_a, "origin_z"_a, "points_xz"_a.noconvert(), "out_heights"_a.noconvert(),
          "out_normals"_a.noconvert());
}

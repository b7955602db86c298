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
                 In<float> leg_joint_weights, In<float> leg_lengths, In<int32_t> tail_joints,
                 float max_reach, int iterations, float tolerance, In<float> heights,
                 float cell_size, float origin_x, float origin_z, Out<float> targets) {
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
    require_shape(tail_joints, "tail_joints", {-1});
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
                            leg_joint_weights.data(), leg_lengths.data(),
                            static_cast<int32_t>(tail_joints.shape(0)), tail_joints.data(),
                            max_reach, iterations, tolerance, heights.data(),
                            static_cast<int32_t>(heights.shape(0)),
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


// The per-frame root motion (native/src/root_motion.cpp), float64 like the runtime's state.
void extrapolate_trajectory(In<double> root_xz, In<double> root_velocity_xz, In<double> root_yaw,
                            In<double> action_weights, In<double> commanded_velocity_xz,
                            In<double> commanded_yaw, In<double> commanded_actions,
                            In<double> middle_weights, In<double> sample_weights, double step_s,
                            Out<double> positions_xz, Out<double> directions_xz,
                            Out<double> velocities_xz, Out<double> speeds, Out<double> actions) {
    long characters = root_yaw.ndim() == 1 ? static_cast<long>(root_yaw.shape(0)) : -1;
    long samples = sample_weights.ndim() == 1 ? static_cast<long>(sample_weights.shape(0)) : -1;
    long count = action_weights.ndim() == 2 ? static_cast<long>(action_weights.shape(1)) : -1;
    require_shape(root_yaw, "root_yaw", {characters});
    require_shape(root_xz, "root_xz", {characters, 2});
    require_shape(root_velocity_xz, "root_velocity_xz", {characters, 2});
    require_shape(action_weights, "action_weights", {characters, count});
    require_shape(commanded_velocity_xz, "commanded_velocity_xz", {characters, 2});
    require_shape(commanded_yaw, "commanded_yaw", {characters});
    require_shape(commanded_actions, "commanded_actions", {characters, count});
    require_shape(middle_weights, "middle_weights", {samples});
    require_shape(sample_weights, "sample_weights", {samples});
    require_shape(positions_xz, "positions_xz", {characters, samples, 2});
    require_shape(directions_xz, "directions_xz", {characters, samples, 2});
    require_shape(velocities_xz, "velocities_xz", {characters, samples, 2});
    require_shape(speeds, "speeds", {characters, samples});
    require_shape(actions, "actions", {characters, samples, count});
    nb::gil_scoped_release release;  // a transition worker's Python may run meanwhile
    check(canis_extrapolate_trajectory(
        characters, samples, count, root_xz.data(), root_velocity_xz.data(), root_yaw.data(),
        action_weights.data(), commanded_velocity_xz.data(), commanded_yaw.data(),
        commanded_actions.data(), middle_weights.data(), sample_weights.data(), step_s,
        positions_xz.data(), directions_xz.data(), velocities_xz.data(), speeds.data(),
        actions.data()));
}

void trajectory_input(int past, int past_start, int past_step, In<double> history_positions_xz,
                      In<double> history_directions_xz, In<double> history_velocities_xz,
                      In<double> history_speeds, In<double> history_actions, In<double> root_xz,
                      In<double> root_yaw, In<double> root_velocity_xz, In<double> action_weights,
                      In<double> desired_positions_xz, In<double> desired_directions_xz,
                      In<double> desired_velocities_xz, In<double> desired_speeds,
                      In<double> desired_actions, In<double> predicted_positions_xz,
                      In<double> predicted_directions_xz, In<double> predicted_velocities_xz,
                      double tau, Out<float> x, In<int32_t> field_offsets, int row_stride) {
    long characters = root_yaw.ndim() == 1 ? static_cast<long>(root_yaw.shape(0)) : -1;
    long frames = history_speeds.ndim() == 2 ? static_cast<long>(history_speeds.shape(1)) : -1;
    long future = desired_speeds.ndim() == 2 ? static_cast<long>(desired_speeds.shape(1)) : -1;
    long count = action_weights.ndim() == 2 ? static_cast<long>(action_weights.shape(1)) : -1;
    long width = x.ndim() == 2 ? static_cast<long>(x.shape(1)) : -1;
    require_shape(root_yaw, "root_yaw", {characters});
    require_shape(history_positions_xz, "history_positions_xz", {characters, frames, 2});
    require_shape(history_directions_xz, "history_directions_xz", {characters, frames, 2});
    require_shape(history_velocities_xz, "history_velocities_xz", {characters, frames, 2});
    require_shape(history_speeds, "history_speeds", {characters, frames});
    require_shape(history_actions, "history_actions", {characters, frames, count});
    require_shape(root_xz, "root_xz", {characters, 2});
    require_shape(root_velocity_xz, "root_velocity_xz", {characters, 2});
    require_shape(action_weights, "action_weights", {characters, count});
    require_shape(desired_positions_xz, "desired_positions_xz", {characters, future, 2});
    require_shape(desired_directions_xz, "desired_directions_xz", {characters, future, 2});
    require_shape(desired_velocities_xz, "desired_velocities_xz", {characters, future, 2});
    require_shape(desired_speeds, "desired_speeds", {characters, future});
    require_shape(desired_actions, "desired_actions", {characters, future, count});
    require_shape(predicted_positions_xz, "predicted_positions_xz", {characters, future, 2});
    require_shape(predicted_directions_xz, "predicted_directions_xz", {characters, future, 2});
    require_shape(predicted_velocities_xz, "predicted_velocities_xz", {characters, future, 2});
    require_shape(x, "x", {characters, width});
    require_shape(field_offsets, "field_offsets", {5});
    const int32_t* offsets = field_offsets.data();
    for (int f = 0; f < 5; ++f) {
        long size = f == 3 ? 1 : (f == 4 ? count : 2);
        if (offsets[f] < 0 || offsets[f] + size > row_stride)
            throw std::invalid_argument("field_offsets must place every field inside a row");
    }
    if (row_stride <= 0 || static_cast<long>(row_stride) * (past + 1 + future) > width)
        throw std::invalid_argument("x is too narrow for the trajectory's rows");
    nb::gil_scoped_release release;  // a transition worker's Python may run meanwhile
    check(canis_trajectory_input(
        characters, past, future, frames, past_start, past_step, count,
        history_positions_xz.data(), history_directions_xz.data(), history_velocities_xz.data(),
        history_speeds.data(), history_actions.data(), root_xz.data(), root_yaw.data(),
        root_velocity_xz.data(), action_weights.data(), desired_positions_xz.data(),
        desired_directions_xz.data(), desired_velocities_xz.data(), desired_speeds.data(),
        desired_actions.data(), predicted_positions_xz.data(), predicted_directions_xz.data(),
        predicted_velocities_xz.data(), tau, x.data(), width, offsets, row_stride));
}

void advance_root(double dt_s, double joint_position_blend, In<double> root_velocity_local,
                  In<double> yaw_velocity, In<double> joint_positions,
                  In<double> joint_velocities, In<double> future_positions_local,
                  In<double> future_directions_local, In<double> future_velocities_local,
                  In<double> commanded_actions, In<double> speed_now,
                  In<double> previous_positions, Out<double> root_xz, Out<double> root_yaw,
                  Out<double> root_velocity_xz, Out<double> positions,
                  Out<double> future_positions_xz, Out<double> future_directions_xz,
                  Out<double> future_velocities_xz, Out<double> history_positions_xz,
                  Out<double> history_directions_xz, Out<double> history_velocities_xz,
                  Out<double> history_speeds, Out<double> history_actions) {
    long characters = root_yaw.ndim() == 1 ? static_cast<long>(root_yaw.shape(0)) : -1;
    long joints = joint_positions.ndim() == 3 ? static_cast<long>(joint_positions.shape(1)) : -1;
    long future = future_positions_local.ndim() == 3
                      ? static_cast<long>(future_positions_local.shape(1)) : -1;
    long frames = history_speeds.ndim() == 2 ? static_cast<long>(history_speeds.shape(1)) : -1;
    long count = commanded_actions.ndim() == 2 ? static_cast<long>(commanded_actions.shape(1))
                                               : -1;
    require_shape(root_yaw, "root_yaw", {characters});
    require_shape(root_velocity_local, "root_velocity_local", {characters, 2});
    require_shape(yaw_velocity, "yaw_velocity", {characters});
    require_shape(joint_positions, "joint_positions", {characters, joints, 3});
    require_shape(joint_velocities, "joint_velocities", {characters, joints, 3});
    require_shape(future_positions_local, "future_positions_local", {characters, future, 2});
    require_shape(future_directions_local, "future_directions_local", {characters, future, 2});
    require_shape(future_velocities_local, "future_velocities_local", {characters, future, 2});
    require_shape(commanded_actions, "commanded_actions", {characters, count});
    require_shape(speed_now, "speed_now", {characters});
    require_shape(previous_positions, "previous_positions", {characters, joints, 3});
    require_shape(root_xz, "root_xz", {characters, 2});
    require_shape(root_velocity_xz, "root_velocity_xz", {characters, 2});
    require_shape(positions, "positions", {characters, joints, 3});
    require_shape(future_positions_xz, "future_positions_xz", {characters, future, 2});
    require_shape(future_directions_xz, "future_directions_xz", {characters, future, 2});
    require_shape(future_velocities_xz, "future_velocities_xz", {characters, future, 2});
    require_shape(history_positions_xz, "history_positions_xz", {characters, frames, 2});
    require_shape(history_directions_xz, "history_directions_xz", {characters, frames, 2});
    require_shape(history_velocities_xz, "history_velocities_xz", {characters, frames, 2});
    require_shape(history_speeds, "history_speeds", {characters, frames});
    require_shape(history_actions, "history_actions", {characters, frames, count});
    nb::gil_scoped_release release;  // a transition worker's Python may run meanwhile
    check(canis_advance_root(
        characters, joints, future, frames, count, dt_s, joint_position_blend,
        root_velocity_local.data(), yaw_velocity.data(), joint_positions.data(),
        joint_velocities.data(), future_positions_local.data(), future_directions_local.data(),
        future_velocities_local.data(), commanded_actions.data(), speed_now.data(),
        previous_positions.data(), root_xz.data(), root_yaw.data(), root_velocity_xz.data(),
        positions.data(), future_positions_xz.data(), future_directions_xz.data(),
        future_velocities_xz.data(), history_positions_xz.data(), history_directions_xz.data(),
        history_velocities_xz.data(), history_speeds.data(), history_actions.data()));
}


void trusted_axes(double dt_s, double trusted_from, double trusted_at, In<double> yaw_velocity,
                  In<double> previous_forwards, In<double> previous_ups, Out<double> forwards,
                  Out<double> ups) {
    long characters = yaw_velocity.ndim() == 1 ? static_cast<long>(yaw_velocity.shape(0)) : -1;
    long joints = forwards.ndim() == 3 ? static_cast<long>(forwards.shape(1)) : -1;
    require_shape(yaw_velocity, "yaw_velocity", {characters});
    require_shape(previous_forwards, "previous_forwards", {characters, joints, 3});
    require_shape(previous_ups, "previous_ups", {characters, joints, 3});
    require_shape(forwards, "forwards", {characters, joints, 3});
    require_shape(ups, "ups", {characters, joints, 3});
    nb::gil_scoped_release release;
    check(canis_trusted_axes(characters, joints, dt_s, trusted_from, trusted_at,
                             yaw_velocity.data(), previous_forwards.data(), previous_ups.data(),
                             forwards.data(), ups.data()));
}

void display_pose(In<int32_t> parents, In<float> offsets, In<double> positions_root,
                  In<double> forwards_root, In<double> ups_root, In<double> velocities_root,
                  In<double> root_xz, In<double> root_yaw, In<int32_t> paws, Out<double> paw_xz,
                  Out<double> paw_speeds, double dt_s, double contact_height_m,
                  double contact_speed_mps, In<float> ik_weights,
                  int front_legs, In<int32_t> leg_starts, In<int32_t> leg_joints,
                  In<float> leg_joint_weights, In<float> leg_lengths,
                  In<int32_t> tail_joints, float max_reach,
                  int iterations, float tolerance, In<float> heights, float cell_size,
                  float origin_x, float origin_z, bool only_below_ground, float below_ground_m,
                  bool stop_before_fk, Out<float> local_rotations, Out<float> hips,
                  Out<float> positions, Out<float> rotations, Out<uint8_t> contacts,
                  Out<int32_t> solved) {
    long joints = static_cast<long>(parents.shape(0));
    long characters = root_yaw.ndim() == 1 ? static_cast<long>(root_yaw.shape(0)) : -1;
    long paw_count = static_cast<long>(paws.shape(0));
    long legs = static_cast<long>(leg_lengths.shape(0));
    long flat = static_cast<long>(leg_joints.shape(0));
    require_shape(parents, "parents", {joints});
    require_shape(offsets, "offsets", {joints, 3});
    require_shape(positions_root, "positions_root", {characters, joints, 3});
    require_shape(forwards_root, "forwards_root", {characters, joints, 3});
    require_shape(ups_root, "ups_root", {characters, joints, 3});
    require_shape(velocities_root, "velocities_root", {characters, joints, 3});
    require_shape(root_xz, "root_xz", {characters, 2});
    require_shape(root_yaw, "root_yaw", {characters});
    require_shape(paws, "paws", {paw_count});
    require_shape(paw_xz, "paw_xz", {characters, paw_count, 2});
    require_shape(paw_speeds, "paw_speeds", {characters, paw_count});
    require_shape(ik_weights, "ik_weights", {characters});
    require_shape(leg_starts, "leg_starts", {legs + 1});
    require_shape(leg_joint_weights, "leg_joint_weights", {flat});
    require_shape(tail_joints, "tail_joints", {-1});
    require_shape(heights, "heights", {-1, -1});
    // The outputs the call does not write may be empty arrays.
    if (stop_before_fk) {
        require_shape(local_rotations, "local_rotations", {characters, joints, 4});
        require_shape(hips, "hips", {characters, 3});
    } else {
        require_shape(positions, "positions", {characters, joints, 3});
        require_shape(rotations, "rotations", {characters, joints, 4});
    }
    require_shape(contacts, "contacts", {characters, paw_count});
    require_shape(solved, "solved", {1});
    const int32_t* starts = leg_starts.data();
    if (starts[0] != 0 || starts[legs] != flat)
        throw std::invalid_argument("leg_starts must run from 0 to len(leg_joints)");
    nb::gil_scoped_release release;
    check(canis_display_pose(
        characters, joints, parents.data(), offsets.data(), positions_root.data(),
        forwards_root.data(), ups_root.data(), velocities_root.data(), root_xz.data(),
        root_yaw.data(), paw_count, paws.data(), paw_xz.data(), paw_speeds.data(), dt_s,
        contact_height_m, contact_speed_mps,
        ik_weights.data(), legs, front_legs, starts, leg_joints.data(), leg_joint_weights.data(),
        leg_lengths.data(), static_cast<int32_t>(tail_joints.shape(0)), tail_joints.data(),
        max_reach, iterations, tolerance, heights.data(),
        static_cast<int32_t>(heights.shape(0)), static_cast<int32_t>(heights.shape(1)),
        cell_size, origin_x, origin_z, only_below_ground ? 1 : 0, below_ground_m,
        stop_before_fk ? 1 : 0, local_rotations.data(), hips.data(), positions.data(),
        rotations.data(), contacts.data(), solved.data()));
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
          "leg_joint_weights"_a.noconvert(), "leg_lengths"_a.noconvert(),
          "tail_joints"_a.noconvert(), "max_reach"_a, "iterations"_a, "tolerance"_a,
          "heights"_a.noconvert(), "cell_size"_a, "origin_x"_a,
          "origin_z"_a, "targets"_a.noconvert());
    m.def("terrain_sample", &terrain_sample, "heights"_a.noconvert(), "cell_size"_a,
          "origin_x"_a, "origin_z"_a, "points_xz"_a.noconvert(), "out_heights"_a.noconvert(),
          "out_normals"_a.noconvert());
    // The root motion's inputs may be converted (a contiguous float64 copy of an input is
    // harmless, and cheaper made here than checked in Python); its outputs may not.
    m.def("extrapolate_trajectory", &extrapolate_trajectory, "root_xz"_a,
          "root_velocity_xz"_a, "root_yaw"_a,
          "action_weights"_a, "commanded_velocity_xz"_a,
          "commanded_yaw"_a, "commanded_actions"_a,
          "middle_weights"_a, "sample_weights"_a, "step_s"_a,
          "positions_xz"_a.noconvert(), "directions_xz"_a.noconvert(),
          "velocities_xz"_a.noconvert(), "speeds"_a.noconvert(), "actions"_a.noconvert());
    m.def("trajectory_input", &trajectory_input, "past"_a, "past_start"_a, "past_step"_a,
          "history_positions_xz"_a, "history_directions_xz"_a,
          "history_velocities_xz"_a, "history_speeds"_a,
          "history_actions"_a, "root_xz"_a, "root_yaw"_a,
          "root_velocity_xz"_a, "action_weights"_a,
          "desired_positions_xz"_a, "desired_directions_xz"_a,
          "desired_velocities_xz"_a, "desired_speeds"_a,
          "desired_actions"_a, "predicted_positions_xz"_a,
          "predicted_directions_xz"_a, "predicted_velocities_xz"_a,
          "tau"_a, "x"_a.noconvert(), "field_offsets"_a, "row_stride"_a);
    m.def("trusted_axes", &trusted_axes, "dt_s"_a, "trusted_from"_a, "trusted_at"_a,
          "yaw_velocity"_a, "previous_forwards"_a, "previous_ups"_a,
          "forwards"_a.noconvert(), "ups"_a.noconvert(),
          "runtime/pose.py trusted_rotations: shrunk predicted axes eased to the previous ones");
    m.def("advance_root", &advance_root, "dt_s"_a, "joint_position_blend"_a,
          "root_velocity_local"_a, "yaw_velocity"_a,
          "joint_positions"_a, "joint_velocities"_a,
          "future_positions_local"_a, "future_directions_local"_a,
          "future_velocities_local"_a, "commanded_actions"_a,
          "speed_now"_a, "previous_positions"_a, "root_xz"_a.noconvert(),
          "root_yaw"_a.noconvert(), "root_velocity_xz"_a.noconvert(), "positions"_a.noconvert(),
          "future_positions_xz"_a.noconvert(), "future_directions_xz"_a.noconvert(),
          "future_velocities_xz"_a.noconvert(), "history_positions_xz"_a.noconvert(),
          "history_directions_xz"_a.noconvert(), "history_velocities_xz"_a.noconvert(),
          "history_speeds"_a.noconvert(), "history_actions"_a.noconvert());
    m.def("display_pose", &display_pose, "parents"_a.noconvert(), "offsets"_a.noconvert(),
          "positions_root"_a, "forwards_root"_a, "ups_root"_a, "velocities_root"_a, "root_xz"_a,
          "root_yaw"_a, "paws"_a, "paw_xz"_a.noconvert(), "paw_speeds"_a.noconvert(), "dt_s"_a,
          "contact_height_m"_a, "contact_speed_mps"_a,
          "ik_weights"_a, "front_legs"_a, "leg_starts"_a.noconvert(),
          "leg_joints"_a.noconvert(), "leg_joint_weights"_a.noconvert(),
          "leg_lengths"_a.noconvert(), "tail_joints"_a.noconvert(), "max_reach"_a,
          "iterations"_a, "tolerance"_a, "heights"_a.noconvert(), "cell_size"_a, "origin_x"_a,
          "origin_z"_a, "only_below_ground"_a, "below_ground_m"_a, "stop_before_fk"_a,
          "local_rotations"_a.noconvert(), "hips"_a.noconvert(), "positions"_a.noconvert(),
          "rotations"_a.noconvert(), "contacts"_a.noconvert(), "solved"_a.noconvert());
}

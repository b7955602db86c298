// The per-frame ground-plane root motion of runtime/trajectory.py and runtime/controller.py in
// one call per stage: in numpy each of these is a few dozen calls on arrays of 2-80 values,
// whose per-call cost (not their arithmetic) was a third of a frame's work outside inference.
// The numpy code stays the definition; tests/test_native_frame.py checks these against it.
//
// Double precision throughout (the runtime keeps its state in float64), and the operations in
// numpy's order, so the results differ from numpy's only where a sine, a cosine or numpy's
// matmul rounds differently (about 1e-16 relative).
#include <cmath>
#include <cstring>

#include "canis/kinematics.h"

namespace {

constexpr double kPi = 3.14159265358979323846;

// numpy's np.remainder(a, b) for b > 0: fmod, moved into [0, b) when it has a's sign.
double remainder_like_numpy(double a, double b) {
    double mod = std::fmod(a, b);
    if (mod != 0.0) {
        if ((b < 0) != (mod < 0)) mod += b;
    } else {
        mod = std::copysign(0.0, b);
    }
    return mod;
}

// runtime/root.py wrap_angle_rad: (a + pi) % 2pi - pi.
double wrap_angle(double a) { return remainder_like_numpy(a + kPi, 2.0 * kPi) - kPi; }

// runtime/root.py rotate_xz for one vector: the row vector (x, z) times [[c, -s], [s, c]].
void rotate(double x, double z, double c, double s, double* out) {
    out[0] = x * c + z * s;
    out[1] = x * -s + z * c;
}

}  // namespace

extern "C" int canis_extrapolate_trajectory(
    int32_t n_characters, int32_t samples, int32_t n_actions, const double* root_xz,
    const double* root_velocity_xz, const double* root_yaw, const double* action_weights,
    const double* commanded_velocity_xz, const double* commanded_yaw,
    const double* commanded_actions, const double* middle_weights, const double* sample_weights,
    double step_s, double* positions_xz, double* directions_xz, double* velocities_xz,
    double* speeds, double* actions) {
    if (!root_xz || !root_velocity_xz || !root_yaw || !action_weights || !commanded_velocity_xz ||
        !commanded_yaw || !commanded_actions || !middle_weights || !sample_weights ||
        !positions_xz || !directions_xz || !velocities_xz || !speeds || !actions)
        return CANIS_ERROR_NULL_POINTER;
    if (n_characters < 0 || samples <= 0 || n_actions <= 0) return CANIS_ERROR_BAD_SIZE;
    for (int32_t i = 0; i < n_characters; ++i) {
        const double* now = root_velocity_xz + 2 * i;
        const double* asked = commanded_velocity_xz + 2 * i;
        const double change[2] = {asked[0] - now[0], asked[1] - now[1]};
        const double turn = wrap_angle(commanded_yaw[i] - root_yaw[i]);
        const double speed = std::sqrt(asked[0] * asked[0] + asked[1] * asked[1]);
        const double* weights_now = action_weights + n_actions * i;
        const double* weights_asked = commanded_actions + n_actions * i;
        double walked[2] = {0.0, 0.0};
        for (int32_t k = 0; k < samples; ++k) {
            const int64_t at = static_cast<int64_t>(i) * samples + k;
            const double w = sample_weights[k];
            for (int c = 0; c < 2; ++c) {
                // Velocity at the middle of each step, integrated (np.add.accumulate's order).
                const double step = (now[c] + change[c] * middle_weights[k]) * step_s;
                walked[c] = k == 0 ? step : walked[c] + step;
                positions_xz[2 * at + c] = walked[c] + root_xz[2 * i + c];
                velocities_xz[2 * at + c] = now[c] + change[c] * w;
            }
            const double yaw = root_yaw[i] + w * turn;
            directions_xz[2 * at] = std::sin(yaw);
            directions_xz[2 * at + 1] = std::cos(yaw);
            speeds[at] = speed;
            for (int32_t a = 0; a < n_actions; ++a)
                actions[at * n_actions + a] =
                    (weights_asked[a] - weights_now[a]) * w + weights_now[a];
        }
    }
    return CANIS_OK;
}

extern "C" int canis_trajectory_input(
    int32_t n_characters, int32_t past, int32_t future, int32_t history_frames,
    int32_t past_start, int32_t past_step, int32_t n_actions, const double* history_positions_xz,
    const double* history_directions_xz, const double* history_velocities_xz,
    const double* history_speeds, const double* history_actions, const double* root_xz,
    const double* root_yaw, const double* root_velocity_xz, const double* action_weights,
    const double* desired_positions_xz, const double* desired_directions_xz,
    const double* desired_velocities_xz, const double* desired_speeds,
    const double* desired_actions, const double* predicted_positions_xz,
    const double* predicted_directions_xz, const double* predicted_velocities_xz, double tau,
    float* x, int32_t x_stride, const int32_t* field_offsets, int32_t row_stride) {
    if (!history_positions_xz || !history_directions_xz || !history_velocities_xz ||
        !history_speeds || !history_actions || !root_xz || !root_yaw || !root_velocity_xz ||
        !action_weights || !desired_positions_xz || !desired_directions_xz ||
        !desired_velocities_xz || !desired_speeds || !desired_actions || !x || !field_offsets)
        return CANIS_ERROR_NULL_POINTER;
    const bool blended = predicted_positions_xz != nullptr && tau < 1.0;
    if (blended && (!predicted_directions_xz || !predicted_velocities_xz))
        return CANIS_ERROR_NULL_POINTER;
    if (n_characters < 0 || past < 0 || future <= 0 || n_actions <= 0 || past_step <= 0 ||
        past_start < 0 || past_start + (past - 1) * past_step >= history_frames)
        return CANIS_ERROR_BAD_SIZE;
    const int32_t position = field_offsets[0], direction = field_offsets[1],
                  velocity = field_offsets[2], speed = field_offsets[3], action = field_offsets[4];
    for (int32_t i = 0; i < n_characters; ++i) {
        // Into the root frame: minus the root's position, turned by minus its yaw.
        const double c = std::cos(-root_yaw[i]), s = std::sin(-root_yaw[i]);
        const double* root = root_xz + 2 * i;
        float* rows = x + static_cast<int64_t>(i) * x_stride;
        const double heading[2] = {std::sin(root_yaw[i]), std::cos(root_yaw[i])};
        for (int32_t k = 0; k < past + 1 + future; ++k) {
            double p[2], d[2], v[2], sp;
            const double* act;
            if (k < past) {  // the path walked, from the history
                const int64_t at = static_cast<int64_t>(i) * history_frames + past_start +
                                   static_cast<int64_t>(k) * past_step;
                std::memcpy(p, history_positions_xz + 2 * at, sizeof p);
                std::memcpy(d, history_directions_xz + 2 * at, sizeof d);
                std::memcpy(v, history_velocities_xz + 2 * at, sizeof v);
                sp = history_speeds[at];
                act = history_actions + at * n_actions;
            } else if (k == past) {  // now
                std::memcpy(p, root, sizeof p);
                std::memcpy(d, heading, sizeof d);
                std::memcpy(v, root_velocity_xz + 2 * i, sizeof v);
                sp = desired_speeds[static_cast<int64_t>(i) * future];
                act = action_weights + static_cast<int64_t>(i) * n_actions;
            } else {  // the future: desired blended with the network's last prediction
                const int64_t at = static_cast<int64_t>(i) * future + (k - past - 1);
                for (int e = 0; e < 2; ++e) {
                    p[e] = desired_positions_xz[2 * at + e];
                    d[e] = desired_directions_xz[2 * at + e];
                    v[e] = desired_velocities_xz[2 * at + e];
                    if (blended) {
                        p[e] = tau * p[e] + (1.0 - tau) * predicted_positions_xz[2 * at + e];
                        d[e] = tau * d[e] + (1.0 - tau) * predicted_directions_xz[2 * at + e];
                        v[e] = tau * v[e] + (1.0 - tau) * predicted_velocities_xz[2 * at + e];
                    }
                }
                if (blended) {  // renormalised, as trajectory.blend does
                    const double length = std::fmax(std::sqrt(d[0] * d[0] + d[1] * d[1]), 1e-9);
                    d[0] /= length;
                    d[1] /= length;
                }
                sp = desired_speeds[at];
                act = desired_actions + at * n_actions;
            }
            double local[2];
            float* row = rows + static_cast<int64_t>(k) * row_stride;
            rotate(p[0] - root[0], p[1] - root[1], c, s, local);
            row[position] = static_cast<float>(local[0]);
            row[position + 1] = static_cast<float>(local[1]);
            rotate(d[0], d[1], c, s, local);
            row[direction] = static_cast<float>(local[0]);
            row[direction + 1] = static_cast<float>(local[1]);
            rotate(v[0], v[1], c, s, local);
            row[velocity] = static_cast<float>(local[0]);
            row[velocity + 1] = static_cast<float>(local[1]);
            row[speed] = static_cast<float>(sp);
            for (int32_t a = 0; a < n_actions; ++a) row[action + a] = static_cast<float>(act[a]);
        }
    }
    return CANIS_OK;
}

extern "C" int canis_advance_root(
    int32_t n_characters, int32_t n_joints, int32_t future, int32_t history_frames,
    int32_t n_actions, double dt_s, double joint_position_blend, const double* root_velocity_local,
    const double* yaw_velocity, const double* joint_positions, const double* joint_velocities,
    const double* future_positions_local, const double* future_directions_local,
    const double* future_velocities_local, const double* commanded_actions,
    const double* speed_now, const double* previous_positions, double* root_xz, double* root_yaw,
    double* root_velocity_xz, double* positions, double* future_positions_xz,
    double* future_directions_xz, double* future_velocities_xz, double* history_positions_xz,
    double* history_directions_xz, double* history_velocities_xz, double* history_speeds,
    double* history_actions) {
    if (!root_velocity_local || !yaw_velocity || !joint_positions || !joint_velocities ||
        !future_positions_local || !future_directions_local || !future_velocities_local ||
        !commanded_actions || !speed_now || !previous_positions || !root_xz || !root_yaw ||
        !root_velocity_xz || !positions || !future_positions_xz || !future_directions_xz ||
        !future_velocities_xz || !history_positions_xz || !history_directions_xz ||
        !history_velocities_xz || !history_speeds || !history_actions)
        return CANIS_ERROR_NULL_POINTER;
    if (n_characters < 0 || n_joints <= 0 || future <= 0 || history_frames <= 0 ||
        n_actions <= 0 || !(dt_s > 0.0))
        return CANIS_ERROR_BAD_SIZE;
    const int32_t h = history_frames;
    for (int32_t i = 0; i < n_characters; ++i) {
        // The root update, predicted in the previous root's frame (Controller._apply).
        const double step_local[2] = {root_velocity_local[2 * i] * dt_s,
                                      root_velocity_local[2 * i + 1] * dt_s};
        const double turn = yaw_velocity[i] * dt_s;
        double step_world[2];
        rotate(step_local[0], step_local[1], std::cos(root_yaw[i]), std::sin(root_yaw[i]),
               step_world);
        root_xz[2 * i] += step_world[0];
        root_xz[2 * i + 1] += step_world[1];
        root_yaw[i] = wrap_angle(root_yaw[i] + turn);
        root_velocity_xz[2 * i] = step_world[0] / dt_s;
        root_velocity_xz[2 * i + 1] = step_world[1] / dt_s;

        // runtime/pose.py next_local_pose: the previous positions seen from the new
        // root, advanced by the predicted velocities, averaged with the predicted positions.
        const double c_turn = std::cos(-turn), s_turn = std::sin(-turn);
        for (int32_t j = 0; j < n_joints; ++j) {
            const int64_t at = (static_cast<int64_t>(i) * n_joints + j) * 3;
            double moved[3];
            rotate(previous_positions[at] - step_local[0],
                   previous_positions[at + 2] - step_local[1], c_turn, s_turn, moved);
            moved[2] = moved[1];
            moved[1] = previous_positions[at + 1];
            for (int e = 0; e < 3; ++e) {
                const double advanced = moved[e] + joint_velocities[at + e] * dt_s;
                positions[at + e] =
                    joint_positions[at + e] +
                    (advanced - joint_positions[at + e]) * joint_position_blend;
            }
        }

        // The predicted future into the world, from the new root.
        const double c = std::cos(root_yaw[i]), s = std::sin(root_yaw[i]);
        for (int32_t k = 0; k < future; ++k) {
            const int64_t at = (static_cast<int64_t>(i) * future + k) * 2;
            rotate(future_positions_local[at], future_positions_local[at + 1], c, s,
                   future_positions_xz + at);
            future_positions_xz[at] += root_xz[2 * i];
            future_positions_xz[at + 1] += root_xz[2 * i + 1];
            rotate(future_directions_local[at], future_directions_local[at + 1], c, s,
                   future_directions_xz + at);
            rotate(future_velocities_local[at], future_velocities_local[at + 1], c, s,
                   future_velocities_xz + at);
        }

        // The history, newest last: shifted by one frame, the new root appended.
        double* hp = history_positions_xz + static_cast<int64_t>(i) * h * 2;
        double* hd = history_directions_xz + static_cast<int64_t>(i) * h * 2;
        double* hv = history_velocities_xz + static_cast<int64_t>(i) * h * 2;
        double* hs = history_speeds + static_cast<int64_t>(i) * h;
        double* ha = history_actions + static_cast<int64_t>(i) * h * n_actions;
        std::memmove(hp, hp + 2, sizeof(double) * 2 * (h - 1));
        std::memmove(hd, hd + 2, sizeof(double) * 2 * (h - 1));
        std::memmove(hv, hv + 2, sizeof(double) * 2 * (h - 1));
        std::memmove(hs, hs + 1, sizeof(double) * (h - 1));
        std::memmove(ha, ha + n_actions, sizeof(double) * n_actions * (h - 1));
        hp[2 * (h - 1)] = root_xz[2 * i];
        hp[2 * (h - 1) + 1] = root_xz[2 * i + 1];
        hd[2 * (h - 1)] = std::sin(root_yaw[i]);
        hd[2 * (h - 1) + 1] = std::cos(root_yaw[i]);
        hv[2 * (h - 1)] = root_velocity_xz[2 * i];
        hv[2 * (h - 1) + 1] = root_velocity_xz[2 * i + 1];
        hs[h - 1] = speed_now[i];
        std::memcpy(ha + static_cast<int64_t>(n_actions) * (h - 1),
                    commanded_actions + static_cast<int64_t>(i) * n_actions,
                    sizeof(double) * n_actions);
    }
    return CANIS_OK;
}

extern "C" int canis_trusted_axes(int32_t n_characters, int32_t n_joints, double dt_s,
                                  double trusted_from, double trusted_at,
                                  const double* yaw_velocity, const double* previous_forwards,
                                  const double* previous_ups, double* forwards, double* ups) {
    if (!yaw_velocity || !previous_forwards || !previous_ups || !forwards || !ups)
        return CANIS_ERROR_NULL_POINTER;
    if (n_characters < 0 || n_joints <= 0 || !(dt_s > 0.0) || !(trusted_at > trusted_from))
        return CANIS_ERROR_BAD_SIZE;
    // runtime/pose.py trusted_rotations: |f x u| by Lagrange's identity, as numpy computes it.
    for (int32_t i = 0; i < n_characters; ++i) {
        const double turn = -(yaw_velocity[i] * dt_s);
        const double c = std::cos(turn), s = std::sin(turn);
        for (int32_t j = 0; j < n_joints; ++j) {
            const int64_t at = (static_cast<int64_t>(i) * n_joints + j) * 3;
            double* f = forwards + at;
            double* u = ups + at;
            const double dot = f[0] * u[0] + f[1] * u[1] + f[2] * u[2];
            const double ff = f[0] * f[0] + f[1] * f[1] + f[2] * f[2];
            const double uu = u[0] * u[0] + u[1] * u[1] + u[2] * u[2];
            const double area_squared = ff * uu - dot * dot;
            if (area_squared >= trusted_at * trusted_at) continue;
            const double area = std::sqrt(area_squared > 0.0 ? area_squared : 0.0);
            double trust = (area - trusted_from) / (trusted_at - trusted_from);
            trust = trust < 0.0 ? 0.0 : (trust > 1.0 ? 1.0 : trust);
            for (int axis = 0; axis < 2; ++axis) {
                const double* before = (axis == 0 ? previous_forwards : previous_ups) + at;
                double* now = axis == 0 ? f : u;
                double turned[2];
                rotate(before[0], before[2], c, s, turned);
                const double kept[3] = {turned[0], before[1], turned[1]};
                for (int e = 0; e < 3; ++e) now[e] = kept[e] + trust * (now[e] - kept[e]);
            }
        }
    }
    return CANIS_OK;
}

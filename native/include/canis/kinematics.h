/*
 * canis kinematics core: a plain C interface so a C or C++ engine can link the same
 * library the Python runtime uses.
 *
 * Conventions (shared with runtime/rotations.py):
 *   - float32 everywhere (but the root motion functions at the end: double), arrays
 *     C-contiguous (row-major), no strides;
 *   - quaternions are (w, x, y, z), Hamilton product, active rotations of column vectors;
 *   - y is up; a heightmap's rows run along +z and its columns along +x;
 *   - joints are in topological order: parents[j] < j for every joint but the root,
 *     whose parent is -1 and which must be joint 0.
 *   - units are the caller's (the Python runtime uses metres).
 * Every function returns CANIS_OK or an error code; canis_status_message() describes it.
 */
#ifndef CANIS_KINEMATICS_H
#define CANIS_KINEMATICS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum canis_status {
    CANIS_OK = 0,
    CANIS_ERROR_NULL_POINTER = 1,
    CANIS_ERROR_BAD_SIZE = 2,
    CANIS_ERROR_BAD_HIERARCHY = 3, /* parents not topologically ordered, or root not joint 0 */
    CANIS_ERROR_BAD_CHAIN = 4      /* a chain joint is not an ancestor of the next one */
} canis_status;

const char* canis_status_message(int status);

/*
 * Batched forward kinematics for n_characters characters sharing one skeleton.
 *   parents          [n_joints]
 *   offsets          [n_joints][3]   bone offset from the parent, in the parent's frame
 *                                    (the root's offset is ignored: root_positions place it)
 *   local_rotations  [n_characters][n_joints][4]
 *   root_positions   [n_characters][3]
 *   global_positions [n_characters][n_joints][3]   output
 *   global_rotations [n_characters][n_joints][4]   output (may be NULL when not needed)
 */
int canis_forward_kinematics(int32_t n_characters, int32_t n_joints, const int32_t* parents,
                             const float* offsets, const float* local_rotations,
                             const float* root_positions, float* global_positions,
                             float* global_rotations);

/*
 * Cyclic coordinate descent IK on one joint chain, for each of n_characters characters.
 * chain[0..chain_length-1] lists joint indices from the first joint that may rotate to the
 * end effector (last); each must be an ancestor of the next. Only the local rotations of
 * chain[0..chain_length-2] change, so bone lengths are preserved by construction.
 *   local_rotations  [n_characters][n_joints][4]   in/out
 *   joint_weights    [chain_length-1]  in [0, 1]: the fraction of each joint's CCD correction
 *                                      applied per iteration (1 = plain CCD, 0 = joint locked)
 *   targets          [n_characters][3] effector target in world space
 *   max_iterations   sweeps over the chain at most
 *   tolerance        stop once the effector is this close to its target
 *   residuals        [n_characters]    output: final effector-to-target distance (may be NULL)
 */
int canis_ccd_solve(int32_t n_characters, int32_t n_joints, const int32_t* parents,
                    const float* offsets, float* local_rotations, const float* root_positions,
                    int32_t chain_length, const int32_t* chain, const float* joint_weights,
                    const float* targets, int32_t max_iterations, float tolerance,
                    float* residuals);

/*
 * Joint rotations from the networks' encoding: each joint's forward (+z) and up (+y) axes,
 * expressed in its character's root frame, which is a rotation of root_yaws radians about +y.
 * The axes are orthonormalised with forward kept (up is only a hint).
 *   forwards, ups     [n_characters][n_joints][3]
 *   root_yaws         [n_characters]
 *   local_rotations   [n_characters][n_joints][4]  output: relative to the parent; the root
 *                                                  joint's is global (ready for FK)
 *   global_rotations  [n_characters][n_joints][4]  output (may be NULL)
 */
int canis_rotations_from_directions(int32_t n_characters, int32_t n_joints,
                                    const int32_t* parents, const float* forwards,
                                    const float* ups, const float* root_yaws,
                                    float* local_rotations, float* global_rotations);

/*
 * Full-body IK onto a heightmap for n_characters characters (runtime/kinematics.py explains the
 * method): the hips rise with the terrain under the hind paws, the body pitches nose-up by
 * the height difference between the front and hind paws along the torso (hind legs' first
 * joints to the front legs'), each paw keeps its height above the flat ground at ground_y
 * now above the terrain (a paw below that flat ground is lifted onto it), targets stop at
 * max_reach of each leg's length, CCD bends each front leg and a closed-form solve each
 * three-bone hind leg (its hock-paw bone's rotation kept). A chest under the ground pitches
 * the body nose-up (then lifts it), and a front paw still under the ground lifts the body.
 * Any other joint more than 5 mm under the ground is brought up to that depth (a hind leg's
 * hock excepted): the torso's by lifting the body before the legs reach down, a CCD leg's by
 * bending that leg with its paw kept (what it cannot lift lifts the body), a hind knee by
 * swinging it about the hip-hock line, the tail's by pivoting each bone up about its first
 * joint. weights (0..1) scale the whole correction per character.
 *   local_rotations [N][J][4], hips [N][3]       in/out (hips place the root joint)
 *   ground_y [N], facing [N][3] (horizontal unit: breaks the tie of an upright torso),
 *   weights [N]
 *   legs: chain k is leg_joints[leg_starts[k] .. leg_starts[k+1]), from its first joint to
 *     the paw; the first front_legs chains are front legs; leg_joint_weights has the same
 *     layout (CCD weights; a chain's last entry is unused); leg_lengths [leg_count]
 *   tail_joints [tail_length]: the tail from its root (which only the body moves) to its tip,
 *     each joint an ancestor of the next; tail_length 0 for none (tail_joints may be NULL)
 *   heights [rows][cols] etc.: the terrain, as in canis_terrain_sample
 *   targets [N][leg_count][3]  output: the paw targets used (may be NULL)
 */
int canis_fullbody_ik(int32_t n_characters, int32_t n_joints, const int32_t* parents,
                      const float* offsets, float* local_rotations, float* hips,
                      const float* ground_y, const float* facing, const float* weights,
                      int32_t leg_count, int32_t front_legs, const int32_t* leg_starts,
                      const int32_t* leg_joints, const float* leg_joint_weights,
                      const float* leg_lengths, int32_t tail_length, const int32_t* tail_joints,
                      float max_reach, int32_t iterations, float tolerance,
                      const float* heights, int32_t rows, int32_t cols, float cell_size,
                      float origin_x, float origin_z, float* targets);

/*
 * Bilinear terrain sampling of a heightmap.
 *   heights      [rows][cols]  height of grid node (row, col) at x = origin_x + col * cell_size,
 *                              z = origin_z + row * cell_size; points outside clamp to the edge
 *   points_xz    [n_points][2]
 *   out_heights  [n_points]
 *   out_normals  [n_points][3] unit surface normals of the bilinear surface (may be NULL)
 */
int canis_terrain_sample(const float* heights, int32_t rows, int32_t cols, float cell_size,
                         float origin_x, float origin_z, int32_t n_points, const float* points_xz,
                         float* out_heights, float* out_normals);

/*
 * The per-frame root motion on the ground plane, in DOUBLE precision (the runtime's state is
 * float64): the future extrapolated toward a command, the trajectory samples a network input
 * reads, and the root update a network output predicts. Ground-plane vectors are (x, z) pairs,
 * yaw 0 faces +z; runtime/trajectory.py and runtime/pose.py are the Python side, and
 * tests/reference_frame.py the numpy definition these are checked against.
 *
 * canis_extrapolate_trajectory: runtime/trajectory.py extrapolate. Per character, `samples`
 * future samples from the current root motion toward the commanded velocity, facing and action
 * weights, weighted by sample_weights [samples] (and middle_weights [samples] for the velocity
 * integrated over each step of step_s seconds).
 *   root_xz, root_velocity_xz, commanded_velocity_xz [N][2]; root_yaw, commanded_yaw [N];
 *   action_weights, commanded_actions [N][n_actions]
 *   outputs: positions_xz, directions_xz, velocities_xz [N][samples][2], speeds [N][samples],
 *   actions [N][samples][n_actions]
 */
int canis_extrapolate_trajectory(int32_t n_characters, int32_t samples, int32_t n_actions,
                                 const double* root_xz, const double* root_velocity_xz,
                                 const double* root_yaw, const double* action_weights,
                                 const double* commanded_velocity_xz, const double* commanded_yaw,
                                 const double* commanded_actions, const double* middle_weights,
                                 const double* sample_weights, double step_s,
                                 double* positions_xz, double* directions_xz,
                                 double* velocities_xz, double* speeds, double* actions);

/*
 * canis_trajectory_input: the trajectory rows of a network input (Controller.trajectory, then
 * features.write_input). Per character: `past` samples from the history [N][history_frames]
 * (frames past_start + k * past_step), the current root, and `future` samples of the desired
 * trajectory blended with the predicted one (tau * desired + (1 - tau) * predicted, directions
 * renormalised; predicted_* may be NULL, or tau >= 1, for the desired alone), all turned into
 * the root frame and written as float32 into x [N][x_stride]: sample k is the row at
 * x + k * row_stride, its fields at field_offsets [5] = position, direction, velocity, speed,
 * action (features.INPUT's layout, given by the caller so that it is defined once).
 *   history_positions_xz, history_directions_xz, history_velocities_xz [N][H][2],
 *   history_speeds [N][H], history_actions [N][H][n_actions];
 *   desired_* and predicted_* [N][future][2], desired_speeds [N][future] (its first is the
 *   current sample's speed), desired_actions [N][future][n_actions]
 */
int canis_trajectory_input(
    int32_t n_characters, int32_t past, int32_t future, int32_t history_frames,
    int32_t past_start, int32_t past_step, int32_t n_actions, const double* history_positions_xz,
    const double* history_directions_xz, const double* history_velocities_xz,
    const double* history_speeds, const double* history_actions, const double* root_xz,
    const double* root_yaw, const double* root_velocity_xz, const double* action_weights,
    const double* desired_positions_xz, const double* desired_directions_xz,
    const double* desired_velocities_xz, const double* desired_speeds,
    const double* desired_actions, const double* predicted_positions_xz,
    const double* predicted_directions_xz, const double* predicted_velocities_xz, double tau,
    float* x, int32_t x_stride, const int32_t* field_offsets, int32_t row_stride);

/*
 * canis_advance_root: a network output applied (Controller._apply and
 * pose_update.next_local_pose). The root moves by root_velocity_local [N][2] (in its own frame)
 * and turns by yaw_velocity [N] over dt_s; root_xz, root_yaw, root_velocity_xz are updated in
 * place. positions [N][J][3] (output) is the next input's joint positions: previous_positions
 * seen from the new root, advanced by joint_velocities, blended with joint_positions by
 * joint_position_blend. The predicted future [N][future][2] goes into the world from the new
 * root (outputs future_*_xz). The history arrays (as in canis_trajectory_input) shift by one
 * frame and take the new root, its facing and velocity, speed_now [N] and commanded_actions.
 */
int canis_advance_root(int32_t n_characters, int32_t n_joints, int32_t future,
                       int32_t history_frames, int32_t n_actions, double dt_s,
                       double joint_position_blend, const double* root_velocity_local,
                       const double* yaw_velocity, const double* joint_positions,
                       const double* joint_velocities, const double* future_positions_local,
                       const double* future_directions_local,
                       const double* future_velocities_local, const double* commanded_actions,
                       const double* speed_now, const double* previous_positions,
                       double* root_xz, double* root_yaw, double* root_velocity_xz,
                       double* positions, double* future_positions_xz,
                       double* future_directions_xz, double* future_velocities_xz,
                       double* history_positions_xz, double* history_directions_xz,
                       double* history_velocities_xz, double* history_speeds,
                       double* history_actions);

/*
 * canis_trusted_axes: the predicted joint axes forwards, ups [N][J][3] (in place) kept where
 * |forward x up| >= trusted_at, replaced by previous_forwards, previous_ups (turned by
 * -yaw_velocity [N] * dt_s into the new root's frame) where it is <= trusted_from, and blended
 * linearly between (runtime/pose.py trusted_rotations says why).
 */
int canis_trusted_axes(int32_t n_characters, int32_t n_joints, double dt_s, double trusted_from,
                       double trusted_at, const double* yaw_velocity,
                       const double* previous_forwards, const double* previous_ups,
                       double* forwards, double* ups);

/*
 * The pose shown for n_characters characters from the networks' root-frame pose (the runtime's
 * per-frame display, runtime/pose.py), in one call: canis_rotations_from_directions of
 * forwards_root / ups_root [N][J][3] (double) with the root yaws root_yaw [N]; the hips (joint
 * 0 of positions_root [N][J][3]) placed in the world from root_xz [N][2]; the facing; then
 * canis_fullbody_ik (its arguments as there; the flat ground it lifts onto at y = 0) and
 * canis_forward_kinematics into positions [N][J][3] and rotations [N][J][4]. With
 * only_below_ground, the IK runs (for every character) only when the first FK puts a joint of
 * any character more than below_ground_m under y = 0 (flat ground). contacts [N][paw_count]
 * (output, 0/1): each paw (paws [paw_count], joint indices) lower than contact_height_m in the
 * root frame and slower than contact_speed_mps on the ground plane by either of two speeds:
 * its predicted velocity (velocities_root [N][J][3], root frame) or how far it moved in the
 * world from paw_xz [N][paw_count][2] (in/out: the paws' world (x, z) at the last call,
 * replaced by this call's) over dt_s, written to paw_speeds [N][paw_count] (in/out: kept as
 * they were when dt_s is 0).
 * solved (output): whether the IK ran. With stop_before_fk, it stops before the FK (and, with
 * only_below_ground, before any IK) and writes local_rotations [N][J][4] and hips_out [N][3]
 * instead of positions and rotations (which may then be NULL): for a caller that changes the
 * pose further (the runtime's foot lock) before its own FK.
 */
int canis_display_pose(int32_t n_characters, int32_t n_joints, const int32_t* parents,
                       const float* offsets, const double* positions_root,
                       const double* forwards_root, const double* ups_root,
                       const double* velocities_root, const double* root_xz,
                       const double* root_yaw, int32_t paw_count, const int32_t* paws,
                       double* paw_xz, double* paw_speeds, double dt_s,
                       double contact_height_m, double contact_speed_mps,
                       const float* ik_weights, int32_t leg_count, int32_t front_legs,
                       const int32_t* leg_starts, const int32_t* leg_joints,
                       const float* leg_joint_weights, const float* leg_lengths,
                       int32_t tail_length, const int32_t* tail_joints, float max_reach,
                       int32_t iterations, float tolerance, const float* heights, int32_t rows,
                       int32_t cols, float cell_size, float origin_x, float origin_z,
                       int32_t only_below_ground, float below_ground_m,
                       int32_t stop_before_fk, float* local_rotations, float* hips_out,
                       float* positions, float* rotations, uint8_t* contacts, int32_t* solved);

#ifdef __cplusplus
}
#endif

#endif /* CANIS_KINEMATICS_H */

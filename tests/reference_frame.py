"""The per-frame math in numpy: the definition the native core (native/src/root_motion.cpp,
native/src/display_pose.cpp) is checked against. The runtime runs only the native core; this
is what it ran with `Controller(native_frame=False)` before, kept here as the reference
(tests/test_native_frame.py, tests/fixtures/record_step_trace.py):

- extrapolate and blend: the desired trajectory and its blend with the network's last
  prediction (the runtime's native extrapolate / write_trajectory_rows);
- trajectory: the 12 samples x sees, in the root frame;
- advance_root: the root update, the next pose, the predicted future and the history push
  (the runtime's native advance_root);
- shown_pose: the shown pose, contacts and IK (the runtime's one native display call);
- ReferenceController: a Controller that steps with all of these.
"""

from __future__ import annotations

import numpy as np
from canis.runtime.controller import DT_S, Controller
from canis.runtime.features import ACTIONS, LocalTrajectory, write_input
from canis.runtime.kinematics import CONTACT_HEIGHT_M, CONTACT_SPEED_MPS, rotations_from_directions
from canis.runtime.pose import _facing, _locked_and_shown, next_local_pose, with_display_offsets
from canis.runtime.root import from_root_xz, norm_xz, rotate_xz, wrap_angle_rad, yaw_direction_xz
from canis.runtime.trajectory import (
    _MIDDLE_WEIGHTS,
    _SAMPLE_WEIGHTS,
    _STEP_S,
    FUTURE_TIMES_S,
    PAST_SAMPLES,
    PAST_SLICE,
    GroundTrajectory,
    desired_future,
)

_SAMPLE_WEIGHTS_3D = _SAMPLE_WEIGHTS[..., None]


def extrapolate(
    root_xz_m,
    root_velocity_xz_mps,
    root_yaw_rad,
    action_weights,
    commanded_velocity_xz_mps,
    commanded_yaw_rad,
    commanded_actions,
):
    """Desired future samples (N, 6) from the current motion toward the smoothed command."""
    now_v, cmd_v = root_velocity_xz_mps[:, None, :], commanded_velocity_xz_mps[:, None, :]
    # Velocity at the middle of each 10-frame step, integrated into positions.
    change_v = cmd_v - now_v
    step_velocity = now_v + change_v * _MIDDLE_WEIGHTS
    step_velocity *= _STEP_S
    positions = np.add.accumulate(step_velocity, axis=1)  # np.cumsum's own loop, called direct
    positions += root_xz_m[:, None, :]
    weights = _SAMPLE_WEIGHTS
    velocities = now_v + change_v * _SAMPLE_WEIGHTS_3D
    turn = wrap_angle_rad(commanded_yaw_rad - root_yaw_rad)[:, None]
    directions = yaw_direction_xz(root_yaw_rad[:, None] + weights * turn)
    actions = (commanded_actions - action_weights)[:, None] * _SAMPLE_WEIGHTS_3D
    actions += action_weights[:, None]
    # The desired speed is the player's target speed: measuring it on this path, which starts
    # from the dog's current motion, would feed the dog's own speed back into its input.
    speeds = np.empty((len(root_xz_m), len(FUTURE_TIMES_S)))
    speeds[:] = norm_xz(commanded_velocity_xz_mps)[:, None]
    return GroundTrajectory(positions, directions, velocities, speeds, actions)


def blend(
    desired: GroundTrajectory, predicted: GroundTrajectory | None, tau: float
) -> GroundTrajectory:
    """tau * desired + (1 - tau) * predicted; directions renormalised; speeds and actions are
    the player's (the network does not predict them)."""
    if predicted is None or tau >= 1.0:
        return desired
    mix = lambda a, b: tau * a + (1.0 - tau) * b  # noqa: E731
    directions = mix(desired.directions_xz, predicted.directions_xz)
    directions /= np.maximum(norm_xz(directions)[..., None], 1e-9)
    return GroundTrajectory(
        mix(desired.positions_xz_m, predicted.positions_xz_m),
        directions,
        mix(desired.velocities_xz_mps, predicted.velocities_xz_mps),
        desired.speeds_mps,
        desired.actions,
    )


def trajectory(controller: Controller) -> LocalTrajectory:
    """The 12 samples x sees, in the root frame: the past from history, now, and the blended
    future (the desired one kept as controller.desired_future, as the runtime does)."""
    s = controller.state
    desired = desired_future(s, controller.path_future_xz_m, extrapolate)
    controller.desired_future = desired
    future = blend(desired, controller.predicted_future, controller.tau)
    h, yaw = s.history, s.root_yaw_rad

    def samples(past, now, ahead):  # the past from history, now, the future
        return [past[:, PAST_SLICE], now[:, None], ahead]

    # The three (x, z) fields' samples side by side in one array, and one rotation into
    # the root frame for all of them: to_root_xz's math, fused (fewest calls per frame).
    stacked = np.concatenate(
        samples(h.positions_xz_m, s.root_xz_m, future.positions_xz_m)
        + samples(h.directions_xz, yaw_direction_xz(yaw), future.directions_xz)
        + samples(h.velocities_xz_mps, s.root_velocity_xz_mps, future.velocities_xz_mps),
        axis=1,
    )
    k = stacked.shape[1] // 3
    stacked[:, :k] -= s.root_xz_m[:, None, :]
    speeds = np.concatenate(samples(h.speeds_mps, desired.speeds_mps[:, 0], future.speeds_mps), 1)
    actions = np.concatenate(samples(h.actions, s.action_weights, future.actions), axis=1)
    local = rotate_xz(stacked, -yaw)
    return LocalTrajectory(local[:, :k], local[:, k : 2 * k], local[:, 2 * k :], speeds, actions)


def advance_root(s, p, speed_now_mps, dt_s: float = DT_S) -> None:
    """The root moved by the prediction `p`, the next pose, the predicted future in the world,
    the history pushed (with `speed_now_mps` (N,), the current sample's desired speed)."""
    step_local = p.root_velocity_mps * dt_s  # (N, 2) in the previous root's frame
    turn = p.root_yaw_velocity_radps * dt_s
    step_world = rotate_xz(step_local[:, None], s.root_yaw_rad)[:, 0]
    s.root_xz_m = s.root_xz_m + step_world
    s.root_yaw_rad = wrap_angle_rad(s.root_yaw_rad + turn)
    s.root_velocity_xz_mps = step_world / dt_s

    s.pose = next_local_pose(s.pose, p, dt_s)  # shared with closed-loop training

    n, ahead = len(s.root_yaw_rad), p.future_positions_m.shape[1]
    # One rotation for the three future fields (the same yaw): from_root_xz's math, fused.
    future = p.future_positions_m, p.future_directions, p.future_velocities_mps
    world = rotate_xz(np.concatenate(future, axis=1), s.root_yaw_rad)
    world[:, :ahead] += s.root_xz_m[:, None, :]
    s.predicted_future = GroundTrajectory(
        world[:, :ahead],
        world[:, ahead : 2 * ahead],
        world[:, 2 * ahead :],
        np.zeros((n, ahead)),
        np.zeros((n, ahead, len(ACTIONS))),
    )
    s.action_weights = s.commanded_actions.copy()
    h = s.history
    for array, value in (
        (h.positions_xz_m, s.root_xz_m),
        (h.directions_xz, yaw_direction_xz(s.root_yaw_rad)),
        (h.velocities_xz_mps, s.root_velocity_xz_mps),
        (h.speeds_mps, speed_now_mps),
        (h.actions, s.action_weights),
    ):
        array[:, :-1] = array[:, 1:]
        array[:, -1] = value


def estimate_contacts(
    paw_heights_m: np.ndarray, paw_speeds_mps: np.ndarray, paw_velocities_mps: np.ndarray
) -> np.ndarray:
    """(N, 4) from the paws' heights above the flat ground, their shown speeds on the ground
    plane in the world (N, 4 each; paw_speeds_mps) and the network's predicted velocities
    (N, 4, 3): low, and still by either speed.

    Each speed misses some planted paws. The shown speed is a backward difference: it sees a
    landing a frame or two after the predicted velocity does. The predicted velocity runs the
    hind paws at 1.4-1.9x the mocap's speed in the closed loop while the shown paws stand: from
    it alone the hind paws were never planted. With the foot lock, either alone skated more
    than both."""
    predicted = norm_xz(paw_velocities_mps[..., ::2])  # (x, z)
    slowest = np.minimum(paw_speeds_mps, predicted)
    return (paw_heights_m < CONTACT_HEIGHT_M) & (slowest < CONTACT_SPEED_MPS)


def paw_speeds_mps(
    paw_xz_m: np.ndarray, paw_xz_before_m: np.ndarray, speeds_before_mps: np.ndarray, dt_s: float
) -> np.ndarray:
    """(N, 4) the shown paws' speeds on the ground plane in the world: how far each moved
    since the last frame shown (paw_xz_m and paw_xz_before_m (N, 4, 2), world) over dt_s;
    `speeds_before_mps` when no time has passed (a reset or a placement shows a pose again)."""
    if dt_s <= 0:
        return speeds_before_mps
    return norm_xz(paw_xz_m - paw_xz_before_m) / dt_s


def shown_pose(skeleton, paws, s, with_offsets, lockable, ik, foot_lock, terrain, dt_s):
    """World joint positions (N, J, 3) and rotations (N, J, 4) of the dogs `s`, and their
    paw contacts (N, 4), told from the paws' motion since the last frame shown (`dt_s` ago;
    s.paw_xz_m and s.paw_speed_mps, which this updates), as the runtime's pose.shown_pose
    makes them in one native call."""
    shown = with_display_offsets(s.pose, s.display_offset) if with_offsets else s.pose
    n = len(s.root_yaw_rad)
    forwards, ups, hips_local = shown.forwards, shown.ups, shown.positions_m[:, :1]
    local, _ = rotations_from_directions(skeleton, forwards, ups, s.root_yaw_rad)
    hips = np.empty((n, 3))
    hips[:, [0, 2]] = from_root_xz(hips_local[..., [0, 2]], s.root_xz_m, s.root_yaw_rad)[:, 0]
    hips[:, 1] = hips_local[:, 0, 1]
    paws_root = shown.positions_m[:, paws]
    paw_xz = from_root_xz(paws_root[..., ::2], s.root_xz_m, s.root_yaw_rad)
    s.paw_speed_mps[:] = paw_speeds_mps(paw_xz, s.paw_xz_m, s.paw_speed_mps, dt_s)
    s.paw_xz_m[:] = paw_xz
    # Root-frame heights are heights above the network's flat ground.
    contacts = estimate_contacts(paws_root[..., 1], s.paw_speed_mps, shown.velocities_mps[:, paws])
    if terrain is not None:
        local, hips, _ = ik.solve(local, hips, np.zeros(n), _facing(s.root_yaw_rad), terrain, dt_s)
    args = (contacts, lockable, ik, foot_lock, terrain, s.root_yaw_rad, dt_s)
    return _locked_and_shown(skeleton, paws, local, hips, *args)


class ReferenceController(Controller):
    """A Controller whose per-frame math is this module's numpy: the same stages, the same
    state, the definition the native core follows to rounding."""

    _shown_pose = staticmethod(shown_pose)

    def _write_trajectory(self, x: np.ndarray) -> np.ndarray:
        local = trajectory(self)
        write_input(local, self.state.pose, x, self._x_views)  # the joints again in features
        return local.speeds_mps[:, PAST_SAMPLES.size]

    def _advance_root(self, p, speed_now_mps) -> None:
        advance_root(self.state, p, speed_now_mps, DT_S)

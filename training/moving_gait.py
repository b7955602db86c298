"""The moving-gait term (issue 17, gaits): the runtime's own dogs, asked a steady speed, moving
their paws in the footfall pattern of the mocap's dogs at that speed.

The gait table (`canis evaluate controllers`) classifies a dog's gait by the correlation of its
paws' contacts over a 61-frame window (runtime/gaits.py): the lateral pairs' (left front with
left hind, right front with right hind) above 0.5 is a pace, the diagonal pairs' a trot. No
term has held that pattern: the moving dogs' terms hold their speed, legs, paws and course, and
every recipe's gaits came out as its run's draws left them (the shipped (C7) paces at 0.5 m/s
where the mocap walks, and walks at 1.1 where it paces).

So each moving dog asked straight ahead is unrolled over a window of GAIT_WINDOW_FRAMES of its
kept steps, its pose fed back as the runtime feeds it (placed_speed.MovingDogs.gait_loss), and
its shown paws' footfalls counted softly (soft_contacts: low and slow as the labels' stride
detector counts them) so that they have a gradient. Its lateral and diagonal correlations over
the window are held to the mean over the training clips' windows centred on frames asked to
move at the dog's speed (binned as the other moving terms' references), each beyond
GAIT_ALLOWANCE, squared: all those windows (`--moving-gait-reference all`, as (GS10) was
trained), or those whose centre the labels give the gait the mocap uses most at that speed
(`most-used`; gait_by_speed says why). With `--moving-gait-duty` the paws' share of the window
down is held to the mocap's too (the network's dogs have theirs down 0.2-0.3 less than the
mocap's at every speed, by this count). The soft contacts are the term's, not the gait
table's (which counts a paw sliding under the body's speed as down, for the canter); `python -m
canis.training.moving_gait MODEL.onnx` prints both side by side by speed.

The turning dogs are left out, as the moving-course term leaves them: with them, 100 steps at
10 turned the controllers evaluation's turn with the legs nearly still ((GT10b), stiffness 0.22x
the mocap's; docs/EVALUATION.md, the twenty-third session). A shuffle whose paws never lift has
no correlation, and the slow walk's reference has almost none. Without them the same happened
at 100 steps ((GS10b)) and not at 50; at half the weight for the last 50 steps not ((GS10w)),
for the last 40 it did ((GS10w40)): the term is one to give few steps, and to screen.
"""

from __future__ import annotations

import numpy as np
import torch
from canis.runtime.features import PAW_ROWS
from canis.runtime.gaits import GAIT_WINDOW_FRAMES, GAITS
from canis.training.finetune_losses import world_velocity_mps
from canis.training.labels import (
    CONTACT_OFF_HEIGHT_M,
    CONTACT_OFF_SPEED_MPS,
    CONTACT_ON_HEIGHT_M,
    CONTACT_ON_SPEED_MPS,
)
from canis.training.moving_legs import by_speed
from canis.training.moving_skating import CHUNK_ROWS
from canis.training.placed_speed import root_speed_mps
from canis.training.shown_pose import shown_step_m

GAIT_ALLOWANCE = 0.1  # of a correlation: a dog this near the mocap's pattern costs nothing
# --moving-gait-reference: the mean of all the mocap's windows at a speed, or of those of the
# gait it uses most there (gait_by_speed)
GAIT_REFERENCES = ("all", "most-used")
# Paw order of PAW_ROWS (as runtime/gaits.py's contacts): left front, right front, left hind,
# right hind.
LATERAL_PAIRS = ((0, 2), (1, 3))
DIAGONAL_PAIRS = ((0, 3), (1, 2))
_VARIANCE_FLOOR = 1e-6  # keeps the correlation's gradient finite for a paw that never moves
_SPEED_FLOOR = 1e-6  # (m/s)^2: keeps the paw speed's gradient finite for a still paw
# labels.stride_contacts at the middle of its hysteresis: a paw lands under 4 cm and 0.25 m/s
# and lifts over 6 cm or 0.5 m/s, its speed limits raised to half and all of the body's speed
# when it moves faster than that.
CONTACT_HEIGHT_M = 0.5 * (CONTACT_ON_HEIGHT_M + CONTACT_OFF_HEIGHT_M)
CONTACT_SPEED_MPS = 0.5 * (CONTACT_ON_SPEED_MPS + CONTACT_OFF_SPEED_MPS)
STRIDE_SPEED_SCALE = 0.75  # of the body's speed: the middle of stride_contacts' half and all
HEIGHT_SOFTNESS_M = 0.005
SPEED_SOFTNESS = 0.1  # of the speed limit


def soft_contacts(x_raw: torch.Tensor, y_raw: torch.Tensor) -> torch.Tensor:
    """(B, 4) how far each shown paw counts as down over the step (0-1): low and slow as
    labels.stride_contacts counts it (the gait table's footfalls), at the middle of its
    hysteresis, the speed limit raised with the body's speed as there."""
    before, after = shown_step_m(x_raw, y_raw, PAW_ROWS)
    velocity = world_velocity_mps(before, after, y_raw)
    paw_mps = (velocity[..., 0].square() + velocity[..., 2].square() + _SPEED_FLOOR).sqrt()
    body_mps = root_speed_mps(y_raw)
    limit_mps = (body_mps * STRIDE_SPEED_SCALE).clamp(min=CONTACT_SPEED_MPS)[:, None]
    low = torch.sigmoid((CONTACT_HEIGHT_M - after[..., 1]) / HEIGHT_SOFTNESS_M)
    slow = torch.sigmoid((limit_mps - paw_mps) / (SPEED_SOFTNESS * limit_mps))
    return low * slow


def pair_correlations(contacts: torch.Tensor) -> torch.Tensor:
    """(N, 2) the lateral and diagonal pairs' mean Pearson correlation over each window of
    contacts (N, T, 4), as runtime/gaits.classify_gaits pairs them (a numpy twin: the runtime
    has no torch, and the term needs the gradient); near 0 where a paw's contact is constant."""
    centred = contacts - contacts.mean(1, keepdim=True)
    spread = centred.square().sum(1)  # (N, 4)

    def mean_correlation(pairs) -> torch.Tensor:
        return sum(
            (centred[..., a] * centred[..., b]).sum(1)
            / (spread[:, a] * spread[:, b] + _VARIANCE_FLOOR).sqrt()
            for a, b in pairs
        ) / len(pairs)

    return torch.stack([mean_correlation(LATERAL_PAIRS), mean_correlation(DIAGONAL_PAIRS)], 1)


def window_rows(after: np.ndarray, length: int | None = None) -> np.ndarray:
    """(W, length) the rows of every window of `length` (GAIT_WINDOW_FRAMES unless told)
    consecutive frames of a clip (`after`: each row's next frame in its clip, or -1), one
    window per start."""
    from canis.training.finetune_stretches import stretch_starts

    length = length or GAIT_WINDOW_FRAMES
    windows = [stretch_starts(after, length)]
    for _ in range(length - 1):
        windows.append(after[windows[-1]])
    return np.stack(windows, 1)


def gait_by_speed(
    x_raw: torch.Tensor,
    y_raw: torch.Tensor,
    action: np.ndarray,
    after: np.ndarray,
    gait: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The mocap's reference: (speed bin centres m/s (S,), the mean lateral and diagonal
    correlation (S, 2) of the windows centred on frames asked to move, by the centre frame's
    speed). With `gait` (the
    labels' gait per row, runtime/gaits.py's indices), only the windows whose centre has the
    gait the mocap uses most at that speed.

    The mean over all of a speed's windows (no `gait`, as (GS10) was trained) mixes gaits:
    between 0.9 and 1.3 m/s the training clips pace in 61% of them (lateral +0.82) and walk in
    38% (+0.15), and their mean (+0.55) is a pattern no dog uses, half a pace, which a dog can
    meet within GAIT_ALLOWANCE and walk (the twenty-third session's runs sat at +0.23-0.27
    there)."""
    with torch.no_grad():
        contacts = torch.cat(
            [
                soft_contacts(x_raw[start : start + CHUNK_ROWS], y_raw[start : start + CHUNK_ROWS])
                for start in range(0, len(x_raw), CHUNK_ROWS)
            ]
        )
        windows = window_rows(after)
        stats = torch.cat(
            [
                pair_correlations(contacts[torch.as_tensor(windows[start : start + CHUNK_ROWS])])
                for start in range(0, len(windows), CHUNK_ROWS)
            ]
        ).numpy()
    centre = windows[:, GAIT_WINDOW_FRAMES // 2]
    if gait is None:
        return by_speed(stats, y_raw[centre], action[centre], "--moving-gait-weight", "the gaits")
    # Per gait: its windows' statistics (zero elsewhere) and its share; by_speed's bin means
    # of these give each gait's share of a bin and, divided, its windows' mean there.
    each_gait = np.stack([gait[centre] == g for g in range(len(GAITS))], 1)  # (W, G)
    width = stats.shape[1]
    values = np.concatenate([(stats[:, None, :] * each_gait[..., None]).reshape(len(stats), -1),
                             each_gait], 1)  # fmt: skip
    centres, means = by_speed(
        values, y_raw[centre], action[centre], "--moving-gait-weight", "the gaits"
    )
    sums = means[:, : width * len(GAITS)].reshape(len(centres), len(GAITS), width)
    shares = means[:, width * len(GAITS) :]
    most = shares.argmax(1)
    bins = np.arange(len(centres))
    return centres, sums[bins, most] / shares[bins, most, None]


def moving_gait_loss(contacts: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """contacts (dogs, T, 4) over each dog's window, reference (dogs, 2) (gait_by_speed's at
    each dog's speed): the mean over dogs and pairs of the squared miss of the dog's
    correlations beyond GAIT_ALLOWANCE."""
    if len(reference) == 0:
        return contacts.new_zeros(())
    stats = pair_correlations(contacts)
    miss = (stats - reference).abs() - GAIT_ALLOWANCE
    return miss.clamp(min=0).square().mean()

"""The moving-skating term (issue 17, foot skating): the runtime's own dogs, asked a steady speed,
skating no more than the mocap's dogs at that speed, with their paws no higher.

The skating terms before it were one step from recorded inputs (training/replay_skating.py, the
fourteenth session) and were met on the dogs they measured while the evaluation's dogs skated
as much as before or more; the moving-legs term showed why (docs/EVALUATION.md, the fifteenth
session): one step at a time a term can be met on its own dogs without changing how a fresh dog
moves, and carried through 8 fed-back steps it reaches fresh dogs. That unrolled moving-legs
term brought the legs up to the mocap's and past them, and their paws slid: almost all of it
swinging paws carried low, the planted ones hardly sliding (`python -m
canis.training.skating_breakdown`).

So on the moving dogs' stretches (placed_speed.MovingDogs, unrolled as --moving-unroll-frames
says; one prediction serves every moving term) each dog's shown paws (training/shown_pose.py,
drawn from the predicted axes as the evaluation measures them) are held to the mocap's at the
dog's asked speed: the dog's mean skating (contact_loss.skating_cm, over its steps and paws)
beyond the mocap's frames asked to move at that speed, plus each paw's mean height beyond the
mocap's paw's mean there by more than a small allowance (cm, averaged over the paws), so that
a dog cannot stop skating by carrying its paws above the measure's 2.5 cm (the fourteenth
session's (RSS) runs did). Means rather than the replay term's lowest heights: a dog's steps
are a few short stretches, whose lowest point depends on where in the stride they fall; the
mean does not. A dog that skates less than the mocap, or carries its paws lower, costs
nothing (paws carried lower do with `heights_both_ways`, --moving-paws-both-ways), and one dog's
margin does not pay for another's excess.

Held both ways, the mean height can be met by a paw that never comes down: the seventeenth and
eighteenth sessions' runs with --moving-paws-both-ways cantered with every paw above 2.5 cm all
the time (docs/EVALUATION.md). With `paws_down` (--moving-paws-down) each paw is also held down
as often as the mocap's at the dog's speed: its share of steps under the measure's 2.5 cm
(counted softly, so that it has a gradient) short of the mocap's by more than an allowance
costs DOWN_SHARE_COST_CM per whole share, so a paw that never comes down where the mocap's is
down a third of the time costs about as much as a paw 3 cm too high.

In cm, a dog's skating beyond the mocap's (about 0.1 cm/frame at any speed) is small beside its
heights' misses (a few cm): held both ways and down, the paws came down and slid ((PD6),
(PD7)). With `skating_relative` (--moving-skating-relative) the skating piece is counted in
the mocap's skating at the dog's speed instead: a dog skating twice the mocap's pays 1, as a
paw 1.5 cm too high does.

So counted, the paws met the skating bar by shuffling ((PR6), (PR7)): at a walk the mocap's
mean paw height is 2.4-2.7 cm, which a paw kept just above the ground meets with its share of
steps down. With `paws_lift` (--moving-paws-lift) each paw's mean height above the measure's
2.5 cm (its lift, 0 while under it) short of the mocap's by more than HEIGHT_ALLOWANCE_CM
costs its shortfall in cm (times its weight, 1 unless told): a shuffling paw has almost none, a
stepping one some in every swing. Weighed 4 it lifted the walk's paws and made the skating and
the turn's legs worse ((PLW6), (PLW7), the nineteenth session).

Every term above holds a mean over the steps, and a flattened stride meets them all: (PL)'s
cantering paws met the mocap's mean height and lift within 1 cm and swung to half its height
(the nineteenth session). With `paws_swing` (--moving-paws-swing) each paw's root mean square
lift (cm), which a few high swings raise more than many low ones, short of the mocap's by more
than HEIGHT_ALLOWANCE_CM costs its shortfall in cm. A mean of squares keeps the reference a
mean over the mocap's rows, binned and interpolated by speed as the others are.

Held at every speed, the swing stepped the walk's and the turn's paws and the canter skated
about twice the mocap's at every seed (the twentieth session). With `swing_below_mps`
(--moving-paws-swing-below-mps) only the dogs asked under that speed pay for their swing: the
shuffling it is there for is the walk's.

None of the above sees where a planted paw sits: the runtime calls a paw planted when the
network holds it under 5 cm and slow (the runtime's contacts), and over the demo's
walk the shipped networks' planted paws hang 1.9-2.1 cm above the ground (`canis run
--terrain hills`, "floating in contact"; tests/test_shipped_models.py allows 2.0) where the
mocap's sit 1.2-1.5 cm by this term's count. With `paws_planted` (--moving-paws-planted) each
paw's mean height over its steps down (weighed by soft_down, so that it has a gradient) beyond
the mocap's by more than PLANTED_ALLOWANCE_CM costs its excess in cm (times its weight). A paw
whose dog never puts it down has no planted height to hold: the down share (paws_down) is what
brings it down.

Held lower, the hind paws slid lower: at the walk the networks' hind paws stay within a
couple of cm of the ground and slide, planted (down and under the runtime's contact speed in
the world) in a fifth to a quarter of the steps where the mocap's are in three fifths: they
shuffle, under the measure's 2.5 cm where it weighs their sliding little (docs/EVALUATION.md,
the twenty-fifth session). With `paws_still` (--moving-paws-still) each paw's share of steps
planted (down, as soft_down counts it, and moving under runtime.kinematics.CONTACT_SPEED_MPS in the
world, counted softly) short of the mocap's by more than DOWN_SHARE_ALLOWANCE costs
DOWN_SHARE_COST_CM a share (times its weight). Meant to make a paw stand still and so step, it
was met at its mocap share by paws that never lift (the twenty-fifth session's (SPP10)).

Until the twenty-sixth session the runtime did not see that motion: it called a paw planted
by the network's predicted velocity alone, and in the closed loop the networks predict their
hind paws moving 1.4-1.9 times as fast as the mocap's at the dog's speed, hardly ever under the
contact speed (one step from the mocap's inputs they predict the mocap's), so the foot lock
hardly ever held a hind paw (it now takes a paw still by either its predicted velocity or its
shown motion: tests/reference_frame.py estimate_contacts). With `still_predicted`
(--moving-paws-still-predicted) a paw counts as planted only when its predicted velocity is
still too (softly, as the shown motion), against the mocap's share so counted (its velocities
are its motion): the predicted velocity held to the shown motion.

Every bar above is the mocap's at the dog's speed, and the mocap's planted paws slide too
(0.10-0.15 cm/frame by the evaluation's measure), so a dog that skates no more than the mocap
pays nothing: the term cannot take the skating under it. With `skating_scale`
(--moving-skating-scale) the skating bar is the mocap's times that (under 1: less sliding
than the mocap's), the rest as before.
"""

from __future__ import annotations

import numpy as np
import torch
from canis.runtime.features import OUTPUT, PAW_ROWS
from canis.runtime.kinematics import CONTACT_SPEED_MPS
from canis.runtime.motion_metrics import SKATING_HEIGHT_CM
from canis.training.contact_loss import _field, step_skating_cm, world_velocity_mps
from canis.training.moving_legs import by_speed
from canis.training.shown_pose import shown_step_m

# A dog's paws may sit this much higher on average than the mocap's at its speed for free: the
# term is there to stop paws carried above the measure's 2.5 cm through the stance (which
# raises the mean by more), not to press every stride onto the mocap's.
HEIGHT_ALLOWANCE_CM = 0.5
DOWN_SOFTNESS_CM = 0.5  # a paw 0.5 cm above 2.5 counts 0.27 down, 0.5 cm below 0.73
DOWN_SHARE_ALLOWANCE = 0.05  # of the steps: a paw may be down this much less than the mocap's
DOWN_SHARE_COST_CM = 10.0  # a whole share of steps short costs as a paw 10 cm off its height
# A planted paw may sit this much higher than the mocap's on average for free (cm).
PLANTED_ALLOWANCE_CM = 0.2
STILL_SOFTNESS_MPS = 0.05  # a paw 0.05 m/s over the contact speed counts 0.27 still
MIN_REFERENCE_SKATING_CM = 0.01  # relative skating: a mocap bin that hardly skates counts as this
CHUNK_ROWS = 8192  # the mocap's rows at a time through the shown pose (memory, not results)


def shown_paw_steps(
    x_raw: torch.Tensor, y_raw: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(B, 4) each shown paw's skating over the step (cm/frame), its height after it (cm) and
    its horizontal world speed over it (m/s)."""
    before, after = shown_step_m(x_raw, y_raw, PAW_ROWS)
    velocity = world_velocity_mps(before, after, y_raw)
    speed = velocity[..., [0, 2]].norm(dim=-1)
    return step_skating_cm(velocity, after), after[..., 1] * 100.0, speed


def shown_skating_and_height_cm(
    x_raw: torch.Tensor, y_raw: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, 4) each shown paw's skating over the step (cm/frame) and its height after it (cm)."""
    skating, height, _ = shown_paw_steps(x_raw, y_raw)
    return skating, height


def soft_down(height_cm: torch.Tensor) -> torch.Tensor:
    """How far each paw counts as down (0-1) at its height: 1/2 at the measure's 2.5 cm."""
    return torch.sigmoid((SKATING_HEIGHT_CM - height_cm) / DOWN_SOFTNESS_CM)


def lift_cm(height_cm: torch.Tensor) -> torch.Tensor:
    """Each paw's height above the measure's 2.5 cm (0 under it): where a step shows."""
    return (height_cm - SKATING_HEIGHT_CM).clamp(min=0)


def soft_still(speed_mps: torch.Tensor) -> torch.Tensor:
    """How far each paw counts as still (0-1) at its horizontal speed: 1/2 at the runtime's
    contact speed."""
    return torch.sigmoid((CONTACT_SPEED_MPS - speed_mps) / STILL_SOFTNESS_MPS)


def soft_planted(height_cm: torch.Tensor, speed_mps: torch.Tensor) -> torch.Tensor:
    """How far each paw counts as planted (0-1): down (soft_down) and still (soft_still) in
    its world motion."""
    return soft_down(height_cm) * soft_still(speed_mps)


def predicted_paw_speed_mps(y_raw: torch.Tensor) -> torch.Tensor:
    """(B, 4) each paw's predicted horizontal speed, which the runtime's contacts read too."""
    return _field(OUTPUT, y_raw, "joints", "velocity", PAW_ROWS)[..., [0, 2]].norm(dim=-1)


def planted_height_cm(height_cm: torch.Tensor) -> torch.Tensor:
    """(..., 4) each paw's mean height over its steps down (weighed by soft_down) from
    heights (..., steps, 4) (cm): where its dog holds it while planted."""
    down = soft_down(height_cm)
    return (height_cm * down).sum(-2) / down.sum(-2).clamp(min=1e-6)


def skating_by_speed(
    x_raw: torch.Tensor, y_raw: torch.Tensor, action: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The mocap's reference from its rows: (speed bin centres m/s (S,), (S, 33): in each bin
    the mean skating of the shown paws (cm/frame, over the paws), each paw's mean height (cm),
    each paw's share of steps down (soft_down), each paw's mean lift (lift_cm), each paw's
    mean squared lift (cm^2), each paw's mean of its height times how far it is down (cm;
    over the share down, its planted height: planted_height_cm), each paw's share of steps
    planted (soft_planted), that share with the predicted velocity still too, and each paw's
    mean predicted horizontal speed (m/s; the mocap's are its paws' speeds)) over the frames
    asked to move: (S, 33)."""
    values = []
    with torch.no_grad():
        for start in range(0, len(x_raw), CHUNK_ROWS):
            rows = slice(start, start + CHUNK_ROWS)
            skating, height, speed = shown_paw_steps(x_raw[rows], y_raw[rows])
            lift = lift_cm(height)
            down = soft_down(height)
            planted = soft_planted(height, speed)
            predicted_mps = predicted_paw_speed_mps(y_raw[rows])
            columns = [
                skating.mean(1, keepdim=True), height, down, lift, lift**2, height * down,
                planted, planted * soft_still(predicted_mps), predicted_mps,
            ]  # fmt: skip
            values.append(torch.cat(columns, 1).numpy())
    return by_speed(
        np.concatenate(values), y_raw, action, "--moving-skating-weight", "the paws' skating"
    )


def moving_skating_loss(
    x_raw: torch.Tensor,
    y_raw: torch.Tensor,
    reference: torch.Tensor,
    heights_both_ways: bool = False,
    paws_down: float = 0.0,
    skating_relative: bool = False,
    skating_scale: float = 1.0,
    paws_lift: float = 0.0,
    paws_swing: bool = False,
    swing_below_mps: float = 0.0,
    asked_mps: torch.Tensor | None = None,
    paws_planted: float = 0.0,
    paws_still: float = 0.0,
    still_predicted: bool = False,
    paws_down_fast: float = 0.0,
    fast_mps: float = 0.0,
) -> torch.Tensor:
    """x_raw, y_raw (dogs * frames, ...) grouped by dog, reference (dogs, 33)
    (skating_by_speed's at each dog's speed; only the columns the options read are needed):
    the mean over dogs of the dog's mean skating (cm/frame) beyond the reference's, plus its
    paws' mean heights beyond the reference's by more than HEIGHT_ALLOWANCE_CM (cm, averaged
    over paws); `heights_both_ways`: paws carried lower than the reference's by more than the
    allowance count too (a paw dragged through its swing); `paws_down` (a weight, 0: off; True
    counts 1): plus each paw's share of steps down short of the reference's by more than
    DOWN_SHARE_ALLOWANCE, DOWN_SHARE_COST_CM a share (averaged over paws), times the weight;
    `skating_relative`: the skating beyond the reference's counted in the reference's;
    `skating_scale`: the bar is the reference's skating times this (the relative count stays
    in the reference's own);
    `paws_lift` (a weight, 0: off): plus each paw's mean height above SKATING_HEIGHT_CM short
    of the reference's by more than HEIGHT_ALLOWANCE_CM (cm, averaged over paws), times the
    weight; `paws_swing`: plus each
    paw's root mean square lift short of the reference's by more than HEIGHT_ALLOWANCE_CM (cm,
    averaged over paws), only for the dogs asked (asked_mps, (dogs,)) under `swing_below_mps`
    where that is above 0; `paws_planted` (a weight, 0: off): plus each paw's planted height
    (planted_height_cm) beyond the reference's (its columns 17-21 over 5-9) by more than
    PLANTED_ALLOWANCE_CM (cm, averaged over paws), times the weight; `paws_still` (a weight,
    0: off): plus each paw's share of steps planted (soft_planted) short of the reference's
    (its columns 21-25) by more than DOWN_SHARE_ALLOWANCE, DOWN_SHARE_COST_CM a share
    (averaged over paws), times the weight; with `still_predicted` a paw counts as planted
    only with its predicted velocity still too (predicted_paw_speed_mps), against the
    reference's columns 25-29; `paws_down_fast` (a weight, 0: off): the dogs asked
    (asked_mps) above `fast_mps` have their paws-down shortfall weighed this much more (the
    mean still over all the dogs, so the slow dogs' weight is left as it was)."""
    dogs = len(reference)
    if dogs == 0:
        return y_raw.new_zeros(())
    skating, height, speed = (v.reshape(dogs, -1, 4) for v in shown_paw_steps(x_raw, y_raw))
    skating_excess = (skating.mean((1, 2)) - skating_scale * reference[:, 0]).clamp(min=0)
    if skating_relative:
        skating_excess = skating_excess / reference[:, 0].clamp(min=MIN_REFERENCE_SKATING_CM)
    miss_cm = height.mean(1) - reference[:, 1:5]
    if heights_both_ways:
        miss_cm = miss_cm.abs()
    height_excess = (miss_cm - HEIGHT_ALLOWANCE_CM).clamp(min=0).mean(1)
    if paws_down or paws_down_fast:
        short = reference[:, 5:9] - soft_down(height).mean(1) - DOWN_SHARE_ALLOWANCE
        weight = torch.full_like(short[:, 0], float(paws_down))
        if paws_down_fast:
            if asked_mps is None:
                raise ValueError("paws_down_fast: needs each dog's asked speed (asked_mps)")
            weight = weight + paws_down_fast * (asked_mps > fast_mps).to(weight.dtype)
        height_excess = height_excess + weight * DOWN_SHARE_COST_CM * short.clamp(min=0).mean(1)
    if paws_lift:
        short_cm = reference[:, 9:13] - lift_cm(height).mean(1) - HEIGHT_ALLOWANCE_CM
        height_excess = height_excess + paws_lift * short_cm.clamp(min=0).mean(1)
    if paws_swing:
        # The floor keeps the square root's gradient finite for a paw that never lifts.
        rms_cm = lift_cm(height).square().mean(1).clamp(min=1e-6).sqrt()
        short_cm = (reference[:, 13:17].sqrt() - rms_cm - HEIGHT_ALLOWANCE_CM).clamp(min=0)
        if swing_below_mps > 0:
            if asked_mps is None:
                raise ValueError("swing_below_mps: needs each dog's asked speed (asked_mps)")
            short_cm = short_cm * (asked_mps < swing_below_mps).to(short_cm.dtype)[:, None]
        height_excess = height_excess + short_cm.mean(1)
    if paws_planted:
        mocap_cm = reference[:, 17:21] / reference[:, 5:9].clamp(min=1e-6)
        above_cm = (planted_height_cm(height) - mocap_cm - PLANTED_ALLOWANCE_CM).clamp(min=0)
        height_excess = height_excess + paws_planted * above_cm.mean(1)
    if paws_still:
        planted = soft_planted(height, speed)
        columns = slice(21, 25)
        if still_predicted:
            predicted = predicted_paw_speed_mps(y_raw).reshape(dogs, -1, 4)
            planted, columns = planted * soft_still(predicted), slice(25, 29)
        short = (reference[:, columns] - planted.mean(1) - DOWN_SHARE_ALLOWANCE).clamp(min=0)
        height_excess = height_excess + paws_still * DOWN_SHARE_COST_CM * short.mean(1)
    return (skating_excess + height_excess).mean()


def one_step_paw_speeds(model: str, x_raw: np.ndarray, y_raw: torch.Tensor, action: np.ndarray):
    """(speed bin centres m/s, (S, 4)): the paws' mean predicted horizontal speed by `model`
    one step from the mocap's own inputs (x_raw), binned as skating_by_speed bins its rows."""
    import onnxruntime as ort

    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    speeds = [
        predicted_paw_speed_mps(torch.as_tensor(session.run(["y"], {"x": chunk})[0])).numpy()
        for chunk in np.array_split(x_raw.astype(np.float32), max(1, len(x_raw) // CHUNK_ROWS))
    ]
    return by_speed(np.concatenate(speeds), y_raw, action, "the probe", "the paws' speeds")


def main(argv=None) -> None:
    """Print each model's moving dogs' skating, paw heights, paws planted and predicted paw
    speeds against the mocap's, by asked speed (the term's dogs: placed_speed.moving_inputs, 64
    of them, seed 0)."""
    from canis.training.moving_legs import driven_dogs, measure_arguments, reference_at, speed_bands

    args, rows = measure_arguments(main.__doc__, argv)
    y_mocap = torch.as_tensor(rows["Y"])
    centres, paws = skating_by_speed(torch.as_tensor(rows["X"]), y_mocap, rows["action"])
    for model in args.models:
        xs, asked, y = driven_dogs(model, args.dogs, args.seed)
        x, y = torch.as_tensor(xs.reshape(-1, xs.shape[2])), torch.as_tensor(y)
        reference = torch.as_tensor(reference_at(centres, paws, asked), dtype=torch.float32)
        one_step = reference_at(
            *one_step_paw_speeds(model, rows["X"], y_mocap, rows["action"]), asked
        )
        with torch.no_grad():
            term = moving_skating_loss(x, y, reference)
            skating, height, speed = (v.reshape(args.dogs, -1, 4) for v in shown_paw_steps(x, y))
            planted = soft_planted(height, speed)
            predicted_mps = predicted_paw_speed_mps(y).reshape(args.dogs, -1, 4)
            with_predicted = planted * soft_still(predicted_mps)
        print(f"{model}: term {term.item():.4f}")
        for lo, hi, dogs in speed_bands(asked):
            print(
                f"  asked {lo:.1f}-{hi:.1f} m/s ({dogs.sum()} dogs): skating "
                f"{skating[dogs].mean():.3f} cm/frame (the mocap's "
                f"{reference[dogs, 0].mean():.3f}), paws' mean height "
                f"{height[dogs].mean():.1f} cm ({reference[dogs, 1:5].mean():.1f}), paws down "
                f"{soft_down(height[dogs]).mean():.0%} of steps "
                f"({reference[dogs, 5:9].mean():.0%}), lift {lift_cm(height[dogs]).mean():.2f} "
                f"cm ({reference[dogs, 9:13].mean():.2f}), root mean square lift "
                f"{lift_cm(height[dogs]).square().mean().sqrt():.2f} cm "
                f"({reference[dogs, 13:17].mean().sqrt():.2f}), planted "
                f"{planted_height_cm(height[dogs]).mean():.2f} cm "
                f"({(reference[dogs, 17:21] / reference[dogs, 5:9]).mean():.2f}), planted and "
                f"still (front, hind) {planted[dogs][..., :2].mean():.0%}, "
                f"{planted[dogs][..., 2:].mean():.0%} of steps ({reference[dogs, 21:23].mean():.0%}"
                f", {reference[dogs, 23:25].mean():.0%}); with the predicted velocity still "
                f"{with_predicted[dogs][..., :2].mean():.0%}, "
                f"{with_predicted[dogs][..., 2:].mean():.0%} "
                f"({reference[dogs, 25:27].mean():.0%}, {reference[dogs, 27:29].mean():.0%}); "
                f"predicted paw speed (front, hind) {predicted_mps[dogs][..., :2].mean():.2f}, "
                f"{predicted_mps[dogs][..., 2:].mean():.2f} m/s "
                f"({reference[dogs, 29:31].mean():.2f}, {reference[dogs, 31:33].mean():.2f}; one "
                f"step from the mocap's inputs {one_step[dogs, :2].mean():.2f}, "
                f"{one_step[dogs, 2:].mean():.2f})"
            )


if __name__ == "__main__":
    main()

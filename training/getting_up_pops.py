"""The getting-up-pops term (issue 17): the runtime's own dogs taken to a posture and back up
through the transition network, with no shown joint moving faster in a frame after the
hand-back than the mocap's do at the speed the dog is going.

(S3b) met the stopping-pops term's bar and the postures table's, and then whipped its tail
16.8 cm in one frame 8 frames after getting up from a beg (docs/RESULTS.md, "Getting up";
the shipped network 6.7): the motion network, handed a dog the transition network stood up,
idles from a pose none of its other dogs start from. So these dogs are driven as the demo
drives a dog asked for a posture and then 1: standing for a while, a posture (sit, lie or beg)
through the shipped transition network, held, then stand through it and the motion network's
idle. Their first KEPT_FRAMES steps after that hand-back are kept, and the stopping-pops term
(training/stopping_pops.py: each shown joint's move beyond ALLOWED_OVER_MOCAP times the mocap's
at the dog's speed, squared) is taken over them, unrolled as the moving dogs' terms are.

With a settling share (`--getting-up-settling SHARE`), that share of the dogs is kept instead
for its first KEPT_FRAMES steps after the way-down hand-back, the posture held and never stood
up: the one-step start's snapshots tucked a hind paw 6.6-7.1 cm in one frame about 20 frames
after lying down (docs/EVALUATION.md in git history, the twenty-ninth session), where no term
looked.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from canis.runtime.features import ACTIONS, INPUT
from canis.runtime.poses import KEYFRAME_ACTIONS
from canis.runtime.trajectory import ControlState
from canis.runtime.transition import MAX_VARIATION
from canis.training.placed_speed import OwnDraws
from canis.training.stopping_pops import StoppingDogs

POSTURES = ("sit", "lie", "beg")
TRANSITION_FRAMES = 45  # the demo's (demo/app.py)
STANDING_FRAMES = (30, 90)  # before the posture is asked, drawn per dog
HELD_FRAMES = (60, 180)  # the posture held (from its request), drawn per dog
# The whip came 8 frames after the hand-back; a second covers the motion network settling.
KEPT_FRAMES = 60
# Each dog's transitions are sampled with target noise up to MAX_VARIATION (as the RTN was
# trained), so that 32 dogs are not three transitions played 32 times.


@dataclass
class GettingUpPlan:
    """Each dog's way through getting_up_inputs, (dogs,) each."""

    posture: np.ndarray  # the posture asked (POSTURES)
    asked_down: np.ndarray  # the frame it is asked
    asked_up: np.ndarray  # the frame stand is asked
    variation: np.ndarray  # both transitions' (Controller.transition_to)
    seeds: np.ndarray  # (dogs, 2): the way down's and the way up's transition_to seed
    settling: np.ndarray  # kept after the way down, never asked up (bool)


def getting_up_plan(
    dogs: int, generator: np.random.Generator, varied: bool, settling_share: float = 0.0
) -> GettingUpPlan:
    """The dogs' draws; `varied`: whether the transition network samples (has target noise);
    `settling_share`: the share of the dogs kept after the way down (module docstring)."""
    posture = generator.choice(POSTURES, dogs)
    asked_down = generator.integers(*STANDING_FRAMES, dogs)
    asked_up = asked_down + generator.integers(*HELD_FRAMES, dogs)
    variation = generator.uniform(0, MAX_VARIATION, dogs) if varied else np.zeros(dogs)
    seeds = generator.integers(2**31, size=(dogs, 2))
    # Drawn last and only with a share, so the runs before the option draw the dogs they drew.
    settling = generator.random(dogs) < settling_share if settling_share else np.zeros(dogs, bool)
    asked_up = np.where(settling, -1, asked_up)
    return GettingUpPlan(posture, asked_down, asked_up, variation, seeds, settling)


def getting_up_inputs(
    model_path: Path,
    transition_path: Path | None,
    dogs: int,
    generator: np.random.Generator,
    phases_out: np.ndarray | None = None,
    settling_share: float = 0.0,
    kept_frames: int = KEPT_FRAMES,
):
    """x (dogs, kept_frames, 480) as the Controller built it for each dog's first kept_frames
    steps after being handed back from getting up, or for the settling dogs from lying, sitting
    or begging (module docstring; transition_path None: the shipped transition network), and
    (dogs,) zeros (the speed asked). Where phases_out (dogs, kept_frames or more) is given, the
    phase each kept step fed the network (PFNN's)."""
    from canis.runtime.controller import Controller
    from canis.runtime.inference import MotionModel
    from canis.runtime.transition import TransitionModel

    rtn = TransitionModel(transition_path)
    controller = Controller(MotionModel(model_path, threads=1), count=dogs, transition_model=rtn)
    plan = getting_up_plan(dogs, generator, bool(rtn.noise_width), settling_share)
    facing_rad = controller.root_yaw_rad.copy()
    action = np.full(dogs, ACTIONS.index("idle"))
    # Each dog's first kept step (after getting up, or settling); until then past any frame.
    first_kept = np.full(dogs, np.iinfo(np.int32).max, np.int64)
    xs = np.empty((dogs, kept_frames, INPUT.size), np.float32)
    frame = 0
    while frame < plan.asked_up.max() or frame < first_kept.max() + kept_frames:
        for dog in np.flatnonzero((plan.asked_down == frame) | (plan.asked_up == frame)):
            up = bool(plan.asked_up[dog] == frame)
            target = "stand" if up else str(plan.posture[dog])
            started = controller.transition_to(
                target,
                TRANSITION_FRAMES,
                characters=[dog],
                variation=float(plan.variation[dog]),
                seed=int(plan.seeds[dog, int(up)]),
            )
            facing_rad[dog] = started.final_yaw_rad[0]
            action[dog] = ACTIONS.index(KEYFRAME_ACTIONS[target])
            if up or plan.settling[dog]:  # handed back after started.frames steps: the next
                first_kept[dog] = frame + started.frames  # one is the network's
        phase_rad = controller.state.phase_rad.copy()  # what this step feeds the network
        x = controller.step(ControlState(np.zeros((dogs, 2)), facing_rad.copy(), action.copy()))
        kept = frame - first_kept
        for dog in np.flatnonzero((kept >= 0) & (kept < kept_frames)):
            xs[dog, kept[dog]] = x[dog]
            if phases_out is not None:
                phases_out[dog, kept[dog]] = phase_rad[dog]
        frame += 1
    controller.close()
    return xs, np.zeros(dogs)


class GettingUpDogs(StoppingDogs):
    """Each epoch's getting-up dogs and the stopping-pops term over their unrolled steps."""

    def __init__(
        self, model, saved, data, standard, run_dir, dogs, reference, unroll: int,
        settling_share: float = 0.0,
    ):  # fmt: skip
        super().__init__(model, saved, data, standard, run_dir, dogs, reference, unroll)
        self.path = self.path.with_name("getting_up.onnx")
        self.draws = OwnDraws()
        self.settling_share = settling_share

    def refresh(self, generator: np.random.Generator) -> float:
        # Its own draws (OwnDraws, the children spawn gave it before): a run with it and one
        # without differ by the term alone (the recipe is sensitive to its draws: the same
        # recipe at seeds 8 and 9 turned 1.25x and 1.31x the mocap's skating).
        self.generator = self.draws.next(generator)
        return super().refresh(self.generator)

    def _driven(self, generator: np.random.Generator):
        return getting_up_inputs(
            self.path, None, self.dogs, generator, self.phases, self.settling_share
        )

    def loss(self, predict, dogs: int, generator: np.random.Generator):
        """The stopping-pops term over `dogs` of this refresh's dogs (drawn by its own
        generator, not `generator`)."""
        return super().loss(predict, dogs, self.generator)

"""Closed-loop fine-tuning's settings (training/finetune.py): the loss configuration
(ClosedLoopConfig) and the run's (FineTuneSettings), each checked in range where it is made; a
config file of them (`canis finetune --config FILE.json`; a recipe's [finetune] table,
training/configs/*.toml, holds the same keys), read and refused in one line naming the key;
and what a resume must share with the run it continues (check_resumable).
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import numpy as np
from canis.training.moving_skating import DOGS_PER_STEP, FRAMES_PER_DOG, MAX_TURN_DEGPS
from canis.training.optimisation import DROPOUT, WEIGHT_DECAY

MAX_UNROLL_FRAMES = FRAMES_PER_DOG  # a moving dog's steps in a batch


@dataclass
class ClosedLoopConfig:
    ground_truth_frames: int = 4  # frames fed the mocap at the start of each stretch
    own_frames: int = 8  # frames fed the network's own output, at the curriculum's end
    curriculum_epochs: int = 4  # own frames grow linearly from 1 over these epochs
    contact_weight: float = 0.0  # 0: no contact term (training/finetune_losses.py)
    # 0: no placed-stillness term (training/placed_stillness.py): the runtime's own dogs placed
    # standing and asked nothing, refreshed each epoch, `placed_dogs` of them, kept still.
    placed_stillness_weight: float = 0.0
    placed_dogs: int = 64
    # > 0: the placed terms' dogs are driven anew by the current weights every this many steps
    # as well as at each epoch's start (0: at each epoch's start only). A one-step term on the
    # same dogs for a whole epoch can fit their steps without changing how a fresh dog moves.
    placed_refresh_steps: int = 0
    # > 1: the moving-skating term runs over stretches of this many steps with the pose fed back
    # with its gradient (moving_dogs.MovingDogs); 1: one step from each recorded input.
    moving_unroll_frames: int = 1
    # 0: no moving-skating term (training/moving_skating.py): on the runtime's own dogs asked a
    # steady speed (training/moving_skating.py), the shown paws' skating and heights held down to
    # the mocap's at the dog's asked speed.
    moving_skating_weight: float = 0.0
    # The moving dogs' fastest turn either way, deg/s (half of them turn;
    # training/moving_skating.py). The controllers evaluation's turn asks 76.8 deg/s, beyond
    # the default's.
    moving_max_turn_degps: float = MAX_TURN_DEGPS
    # The moving-skating term counts paws carried lower than the mocap's too.
    moving_paws_both_ways: bool = False
    # The moving-skating term holds each paw down (under 2.5 cm) as often as the mocap's too,
    # this many times DOWN_SHARE_COST_CM per share short (0: not held). Runs before it was a
    # weight stored False/True: 0/1 alike.
    moving_paws_down: float = 0.0
    # The moving-skating term's skating beyond the mocap's counted in the mocap's at that speed.
    moving_skating_relative: bool = False
    # The moving-skating term's bar: the mocap's skating at the dog's speed times this (1: the
    # mocap's own; under 1 asks for less sliding than the mocap's, whose planted paws slide).
    moving_skating_scale: float = 1.0
    # The moving-skating term holds each paw's root mean square height above 2.5 cm up to the
    # mocap's too (how high it swings, which the means above cannot tell).
    moving_paws_swing: bool = False
    # ... only for the dogs asked under this speed (m/s; 0: at every speed).
    moving_paws_swing_below_mps: float = 0.0
    # 0: each turning moving dog turns one way throughout; else it swaps sides this often (s),
    # as the controllers evaluation's turn does every 5 s.
    moving_turn_switch_s: float = 0.0
    # The moving dogs' terms are each step's mean over this many dogs (8: the runs before it).
    moving_dogs_per_step: int = DOGS_PER_STEP
    # > 0: this share of each batch's stretches is drawn from those passing a frame labelled
    # jump (0: every stretch alike). Jumps are about 1% of the rows and no placed or moving dog
    # is asked one, so the terms on those dogs can wear the jump away unseen.
    jump_share: float = 0.0
    # The mocap stretches' frames labelled jump weigh this many times the others in the MSE
    # (1: all alike): beside the moving dogs' terms the stretches' own loss is about an eighth
    # of the whole, and a jump's frames a hundredth of that.
    jump_weight: float = 1.0

    def __post_init__(self):
        for option, weight in (
            ("--contact-weight", self.contact_weight),
            ("--placed-stillness-weight", self.placed_stillness_weight),
            ("--moving-skating-weight", self.moving_skating_weight),
            ("--moving-paws-down", self.moving_paws_down),
        ):
            if not (np.isfinite(weight) and weight >= 0):
                raise ValueError(f"{option} {weight}: must be finite and >= 0")
        if self.placed_stillness_weight > 0 and self.placed_dogs < 2:
            raise ValueError(
                f"--placed-dogs {self.placed_dogs}: needs 2 or more (the keyframe's dogs and "
                "the mocap's)"
            )
        if self.moves_dogs() and self.placed_dogs < 1:
            raise ValueError(f"--placed-dogs {self.placed_dogs}: needs 1 or more")
        if not 1 <= self.moving_unroll_frames <= MAX_UNROLL_FRAMES:
            raise ValueError(
                f"--moving-unroll-frames {self.moving_unroll_frames}: must be between 1 and "
                f"{MAX_UNROLL_FRAMES} (the moving dogs' steps a batch takes)"
            )
        if not 0 <= self.moving_max_turn_degps <= 180:
            raise ValueError(
                f"--moving-max-turn-degps {self.moving_max_turn_degps}: must be between 0 and 180"
            )
        if not (np.isfinite(self.moving_turn_switch_s) and self.moving_turn_switch_s >= 0):
            raise ValueError(
                f"--moving-turn-switch-s {self.moving_turn_switch_s}: must be 0 (never) or a "
                "positive number of seconds"
            )
        if self.moving_dogs_per_step < 1:
            raise ValueError(
                f"--moving-dogs-per-step {self.moving_dogs_per_step}: must be at least 1"
            )
        below = self.moving_paws_swing_below_mps
        if not (np.isfinite(below) and below >= 0):
            raise ValueError(
                f"--moving-paws-swing-below-mps {below}: must be a finite speed >= 0 (m/s)"
            )
        if below and not self.moving_paws_swing:
            raise ValueError("--moving-paws-swing-below-mps: needs --moving-paws-swing")
        scale = self.moving_skating_scale
        if not (np.isfinite(scale) and scale > 0):
            raise ValueError(f"--moving-skating-scale {scale}: must be a finite number > 0")
        skating_options = (
            ("--moving-paws-swing", self.moving_paws_swing),
            ("--moving-skating-relative", self.moving_skating_relative),
            ("--moving-skating-scale", scale != 1.0),
            ("--moving-paws-down", self.moving_paws_down),
            ("--moving-paws-both-ways", self.moving_paws_both_ways),
            ("--moving-dogs-per-step", self.moving_dogs_per_step != DOGS_PER_STEP),
            ("--moving-turn-switch-s", self.moving_turn_switch_s),
        )
        for option, given in skating_options:
            if given and not self.moves_dogs():
                raise ValueError(f"{option}: needs --moving-skating-weight")
        if self.placed_refresh_steps < 0:
            raise ValueError(
                f"--placed-refresh-steps {self.placed_refresh_steps}: must be 0 (each epoch) "
                "or more"
            )
        if not (np.isfinite(self.jump_share) and 0 <= self.jump_share < 1):
            raise ValueError(
                f"--jump-share {self.jump_share}: must be a share of the batch, 0 or more and "
                "under 1"
            )
        if not (np.isfinite(self.jump_weight) and self.jump_weight >= 1):
            raise ValueError(f"--jump-weight {self.jump_weight}: must be a finite weight >= 1")

    def moves_dogs(self) -> bool:
        """Whether a term runs on the moving dogs (moving_dogs.MovingDogs)."""
        return self.moving_skating_weight > 0

    def own_frames_at(self, epoch: int) -> int:
        """The own-output stretch in `epoch` (0-based): 0 turns closed loop off."""
        if self.own_frames == 0:
            return 0
        ramp = min(1.0, (epoch + 1) / max(self.curriculum_epochs, 1))
        return max(1, round(ramp * self.own_frames))

    def identity(self) -> dict:
        return asdict(self)


@dataclass
class FineTuneSettings:
    start: str  # a `canis train` checkpoint (.safetensors) to start from
    dataset: str
    epochs: int = 8
    steps_per_epoch: int = 200
    batch_size: int = 32
    lr: float = 1e-5
    seed: int = 0
    validation_stretches: int = 256
    precision: str = "fp32"  # "bf16": autocast matmuls in training; "auto": precision_for_run
    # None: the start's own (start_regularisation): a network trained without dropout is not
    # fine-tuned with it.
    dropout: float | None = None
    weight_decay: float | None = None

    def __post_init__(self):
        if self.dropout is not None and not 0 <= self.dropout < 1:
            raise ValueError(f"--dropout {self.dropout}: must be at least 0 and below 1")
        if self.weight_decay is not None and not self.weight_decay >= 0:
            raise ValueError(f"--weight-decay {self.weight_decay}: must be 0 or more")


# A config file's keys (`canis finetune --config`): the run's settings beside the loss
# configuration's fields; the paths (--start, --out, --dataset) and --threads stay flags.
RUN_FIELDS = ("epochs", "steps_per_epoch", "batch_size", "lr", "seed", "precision", "dropout",
              "weight_decay")  # fmt: skip
PRECISIONS = ("auto", "bf16", "fp32")
_TYPES = {
    "int": ("an integer", lambda v: isinstance(v, int) and not isinstance(v, bool)),
    "float": ("a number", lambda v: isinstance(v, int | float) and not isinstance(v, bool)),
    "bool": ("true or false", lambda v: isinstance(v, bool)),
    "str": ("a string", lambda v: isinstance(v, str)),
}


def config_fields() -> dict[str, str]:
    """Each key a config file may hold, with its type as the dataclasses annotate it."""
    run = {f.name: f.type for f in fields(FineTuneSettings) if f.name in RUN_FIELDS}
    return run | {f.name: f.type for f in fields(ClosedLoopConfig)}


def check_run_settings(values: dict) -> None:
    """The run's settings `values` holds (a config file's), in range."""
    for key in ("epochs", "steps_per_epoch", "batch_size"):
        if key in values and values[key] < 1:
            raise ValueError(f"--{key.replace('_', '-')} {values[key]}: must be at least 1")
    if "seed" in values and values["seed"] < 0:
        raise ValueError(f"--seed {values['seed']}: must be 0 or more")
    if "lr" in values and not (np.isfinite(values["lr"]) and values["lr"] > 0):
        raise ValueError(f"--lr {values['lr']}: must be a finite number > 0")
    if values.get("precision", "auto") not in PRECISIONS:
        raise ValueError(f"--precision {values['precision']!r}: one of {', '.join(PRECISIONS)}")
    regularisation = {k: values[k] for k in ("dropout", "weight_decay") if k in values}
    FineTuneSettings(start="", dataset="", **regularisation)


def read_config(path) -> dict:
    """The settings of a config file: a JSON object of config_fields' keys (numbers as floats
    where the field is one). A file that is not such an object, an
    unknown key, a wrong type or an out-of-range value is refused in one line naming the key,
    before any work."""
    path = Path(path)
    try:
        values = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise ValueError(f"{path}: not a readable JSON config ({error})") from None
    if not isinstance(values, dict):
        raise ValueError(f"{path}: must hold a JSON object of settings")
    return check_config_values(values, f"{path}: ")


def check_config_values(values: dict, where: str, table: str = "") -> dict:
    """`values` (a config file's settings, or a recipe's finetune table) with floats where the
    field is one; an unknown key, a wrong type or an out-of-range value is refused in one line
    that starts with `where` and names the key (after `table`, as "finetune.")."""
    known = config_fields()
    for key, value in values.items():
        if key in DELETED_FIELDS:
            raise ValueError(
                f"{where}{table}{key}: a setting this version no longer has (deleted with its "
                "term: docs/DECISIONS.md, 'Fine-tuning keeps three loss terms')"
            )
        if key not in known:
            raise ValueError(f"{where}unknown key {table}{key} (the keys: {', '.join(known)})")
        kinds = [kind.strip() for kind in known[key].split("|")]  # "float | None"
        if not (value is None and "None" in kinds or _TYPES[kinds[0]][1](value)):
            words = _TYPES[kinds[0]][0] + (" or null" if "None" in kinds else "")
            raise ValueError(f"{where}{table}{key} {json.dumps(value)}: must be {words}")
        if kinds[0] == "float" and value is not None:
            values[key] = float(value)
    try:
        check_run_settings(values)
        ClosedLoopConfig(**{k: v for k, v in values.items() if k not in RUN_FIELDS})
    except ValueError as error:  # its message names flags: here they are the file's keys
        keys = re.sub(r"--([a-z0-9-]+)", lambda m: table + m.group(1).replace("-", "_"), str(error))
        raise ValueError(f"{where}{keys}") from None
    return values


def start_regularisation(saved: dict, settings: FineTuneSettings) -> dict:
    """The dropout and weight decay a fine-tune uses where `settings` leaves them unset: those
    its start was last fine-tuned or trained with. A checkpoint converted from an export
    records neither and reads as the training defaults, the shipped networks' own."""
    trained = (saved.get("train") or {}).get("config") or {}
    earlier = saved.get("closed_loop") or {}
    defaults = {"dropout": DROPOUT, "weight_decay": WEIGHT_DECAY}
    return {
        name: float(
            getattr(settings, name)
            if getattr(settings, name) is not None
            else earlier.get(name, trained.get(name, default))
        )
        for name, default in defaults.items()
    }


# The loss configuration's fields of the first fine-tunes: every run records them.
FIRST_FIELDS = ("ground_truth_frames", "own_frames", "curriculum_epochs", "contact_weight")
# The loss configuration's fields that experiments added and no shipped model used, with the
# value they had when off (issue 61: deleted with their code paths). A run that stored one of
# them at that value resumes; one that turned it on does not.
DELETED_FIELDS = {
    "skating_weight": 0.0,
    "contact_paws": "predicted",
    "feedback": "pose",
    "rollout_dogs": 2048,
    "rollout_path_share": 0.5,
    "rollout_match_frames": 0,
    "leg_motion_groups": "batch",
    "leg_motion_on": "stretches",
    "stillness_weight": 0.0,
    "moving_gait_turning": False,
    "moving_gait_duty": False,
    "moving_turns_as_mocap": False,
    "moving_paws_lift": 0.0,  # runs before it was a weight stored False/True: 0/1 alike
    "moving_paws_planted": 0.0,
    "moving_paws_still": 0.0,
    "moving_paws_still_predicted": False,
    "moving_paws_down_fast": 0.0,
    "moving_paws_down_fast_mps": 2.0,
    "replay_skating_weight": 0.0,
    "bone_weight": 0.0,
    "bone_positions_only": False,
    "clip_grad_norm": 0.0,
    # Deleted by the fine-tuning terms' ablation on the held-out clips (docs/RESULTS.md).
    "placed_speed_weight": 0.0,
    "moving_legs_weight": 0.0,
    "moving_legs_both_ways": False,
    "moving_legs_below_mps": 0.0,
    "moving_course_weight": 0.0,
    "moving_gait_weight": 0.0,
    "moving_gait_reference": "all",
    "stopping_pops_weight": 0.0,
    "getting_up_pops_weight": 0.0,
    "getting_up_settling": 0.0,
    "posture_stillness_weight": 0.0,
    "leg_motion_weight": 0.0,
    # Tried on two seeds, no gain beyond their spread (docs/DECISIONS.md).
    "int8_aware": False,
    "moving_reference_reached": False,
    "replayed_weight": 0.0,
}


def check_resumable(path, saved: dict, identity: dict) -> None:
    """A resumed fine-tuning must use the loss configuration it started with: name what
    differs (issue 17's bad input)."""
    previous = saved.get("closed_loop")
    if previous is None:
        raise ValueError(
            f"{path}: is not a closed-loop fine-tuning checkpoint (no closed_loop settings); "
            "give it as --start of a new run instead of resuming it"
        )
    # As runs written before these were settings: fp32, and the training's default dropout and
    # weight decay (they were fixed then); the settings that came later at their defaults
    # (every term off).
    unset = {"precision": "fp32", "dropout": DROPOUT, "weight_decay": WEIGHT_DECAY} | {
        f.name: f.default for f in fields(ClosedLoopConfig) if f.name not in FIRST_FIELDS
    }
    deleted = [
        f"{key} {previous[key]!r}"
        for key, off in DELETED_FIELDS.items()
        if key in previous and previous[key] != off
    ]
    if deleted:
        raise ValueError(
            f"{path}: was fine-tuned with settings this version no longer has: "
            f"{', '.join(deleted)}; its fine-tuning cannot be resumed"
        )
    # keep_epochs (deleted too) chose the checkpoints kept, not the weights.
    gone = {*DELETED_FIELDS, "keep_epochs"}
    previous = {key: value for key, value in previous.items() if key not in gone}
    previous, identity = unset | previous, unset | identity
    differ = [
        f"{key} {previous.get(key)!r} (now {value!r})"
        for key, value in identity.items()
        if previous.get(key) != value
    ]
    differ += [
        f"{key} {value!r} (now unset)" for key, value in previous.items() if key not in identity
    ]
    if differ:
        raise ValueError(
            f"{path}: was fine-tuned with another loss configuration: {', '.join(differ)}; "
            "resume with the same settings or start a new run"
        )

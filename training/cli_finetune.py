"""`canis finetune`: closed-loop (acRNN-style) fine-tuning of a trained controller on its own
outputs (training/closed_loop_training.py). The parser sits beside its handler."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from canis.training.cli_train import add_speed_options, apply_speed_options


def add_commands(commands: argparse._SubParsersAction) -> None:
    finetune = commands.add_parser(
        "finetune",
        help="fine-tune a trained controller in closed loop on its own outputs (acRNN-style)",
    )
    finetune.add_argument(
        "--start",
        type=Path,
        required=True,
        help="canis train checkpoint, or an fp32 motion model (.onnx, e.g. the shipped "
        "assets/models/mann8.onnx) trained on --dataset",
    )
    finetune.add_argument("--dataset", type=Path, default=Path("data/dog_dataset.npz"))
    finetune.add_argument("--out", type=Path, required=True, help="run folder (checkpoint, log)")
    finetune.add_argument("--epochs", type=int, default=8)
    finetune.add_argument("--steps-per-epoch", type=int, default=200)
    finetune.add_argument("--batch-size", type=int, default=32)
    finetune.add_argument("--lr", type=float, default=1e-5)
    finetune.add_argument("--seed", type=int, default=0)
    finetune.add_argument(
        "--ground-truth-frames", type=int, default=4, help="mocap inputs opening each stretch"
    )
    finetune.add_argument(
        "--own-frames",
        type=int,
        default=8,
        help="inputs rebuilt from the network's own outputs after them (0: one-step training)",
    )
    finetune.add_argument(
        "--curriculum-epochs", type=int, default=4, help="epochs over which own frames grow"
    )
    finetune.add_argument(
        "--contact-weight",
        type=float,
        default=0.0,
        help="weight of the planted-paw world-motion term (0: off; training/contact_loss.py)",
    )
    finetune.add_argument(
        "--contact-paws",
        choices=("predicted", "drawn"),
        default="predicted",
        help="--contact-weight: the paws whose motion it measures: the predicted paw "
        "positions (default), or the paws the runtime draws from the predicted axes, which "
        "the evaluation measures (training/shown_pose.py)",
    )
    finetune.add_argument(
        "--skating-weight",
        type=float,
        default=0.0,
        help="weight of the skating term: the predicted step's foot skating (the evaluation's "
        "measure, any paw under 2.5 cm) above the mocap's (0: off; training/contact_loss.py)",
    )
    finetune.add_argument(
        "--leg-motion-weight",
        type=float,
        default=0.0,
        help="weight of the leg-motion term: each leg joint's mean turn per predicted step "
        "over the rows of --leg-motion-groups, the network run without dropout on its own "
        "frames, against the mocap's in the same frames, squared deg/frame (0: off; "
        "training/leg_motion_loss.py)",
    )
    finetune.add_argument(
        "--leg-motion-groups",
        choices=("batch", "locomotion", "action-gait", "gait"),
        default="batch",
        help="the leg-motion term's means: over each frame's batch, over each frame's rows on "
        "locomotion (standing, sitting and lying rows left out), over each action and gait "
        "in the batch on its own (a standing dog's legs then held to the mocap's standing "
        "dogs', not free to stir for walking legs that swing too little), or over each gait "
        "with the rows off locomotion left out",
    )
    finetune.add_argument(
        "--leg-motion-on",
        choices=("stretches", "rollouts"),
        default="stretches",
        help="where the leg-motion term is measured: on the stretches (the pose fed back, the "
        "trajectory the mocap's) or one step from each frame of the runtime's rollouts (the "
        "trajectory the dog's own, as in the game; --feedback runtime or both)",
    )
    finetune.add_argument(
        "--stillness-weight",
        type=float,
        default=0.0,
        help="weight of the stillness term: on the stretches' own frames off locomotion "
        "(standing, sitting, lying), each joint's turn per predicted step beyond the mocap's "
        "in the same frame, squared deg/frame, the network run without dropout (0: off; "
        "training/leg_motion_loss.py)",
    )
    finetune.add_argument(
        "--placed-stillness-weight",
        type=float,
        default=0.0,
        help="weight of the placed-stillness term: each epoch --placed-dogs dogs placed "
        "standing by the runtime (the standing keyframe, as the demo's R, or a mocap standing "
        "frame) and asked nothing for 3 s; each joint's turn and the root's step beyond a "
        "small allowance, squared, the network run without dropout (0: off; "
        "training/placed_stillness.py)",
    )
    finetune.add_argument(
        "--placed-dogs",
        type=int,
        default=64,
        help="--placed-stillness-weight, --placed-speed-weight (and --moving-legs-weight, "
        "--moving-skating-weight) and --replay-skating-weight: "
        "the dogs placed each epoch for each term (for the first, a quarter in the standing "
        "keyframe)",
    )
    finetune.add_argument(
        "--placed-refresh-steps",
        type=int,
        default=0,
        help="the placed terms' dogs driven anew by the current weights every N steps as "
        "well as at each epoch's start (0: at each epoch's start only)",
    )
    finetune.add_argument(
        "--placed-speed-weight",
        type=float,
        default=0.0,
        help="weight of the placed-speed term: each epoch --placed-dogs dogs driven by the "
        "runtime from the standing keyframe, its speed tracking off, each asked a speed "
        "(0.4-3.6 m/s, half turning) until settled; each dog's mean predicted root speed "
        "against the asked, relative, beyond 5%%, squared, the network run without dropout "
        "(0: off; training/placed_speed.py)",
    )
    finetune.add_argument(
        "--moving-legs-weight",
        type=float,
        default=0.0,
        help="weight of the moving-legs term: on the placed-speed term's dogs (driven each "
        "epoch, with or without that term), each leg joint's mean turn against the mocap's "
        "locomotion frames' at the dog's asked speed, the shortfall beyond 5%%, squared "
        "(deg/frame)^2, the network run without dropout (0: off; training/moving_legs.py)",
    )
    finetune.add_argument(
        "--moving-legs-both-ways",
        action="store_true",
        help="the moving-legs term counts a leg joint turning more than the mocap's, beyond "
        "the allowance, as well as less",
    )
    finetune.add_argument(
        "--moving-legs-below-mps",
        type=float,
        default=0.0,
        metavar="MPS",
        help="the moving-legs term counts only the moving dogs asked under this speed (m/s; 0, "
        "the default: every dog): the walk's legs raised without pressing on the canter's",
    )
    finetune.add_argument(
        "--moving-skating-weight",
        type=float,
        default=0.0,
        help="weight of the moving-skating term: on the placed-speed term's dogs, each dog's "
        "mean foot skating of the shown paws beyond the mocap's locomotion frames' at the "
        "dog's asked speed (cm/frame), plus its paws' mean heights beyond the mocap's there "
        "(cm), the network run without dropout (0: off; training/moving_skating.py)",
    )
    finetune.add_argument(
        "--moving-paws-both-ways",
        action="store_true",
        help="the moving-skating term counts paws carried lower than the mocap's at the dog's "
        "asked speed, beyond the allowance, as well as higher",
    )
    finetune.add_argument(
        "--moving-paws-down",
        type=float,
        nargs="?",
        const=1.0,
        default=0.0,
        metavar="WEIGHT",
        help="the moving-skating term holds each paw down (under the measure's 2.5 cm) as "
        "often as the mocap's at the dog's asked speed: with --moving-paws-both-ways, a paw "
        "cannot meet the mocap's mean height by hovering; WEIGHT (default 1) times 10 per "
        "share of steps short",
    )
    finetune.add_argument(
        "--moving-paws-down-fast",
        type=float,
        default=0.0,
        metavar="WEIGHT",
        help="the paws-down hold weighed this much more on the moving dogs asked above "
        "--moving-paws-down-fast-mps (the canter's: the mean over all the dogs hardly sees "
        "its hind paws hover; 0: off)",
    )
    finetune.add_argument(
        "--moving-paws-down-fast-mps",
        type=float,
        metavar="MPS",
        help="--moving-paws-down-fast's speed (m/s; default: 2)",
    )
    finetune.add_argument(
        "--moving-skating-relative",
        action="store_true",
        help="the moving-skating term counts the skating beyond the mocap's in the mocap's at "
        "the dog's speed (skating twice the mocap's costs 1) instead of in cm/frame, so that it "
        "is not drowned by the paws' heights (cm)",
    )
    finetune.add_argument(
        "--moving-skating-scale",
        type=float,
        default=1.0,
        metavar="S",
        help="the moving-skating term's bar is the mocap's skating at the dog's speed times S "
        "(default: 1, the mocap's own; under 1 asks for less sliding than the mocap's)",
    )
    finetune.add_argument(
        "--moving-paws-lift",
        type=float,
        nargs="?",
        const=1.0,
        default=0.0,
        metavar="WEIGHT",
        help="the moving-skating term holds each paw's mean height above the measure's 2.5 cm "
        "up to the mocap's at the dog's asked speed: a paw that shuffles just above the ground "
        "pays for the steps it does not take, WEIGHT (default 1) per cm short",
    )
    finetune.add_argument(
        "--moving-paws-planted",
        type=float,
        nargs="?",
        const=1.0,
        default=0.0,
        metavar="WEIGHT",
        help="the moving-skating term holds each paw's mean height while it is down (its "
        "planted height) to the mocap's at the dog's asked speed: a planted paw that hangs "
        "over the ground pays WEIGHT (default 1) per cm above",
    )
    finetune.add_argument(
        "--moving-paws-still",
        type=float,
        nargs="?",
        const=1.0,
        default=0.0,
        metavar="WEIGHT",
        help="the moving-skating term holds each paw planted (down and still in the world, "
        "under the runtime's contact speed) as often as the mocap's at the dog's asked speed: "
        "a paw that slides along the ground pays for the steps it does not stand, WEIGHT "
        "(default 1) times --moving-paws-down's cost",
    )
    finetune.add_argument(
        "--moving-paws-still-predicted",
        action="store_true",
        help="--moving-paws-still counts a paw as planted only when its predicted velocity "
        "is under the contact speed too (the velocity held to the shown motion)",
    )
    finetune.add_argument(
        "--moving-max-turn-degps",
        type=float,
        default=60.0,  # placed_speed.MAX_TURN_DEGPS, written out: the parser stays torch-free
        help="the placed-speed term's dogs (and so the moving-legs and moving-skating "
        "terms'): half of them turn, uniformly up to this many deg/s either way (the "
        "controllers evaluation's turn asks 76.8)",
    )
    finetune.add_argument(
        "--moving-turns-as-mocap",
        action="store_true",
        help="the turning moving dogs turn uniformly up to the mocap's turn rate at their "
        "asked speed (the 90th percentile of its frames asked to move there) instead of "
        "--moving-max-turn-degps: sharp turns at a walk, gentle ones at a canter",
    )
    finetune.add_argument(
        "--moving-paws-swing",
        action="store_true",
        help="the moving-skating term holds each paw's root mean square height above the "
        "measure's 2.5 cm up to the mocap's at the dog's asked speed: a flattened stride that "
        "meets the mean heights pays for the swings it does not make",
    )
    finetune.add_argument(
        "--moving-paws-swing-below-mps",
        type=float,
        default=0.0,
        metavar="MPS",
        help="--moving-paws-swing only for the moving dogs asked under this speed (m/s; 0, the "
        "default: at every speed): the walk's shuffle without pressing on the canter's stride",
    )
    finetune.add_argument(
        "--stopping-pops-weight",
        type=float,
        default=0.0,
        metavar="W",
        help="weight of the stopping-pops term (0: off): as many dogs as the moving dogs, "
        "asked a speed and then to stop as a player letting go, no shown joint moving faster "
        "in a frame than the mocap's at the speed the dog is going (training/stopping_pops.py)",
    )
    finetune.add_argument(
        "--moving-course-weight",
        type=float,
        default=0.0,
        metavar="W",
        help="weight of the moving-course term (0: off): on the moving dogs, each dog's mean "
        "yaw rate against the asked turn plus what closes its offset from the asked facing "
        "over a second (training/moving_course.py): a dog asked straight ahead goes there",
    )
    finetune.add_argument(
        "--moving-gait-weight",
        type=float,
        default=0.0,
        metavar="W",
        help="weight of the moving-gait term (0: off): on the moving dogs, each unrolled over "
        "a gait window (61 frames, its pose fed back), the correlation of its lateral and "
        "diagonal paws' footfalls held to the mocap's at its speed (training/moving_gait.py)",
    )
    finetune.add_argument(
        "--moving-gait-turning",
        action="store_true",
        help="the moving-gait term holds the turning dogs' footfalls too, not only those of "
        "the dogs asked straight ahead",
    )
    finetune.add_argument(
        "--moving-gait-reference",
        default="all",
        metavar="all|most-used",
        help="the moving-gait term's reference at a speed: the mean of all the mocap's "
        "windows there (all: a mix of gaits where it uses two) or of the windows of the gait "
        "it uses most there (most-used)",
    )
    finetune.add_argument(
        "--moving-gait-duty",
        action="store_true",
        help="the moving-gait term holds the share of the window each paw is down to the "
        "mocap's too (its duty factor)",
    )
    finetune.add_argument(
        "--getting-up-pops-weight",
        type=float,
        default=0.0,
        metavar="W",
        help="weight of the getting-up-pops term (0: off): as many dogs as the moving dogs, "
        "taken to a sit, lie or beg and back up through the shipped transition network, the "
        "stopping-pops term's bar on their first second after the hand-back "
        "(training/getting_up_pops.py)",
    )
    finetune.add_argument(
        "--getting-up-settling",
        type=float,
        default=0.0,
        metavar="SHARE",
        help="this share of the getting-up-pops term's dogs is kept for its first second after "
        "the way down (the posture held, never stood up) instead of after getting up: a "
        "lying dog's paw tucked in one frame pays as a getting-up pop does (0, the default: "
        "none)",
    )
    finetune.add_argument(
        "--posture-stillness-weight",
        type=float,
        default=0.0,
        metavar="W",
        help="weight of the posture-stillness term (0: off): as many dogs as the moving dogs, "
        "taken to a sit, lie or beg through the shipped transition network and held, the "
        "placed-stillness term's bar on their first 3 s after the hand-back "
        "(training/posture_stillness.py)",
    )
    finetune.add_argument(
        "--jump-weight",
        type=float,
        default=1.0,
        metavar="K",
        help="the mocap stretches' frames labelled jump weigh K times the others in their MSE "
        "(1, the default: all alike)",
    )
    finetune.add_argument(
        "--jump-share",
        type=float,
        default=0.0,
        metavar="SHARE",
        help="this share of each batch's stretches drawn from those passing a frame labelled "
        "jump (0, the default: every stretch alike): jumps are about 1%% of the rows and the "
        "placed and moving dogs are never asked one, so their terms can wear the jump away",
    )
    finetune.add_argument(
        "--moving-dogs-per-step",
        type=int,
        default=8,  # placed_speed.DOGS_PER_STEP, written out: the parser stays torch-free
        help="the moving dogs' terms (placed speed, moving legs, moving skating) are each "
        "step's mean over this many of the epoch's dogs, drawn at random: more steady the "
        "gradient (half the dogs turn, their speeds 0.4-3.6 m/s), slower the step",
    )
    finetune.add_argument(
        "--moving-turn-switch-s",
        type=float,
        default=0.0,
        help="the turning moving dogs swap sides every this many seconds, each from a random "
        "point of its first, as the controllers evaluation's turn does every 5 s (0: each "
        "turns one way throughout)",
    )
    finetune.add_argument(
        "--moving-unroll-frames",
        type=int,
        default=1,
        help="the moving dogs' terms (--placed-speed-weight, --moving-legs-weight, "
        "--moving-skating-weight) over "
        "stretches of K steps, each step's input the recorded one with the pose the previous "
        "prediction leaves, fed back with its gradient (1: one step from each recorded input)",
    )
    finetune.add_argument(
        "--replay-skating-weight",
        type=float,
        default=0.0,
        help="weight of the replay-skating term: each epoch --placed-dogs dogs placed in the "
        "mocap's state at training frames and driven by the runtime with their clips' own "
        "commands for 2 s; each dog's mean foot skating over a few of its steps beyond the "
        "mocap's on the same frames, cm/frame, the network run without dropout (0: off; "
        "training/replay_skating.py)",
    )
    finetune.add_argument(
        "--bone-weight",
        type=float,
        default=0.0,
        help="weight of the bone term: on every frame, each predicted bone vector against its "
        "parent's predicted rotation applied to the skeleton's offset, squared cm (0: off; "
        "training/bone_loss.py)",
    )
    finetune.add_argument(
        "--bone-positions-only",
        action="store_true",
        help="--bone-weight: the term moves the predicted positions alone, the rotations (the "
        "dog is drawn from) held fixed",
    )
    finetune.add_argument(
        "--feedback",
        choices=("pose", "runtime", "both"),
        default="pose",
        help="what the own frames feed back: pose (the pose block rebuilt from the prediction, "
        "the trajectory the mocap's), runtime (every input built by the runtime: the "
        "trajectory the dog's own past and the blend of the clip's command with the predicted "
        "future; rollouts of --own-frames from the mocap's state, refreshed each epoch: "
        "training/runtime_rollout.py) or both (the two losses summed)",
    )
    finetune.add_argument(
        "--rollout-dogs",
        type=int,
        default=2048,
        help="--feedback runtime or both: rollouts made each epoch (each step trains on "
        "--batch-size of them, every frame)",
    )
    finetune.add_argument(
        "--rollout-path-share",
        type=float,
        default=0.5,
        help="--feedback runtime or both: the share of rollouts given the clip's path ahead "
        "(the runtime then faces the future along the path); the others steer as from a stick",
    )
    finetune.add_argument(
        "--rollout-match-frames",
        type=int,
        default=0,
        help="--feedback runtime or both: each rollout step's target is the frame of its clip "
        "within this many frames whose pose is nearest the dog's (0: the frame at the same "
        "time)",
    )
    finetune.add_argument(
        "--clip-grad-norm",
        type=float,
        default=0.0,
        help="scale each step's gradient down to this norm where it is longer (0: off); the "
        "log gives each epoch's median and largest norm before clipping",
    )
    finetune.add_argument(
        "--dropout",
        type=float,
        help="probability of dropping each layer's input (default: the start's own; 0.3 for an "
        "ONNX start, the shipped networks')",
    )
    finetune.add_argument(
        "--weight-decay",
        type=float,
        help="AdamW weight decay (default: the start's own; 0.0025 for an ONNX start)",
    )
    finetune.add_argument(
        "--resume", action="store_true", help="continue the run in --out from its checkpoint"
    )
    finetune.add_argument(
        "--keep-epochs",
        action="store_true",
        help="keep each epoch's checkpoint as eN.safetensors beside last.safetensors (for "
        "`canis average`)",
    )
    finetune.add_argument(
        "--restandardise",
        action="store_true",
        help="an ONNX --start standardised otherwise than --dataset (a rebuild of its data) "
        "has its first and last layers rescaled to the dataset's statistics: the same "
        "function of the raw features",
    )
    finetune.add_argument(
        "--measure",
        action="store_true",
        help="train nothing: print --start's validation and closed-loop validation losses "
        "(over --ground-truth-frames + --own-frames stretches) as JSON",
    )
    add_speed_options(finetune)
    finetune.set_defaults(handler=run_finetune)

    average = commands.add_parser(
        "average",
        help="the mean of two or more checkpoints' weights (a model soup; e.g. a fine-tune's "
        "epochs kept by --keep-epochs)",
        description="Writes a checkpoint whose weights are the mean of the given ones' "
        "(training/checkpoint_average.py): the same network and standardisation only; the "
        "optimiser state is dropped, the sources are named in the config and the model card.",
    )
    average.add_argument("checkpoints", type=Path, nargs="+", help="two or more .safetensors")
    average.add_argument("--out", type=Path, required=True, help="the averaged .safetensors")
    average.set_defaults(handler=run_average)


def run_average(args) -> int:
    from canis.training.checkpoint_average import average_checkpoints

    config = average_checkpoints(args.checkpoints, args.out)
    sources = ", ".join(Path(s["file"]).name for s in config["averaged_from"])
    print(f"wrote {args.out}: the mean of {sources}")
    return 0


def run_finetune(args) -> int:
    from canis.training.closed_loop_training import ClosedLoopConfig, FineTuneSettings, fine_tune

    if not args.dataset.exists():
        raise FileNotFoundError(
            f"{args.dataset} does not exist; build it with `canis dataset build`"
        )
    # Checked before anything is written (an ONNX start is converted into --out below).
    for option, weight in (
        ("--contact-weight", args.contact_weight),
        ("--skating-weight", args.skating_weight),
        ("--leg-motion-weight", args.leg_motion_weight),
        ("--stillness-weight", args.stillness_weight),
        ("--placed-stillness-weight", args.placed_stillness_weight),
        ("--placed-speed-weight", args.placed_speed_weight),
        ("--moving-legs-weight", args.moving_legs_weight),
        ("--moving-skating-weight", args.moving_skating_weight),
        ("--moving-course-weight", args.moving_course_weight),
        ("--moving-gait-weight", args.moving_gait_weight),
        ("--replay-skating-weight", args.replay_skating_weight),
        ("--bone-weight", args.bone_weight),
        ("--clip-grad-norm", args.clip_grad_norm),
    ):
        if not (math.isfinite(weight) and weight >= 0):
            raise ValueError(f"{option} {weight}: must be finite and >= 0")
    fast_mps = args.moving_paws_down_fast_mps
    if fast_mps is not None and not args.moving_paws_down_fast:
        raise ValueError("--moving-paws-down-fast-mps: needs --moving-paws-down-fast")
    loop = ClosedLoopConfig(
        ground_truth_frames=args.ground_truth_frames,
        own_frames=args.own_frames,
        curriculum_epochs=args.curriculum_epochs,
        contact_weight=args.contact_weight,
        contact_paws=args.contact_paws,
        skating_weight=args.skating_weight,
        leg_motion_weight=args.leg_motion_weight,
        leg_motion_groups=args.leg_motion_groups,
        leg_motion_on=args.leg_motion_on,
        stillness_weight=args.stillness_weight,
        placed_stillness_weight=args.placed_stillness_weight,
        placed_dogs=args.placed_dogs,
        placed_refresh_steps=args.placed_refresh_steps,
        placed_speed_weight=args.placed_speed_weight,
        moving_legs_weight=args.moving_legs_weight,
        moving_unroll_frames=args.moving_unroll_frames,
        moving_legs_both_ways=args.moving_legs_both_ways,
        moving_legs_below_mps=args.moving_legs_below_mps,
        moving_skating_weight=args.moving_skating_weight,
        moving_course_weight=args.moving_course_weight,
        moving_gait_weight=args.moving_gait_weight,
        moving_gait_turning=args.moving_gait_turning,
        moving_gait_reference=args.moving_gait_reference,
        moving_gait_duty=args.moving_gait_duty,
        moving_max_turn_degps=args.moving_max_turn_degps,
        moving_turns_as_mocap=args.moving_turns_as_mocap,
        moving_paws_both_ways=args.moving_paws_both_ways,
        moving_turn_switch_s=args.moving_turn_switch_s,
        moving_dogs_per_step=args.moving_dogs_per_step,
        moving_paws_swing=args.moving_paws_swing,
        moving_paws_swing_below_mps=args.moving_paws_swing_below_mps,
        moving_paws_down=args.moving_paws_down,
        moving_paws_down_fast=args.moving_paws_down_fast,
        **({} if fast_mps is None else {"moving_paws_down_fast_mps": fast_mps}),
        moving_skating_relative=args.moving_skating_relative,
        moving_skating_scale=args.moving_skating_scale,
        moving_paws_lift=args.moving_paws_lift,
        moving_paws_planted=args.moving_paws_planted,
        moving_paws_still=args.moving_paws_still,
        moving_paws_still_predicted=args.moving_paws_still_predicted,
        replay_skating_weight=args.replay_skating_weight,
        bone_weight=args.bone_weight,
        bone_positions_only=args.bone_positions_only,
        clip_grad_norm=args.clip_grad_norm,
        jump_share=args.jump_share,
        jump_weight=args.jump_weight,
        stopping_pops_weight=args.stopping_pops_weight,
        getting_up_pops_weight=args.getting_up_pops_weight,
        getting_up_settling=args.getting_up_settling,
        posture_stillness_weight=args.posture_stillness_weight,
        feedback=args.feedback,
        rollout_dogs=args.rollout_dogs,
        rollout_path_share=args.rollout_path_share,
        rollout_match_frames=args.rollout_match_frames,
    )
    start = args.start
    if start.suffix == ".onnx":  # converted once, into the run folder (a resume reuses it)
        converted = args.out / "start.safetensors"
        if not args.resume:
            from canis.training.checkpoint_from_onnx import checkpoint_from_onnx

            checkpoint_from_onnx(start, args.dataset, converted, args.restandardise)
            print(f"{start}: weights taken into {converted}")
        start = converted
    if args.measure:
        return _measure(start, args)
    precision = apply_speed_options(args)
    settings = FineTuneSettings(
        start=str(start),
        dataset=str(args.dataset),
        epochs=args.epochs,
        steps_per_epoch=args.steps_per_epoch,
        batch_size=args.batch_size,
        lr=args.lr,
        seed=args.seed,
        precision=precision,
        dropout=args.dropout,
        weight_decay=args.weight_decay,
        keep_epochs=args.keep_epochs,
    )
    fine_tune(settings, loop, args.out, resume=args.resume)
    print(f"done: {args.out} (last.safetensors, log.csv)")
    return 0


def _measure(checkpoint: Path, args) -> int:
    import json

    from canis.training.closed_loop_training import ClosedLoopConfig, measure

    loop = ClosedLoopConfig(args.ground_truth_frames, args.own_frames, args.curriculum_epochs, 0.0)
    figures = measure(checkpoint, str(args.dataset), loop)
    print(json.dumps({"checkpoint": str(checkpoint)} | figures))
    return 0

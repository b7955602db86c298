"""The dogs the demo shows: the built-in dog, and each rig given with --rig (runtime/rig.py),
which C cycles through. With a rig shown, the controller runs the network on flat ground
and a RigDogs (runtime/retarget.py) puts the motion on the rig, on the demo's terrain with
the rig's own IK and foot lock; what the window draws, the HUD's speed and the IK and
foot-lock keys are then the rig's."""

from __future__ import annotations

from pathlib import Path

from canis.runtime.rig import Rig


class RigChoice:
    """DemoApp's rigs and which is shown (-1: the built-in dog)."""

    def __init__(self, paths=()):
        # Loaded before the window opens: a bad rig is one line naming the file and joint.
        self.rigs = [Rig.load(Path(p)) for p in paths]
        self.index = 0 if self.rigs else -1
        self.dogs = None  # the RigDogs of the rig shown, made with its controller

    @property
    def rig(self) -> Rig | None:
        return self.rigs[self.index] if self.index >= 0 else None

    @property
    def name(self) -> str:
        return self.rig.path.stem if self.rig is not None else "built-in dog"

    def next(self) -> None:
        """The next rig, then the built-in dog, then the first rig again."""
        if self.rigs:
            self.index = self.index + 1 if self.index + 1 < len(self.rigs) else -1

    def attach(self, controller, terrain, scene) -> None:
        """The rig shown put on `controller` (new), the scene drawing its skeleton and mesh."""
        from canis.runtime.retarget import RigDogs

        scene.body = None  # made again for the dog shown (demo/scene.py draw)
        if self.rig is None:
            self.dogs = None
            scene.skeleton, scene.body_mesh = controller.skeleton, None
            return
        self.dogs = RigDogs(controller, self.rig, terrain=terrain, foot_lock=True)
        scene.skeleton, scene.body_mesh = self.rig.skeleton, self.rig.mesh

    def shown(self, controller):
        """What the window draws from: the rig's dogs, or the controller itself."""
        return self.dogs if self.dogs is not None else controller

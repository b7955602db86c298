"""The runtime inside a real game engine: Panda3D draws the dog's body mesh, skinned by the
runtime's displayed pose every frame, on rolling hills that Panda3D draws, with keyboard
control and a follow camera.

Needs the `panda3d` extra:  pip install 'canis[panda3d]'   (Panda3D, panda3d-gltf, pygltflib)

    python examples/panda3d_dog.py            a window: W/S or arrows trot forward/back,
                                              A/D turn, Shift canter, Space jump, 2 sit, Esc quit
    python examples/panda3d_dog.py --offscreen out.png    render a few frames, save the last
    python examples/panda3d_dog.py --rig corgi.glb        a game's own dog (a skinned glTF,
                                                          e.g. from `canis rig make`)

The body (canis.runtime.body) goes to Panda3D as glTF through panda3d-gltf, the same .glb that
`canis run --export` writes; each frame the runtime's joint rotations and the hips' position
drive the model's joints (Actor.controlJoint) and Panda3D skins the mesh. Panda3D is z-up and
panda3d-gltf converts the model from glTF's y-up, so the runtime's transforms are converted
the same way (TO_PANDA below). With --rig, the runtime retargets the motion onto that dog
(canis.runtime.retarget: the network walks on flat ground, the rig on the hills with its own
IK and foot lock) and the rig's joints are driven the same way.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
from canis.runtime import Controller, ControlState, FixedTimestep, MotionModel, procedural
from canis.runtime.assets import shipped_model_path
from canis.runtime.body import joint_matrices, load_body_mesh
from canis.runtime.features import ACTIONS, FPS
from canis.runtime.kinematics import local_rotations
from canis.runtime.retarget import RigDogs
from canis.runtime.rig import Rig
from canis.tools.motion_export import SkinnedMeshArrays, glb_bytes, skinned_glb_bytes

# Runtime/glTF frame (x left, y up, z forward) -> Panda3D's (x right, y forward, z up),
# as panda3d-gltf converts models: (x, y, z) -> (x, -z, y).
TO_PANDA = np.array([[1.0, 0, 0, 0], [0, 0, -1.0, 0], [0, 1.0, 0, 0], [0, 0, 0, 1.0]])
TROT_MPS, CANTER_MPS, TURN_RADPS = 1.5, 3.2, 2.0
TERRAIN_SIZE_M, TERRAIN_STEP_M = 40.0, 0.5


def panda_matrix(matrix: np.ndarray):
    """A runtime-frame transform (4, 4), column vectors, as Panda3D's LMatrix4f (row vectors)."""
    from panda3d.core import LMatrix4f

    converted = TO_PANDA @ matrix @ TO_PANDA.T
    return LMatrix4f(*converted.T.reshape(-1))


def terrain_node(heightmap, centre_xz=(0.0, 0.0)):
    """A Panda3D GeomNode of the heightmap around centre_xz: a lit grid mesh."""
    from panda3d.core import (
        Geom,
        GeomNode,
        GeomTriangles,
        GeomVertexData,
        GeomVertexFormat,
        GeomVertexWriter,
    )

    count = int(TERRAIN_SIZE_M / TERRAIN_STEP_M) + 1
    axis = np.arange(count) * TERRAIN_STEP_M - TERRAIN_SIZE_M / 2
    xs, zs = np.meshgrid(axis + centre_xz[0], axis + centre_xz[1])
    points = np.stack([xs, zs], -1).reshape(-1, 2)
    heights, normals = heightmap.sample(points)
    data = GeomVertexData("terrain", GeomVertexFormat.get_v3n3c4(), Geom.UH_static)
    data.setNumRows(len(points))
    vertex, normal, colour = (GeomVertexWriter(data, n) for n in ("vertex", "normal", "color"))
    checker = (np.floor(points[:, 0]) + np.floor(points[:, 1])) % 2
    for (x, z), y, n, c in zip(points, heights, normals, checker, strict=True):
        vertex.addData3(x, -z, y)  # runtime -> Panda3D axes
        normal.addData3(n[0], -n[2], n[1])
        colour.addData4(0.42 + 0.05 * c, 0.6 + 0.04 * c, 0.4, 1.0)
    triangles = GeomTriangles(Geom.UH_static)
    for row in range(count - 1):
        for col in range(count - 1):
            a = row * count + col
            # counter-clockwise seen from above in Panda3D's frame (z flipped to -y)
            triangles.addVertices(a, a + count, a + 1)
            triangles.addVertices(a + 1, a + count, a + count + 1)
    geom = Geom(data)
    geom.addPrimitive(triangles)
    node = GeomNode("terrain")
    node.addGeom(geom)
    return node


class DogGame:
    def __init__(self, offscreen: bool = False, size=(960, 540), rig: Path | None = None):
        """`rig`: a skinned glTF dog to drive instead of the built-in one."""
        from panda3d.core import loadPrcFileData

        rig = Rig.load(rig) if rig is not None else None  # refused before a window opens

        loadPrcFileData(
            "",
            f"win-size {size[0]} {size[1]}\nwindow-title canis: Panda3D dog\n"
            "audio-library-name null\nsync-video false\n"
            # Off-screen through EGL (p3headlessgl), never X: with no DISPLAY set Panda3D's X
            # pipe still opens ":0.0", and an X server there that is not ours (a test's Xvfb)
            # broke the render (blank white, or an X fatal error).
            + (
                "load-display p3headlessgl\nwindow-type offscreen\nframebuffer-multisample 0\n"
                if offscreen
                else ""
            ),
        )
        import gltf
        from direct.actor.Actor import Actor
        from direct.showbase.ShowBase import ShowBase
        from panda3d.core import AmbientLight, DirectionalLight, NodePath, OmniBoundingVolume

        self.base = ShowBase()
        if self.base.win is None:
            raise RuntimeError("Panda3D could not open a window or an offscreen buffer here")
        self.base.disableMouse()
        self.base.setBackgroundColor(0.72, 0.8, 0.9, 1.0)
        self.heightmap = procedural("hills")
        if rig is None:
            self.controller = Controller(
                MotionModel(shipped_model_path()), terrain=self.heightmap, foot_lock=True
            )
            self.shown, self.skeleton = self.controller, self.controller.skeleton
        else:  # the network on flat ground, in its own units; the rig on the hills
            self.controller = Controller(MotionModel(shipped_model_path()))
            self.shown = RigDogs(self.controller, rig, terrain=self.heightmap, foot_lock=True)
            self.skeleton = rig.skeleton
        self.loop = FixedTimestep()
        self.facing_rad, self.action = 0.0, "idle"

        # The body as glTF, loaded by panda3d-gltf like any asset a game would ship.
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "dog.glb"
            if rig is None:
                path.write_bytes(glb_bytes(load_body_mesh(), self.skeleton))
            else:  # the rig as the runtime holds it: its hips the root, facing +z
                rest = (rig.rest_local_rotations, rig.rest_positions_m[0])
                arrays = SkinnedMeshArrays.of(rig.mesh)
                path.write_bytes(skinned_glb_bytes(arrays, self.skeleton, *rest))
            model = NodePath(gltf.load_model(str(path)))
        self.dog = Actor(model)
        self.dog.reparentTo(self.base.render)
        # The joints move the skinned vertices far from where the file's bounds put them (the
        # dog walks away from the origin): bounds that hold everything keep the camera from
        # culling the dog once it has walked off them (it vanished after about 5 s).
        self.dog.node().setBounds(OmniBoundingVolume())
        self.dog.node().setFinal(True)
        self.dog.setMaterialOff(1)  # light the coat's vertex colours, not the white material
        self.joints = [
            self.dog.controlJoint(None, "modelRoot", name) for name in self.skeleton.joint_names
        ]
        self.terrain = self.base.render.attachNewNode(terrain_node(self.heightmap))

        sun = DirectionalLight("key")
        sun.setColor((1.0, 0.96, 0.88, 1))
        sun_node = self.base.render.attachNewNode(sun)
        sun_node.setHpr(-30, -55, 0)
        fill = DirectionalLight("fill")
        fill.setColor((0.3, 0.34, 0.42, 1))
        fill_node = self.base.render.attachNewNode(fill)
        fill_node.setHpr(150, -20, 0)
        ambient = AmbientLight("sky")
        ambient.setColor((0.38, 0.38, 0.4, 1))
        for light in (sun_node, fill_node, self.base.render.attachNewNode(ambient)):
            self.base.render.setLight(light)
        self.base.render.setShaderAuto()

        self.keys: set[str] = set()
        for key in (
            "w",
            "s",
            "a",
            "d",
            "arrow_up",
            "arrow_down",
            "arrow_left",
            "arrow_right",
            "shift",
            "space",
            "2",
        ):
            self.base.accept(key, self.keys.add, [key])
            self.base.accept(f"{key}-up", self.keys.discard, [key])
        self.base.accept("escape", sys.exit)
        self.camera_position = None
        self.show_pose()

    def control(self) -> ControlState:
        held = self.keys
        forward = ("w" in held or "arrow_up" in held) - ("s" in held or "arrow_down" in held)
        turn = ("a" in held or "arrow_left" in held) - ("d" in held or "arrow_right" in held)
        self.facing_rad += turn * TURN_RADPS / FPS
        speed = (CANTER_MPS if "shift" in held else TROT_MPS) * forward
        action = "jump" if "space" in held else "sit" if "2" in held else "move"
        if forward == 0 and action == "move":
            action = "idle"
        velocity = speed * np.array([math.sin(self.facing_rad), math.cos(self.facing_rad)])
        return ControlState(
            velocity[None], np.array([self.facing_rad]), np.array([ACTIONS.index(action)])
        )

    def show_pose(self) -> None:
        """The runtime's displayed pose onto the model's joints, interpolated between the last
        two steps by the loop's alpha (drawn at the display's rate, stepped at 60 Hz); the
        camera follows."""
        positions, rotations = self.shown.display_pose(self.loop.alpha)
        local = local_rotations(self.skeleton, rotations[0])
        translations = self.skeleton.offsets_m.astype(np.float64).copy()
        translations[0] = positions[0, 0]
        for joint, matrix in zip(self.joints, joint_matrices(translations, local), strict=True):
            joint.setMat(panda_matrix(matrix))
        hips = positions[0, 0].astype(np.float64)
        behind = np.array([math.sin(self.facing_rad), math.cos(self.facing_rad)])
        eye = np.array([hips[0] - 3.0 * behind[0], hips[1] + 1.1, hips[2] - 3.0 * behind[1]])
        if self.camera_position is None:
            self.camera_position = eye
        self.camera_position += 0.1 * (eye - self.camera_position)  # a lagging follow camera
        x, y, z = self.camera_position
        self.base.camera.setPos(x, -z, y)
        self.base.camera.lookAt(hips[0], -hips[2], hips[1] - 0.1)

    def update(self, elapsed_s: float) -> None:
        for _ in range(self.loop.advance(elapsed_s)):
            if self.shown is self.controller:
                self.controller.step(self.control())
            else:  # asked in the rig's world: the network is asked in its own units
                self.controller.step(self.shown.control(self.control()))
                self.shown.update()
        self.show_pose()

    def run(self) -> None:
        from direct.task import Task

        def tick(task):
            self.update(self.base.clock.getDt())
            return Task.cont

        self.base.taskMgr.add(tick, "canis")
        self.base.run()

    def render_to(self, path: Path, frames: int = 3) -> np.ndarray:
        """Renders a few frames off-screen; saves and returns the last as (H, W, 4) uint8."""
        from panda3d.core import PNMImage

        for _ in range(frames):
            self.base.graphicsEngine.renderFrame()
        image = PNMImage()
        if not self.base.win.getScreenshot(image):
            raise RuntimeError("Panda3D could not read the offscreen buffer back")
        image.write(str(path))
        texture = self.base.win.getScreenshot()  # a Texture, bottom row first
        data = np.frombuffer(texture.getRamImageAs("RGBA"), np.uint8)
        return data.reshape(texture.getYSize(), texture.getXSize(), 4)[::-1]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--offscreen", type=Path, help="render off-screen to this PNG and exit")
    parser.add_argument("--rig", type=Path, help="a skinned glTF dog to drive (canis rig make)")
    args = parser.parse_args(argv)
    if args.offscreen:
        game = DogGame(offscreen=True, rig=args.rig)
        game.keys.add("w")
        for _ in range(90):
            game.update(1.0 / FPS)
        game.render_to(args.offscreen)
        print(f"wrote {args.offscreen}")
        # Out at once, past the interpreter's teardown: there Panda3D's headless EGL pipe
        # aborted the process (exit 134, with Mesa's llvmpipe) after the picture was written,
        # with or without ShowBase.destroy() first.
        sys.stdout.flush()
        os._exit(0)
    DogGame(rig=args.rig).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The 3-D scene: terrain, the dogs (a skinned body, or shaded bone capsules with the paws'
contacts), shadows and trajectories.

OpenGL 3.3 core through pyglet's shader API. One vertex shader lights everything but the body:
per-vertex position and normal, a per-draw model matrix and colour, a directional light with
ambient and soft wrap lighting. Two fragment shaders: the solid colour, and for the terrain a
1 m grid computed from world coordinates, so no texture file is needed.

Importing this module loads pyglet.gl, which opens a display unless pyglet's headless option
is already set: DemoApp imports it after choosing the mode.
"""

from __future__ import annotations

import math

import numpy as np
from canis.runtime.rotations import cross
from canis.runtime.terrain import Heightmap
from pyglet.gl import (
    GL_BLEND,
    GL_CULL_FACE,
    GL_DEPTH_TEST,
    GL_LINE_STRIP,
    GL_ONE_MINUS_SRC_ALPHA,
    GL_SRC_ALPHA,
    GL_TRIANGLES,
    glBlendFunc,
    glDisable,
    glEnable,
)
from pyglet.graphics.shader import Shader, ShaderProgram
from pyglet.math import Mat4, Vec3

# Lit per vertex: the terrain's normals are smooth and the capsules' fine enough that
# per-fragment lighting looks the same, and under llvmpipe every fragment instruction counts
# (the terrain fills most of the window; lighting the vertices and passing 5 floats instead
# of 6 takes about an eighth off the frame, measured in one alternated run at load 7).
VERTEX_SHADER = """#version 330 core
in vec3 position;
in vec3 normal;
uniform mat4 view_projection;
uniform mat4 model;
uniform vec4 colour;
uniform vec3 light_direction;
out vec2 ground_xz;
out vec4 shaded;
void main() {
    vec4 world = model * vec4(position, 1.0);
    vec3 n = normalize(mat3(model) * normal);
    float wrap = 0.5 + 0.5 * dot(n, -light_direction);  // soft, no black back sides
    shaded = vec4(colour.rgb * (0.35 + 0.75 * wrap * wrap), colour.a);
    ground_xz = world.xz;
    gl_Position = view_projection * world;
}
"""

SOLID_FRAGMENT_SHADER = """#version 330 core
in vec4 shaded;
out vec4 fragment;
void main() { fragment = shaded; }
"""

# The terrain's 1 m grid from world coordinates: a line about one pixel wide at any distance
# (fwidth: the cell's size on screen), so no texture file is needed.
TERRAIN_FRAGMENT_SHADER = """#version 330 core
in vec2 ground_xz;
in vec4 shaded;
out vec4 fragment;
void main() {
    vec2 cell = abs(fract(ground_xz + 0.5) - 0.5) / fwidth(ground_xz);
    float line = 1.0 - clamp(min(cell.x, cell.y), 0.0, 1.0);
    fragment = vec4(shaded.rgb * (1.0 - 0.35 * line), shaded.a);
}
"""

LIGHT_DIRECTION = Vec3(-0.4, -1.0, -0.3).normalize()  # the sun's travel direction
DOG_COLOUR = (0.78, 0.52, 0.28, 1.0)  # tests look for this colour in rendered frames
TERRAIN_COLOUR = (0.45, 0.62, 0.42, 1.0)
BONE_RADIUS_M = 0.025
TERRAIN_VIEW_SIZE_M = 30.0
# Mesh resolution: on Mesa's llvmpipe the terrain's triangle count weighs on the frame (13 ms
# at 0.25 m against 7.5 ms at 0.5 m, measured under load), and the far
# triangles are the many, small ones. So the grid is 0.5 m apart within
# TERRAIN_FINE_HALF_WIDTH_M of the patch's centre (the built-in hills vary over 4-9 m) and each
# cell beyond is TERRAIN_STEP_GROWTH times wider than the last. The grid lines are the same for
# every row and column, so the coarse cells meet the fine ones without cracks, and the patch
# follows the dog within TERRAIN_RECENTRE_M, so the dog and the camera stay over fine cells.
TERRAIN_STEP_M = 0.5
TERRAIN_FINE_HALF_WIDTH_M = 6.0
TERRAIN_STEP_GROWTH = 1.25
TERRAIN_RECENTRE_M = 2.0


def _sphere(rings: int = 8, segments: int = 12):
    positions, indices = [], []
    for r in range(rings + 1):
        theta = math.pi * r / rings
        for s in range(segments + 1):
            phi = 2 * math.pi * s / segments
            positions.append(
                (math.sin(theta) * math.cos(phi), math.cos(theta), math.sin(theta) * math.sin(phi))
            )
    for r in range(rings):
        for s in range(segments):
            a = r * (segments + 1) + s
            b = a + segments + 1
            indices += [a, b, a + 1, a + 1, b, b + 1]
    positions = np.array(positions, dtype=np.float32)
    return positions, positions.copy(), np.array(indices, dtype=np.uint32)


def _cylinder(segments: int = 12):
    """Radius 1, from y = 0 to y = 1."""
    positions, normals, indices = [], [], []
    for s in range(segments + 1):
        phi = 2 * math.pi * s / segments
        x, z = math.cos(phi), math.sin(phi)
        positions += [(x, 0.0, z), (x, 1.0, z)]
        normals += [(x, 0.0, z), (x, 0.0, z)]
    for s in range(segments):
        a = 2 * s
        indices += [a, a + 1, a + 2, a + 2, a + 1, a + 3]
    return (
        np.array(positions, np.float32),
        np.array(normals, np.float32),
        np.array(indices, np.uint32),
    )


def terrain_grid_offsets_m(
    half_size_m: float = TERRAIN_VIEW_SIZE_M / 2,
    fine_half_width_m: float = TERRAIN_FINE_HALF_WIDTH_M,
    step_m: float = TERRAIN_STEP_M,
    growth: float = TERRAIN_STEP_GROWTH,
) -> np.ndarray:
    """One axis's grid lines as offsets from the patch's centre, ascending: step_m apart out to
    fine_half_width_m, then each cell `growth` times wider than the last, out to half_size_m."""
    side = list(np.arange(1, round(fine_half_width_m / step_m) + 1) * step_m)
    cell = step_m
    while side[-1] < half_size_m - 1e-9:
        cell *= growth
        side.append(min(side[-1] + cell, half_size_m))
    side = np.array(side)
    return np.concatenate([-side[::-1], [0.0], side])


def _terrain_mesh(
    terrain: Heightmap, centre_xz, offsets_m: np.ndarray, fine_half_width_m: float = np.inf
):
    """Vertices on the terrain at the grid's lines. Within fine_half_width_m of the centre the
    normals are the heightmap's; beyond, the grid's own (from its heights), so a coarse cell
    across a sharp edge (a stair) is shaded as the gentle ramp it draws, not as the edge."""
    count = len(offsets_m)
    grid_x, grid_z = np.meshgrid(centre_xz[0] + offsets_m, centre_xz[1] + offsets_m)
    points = np.stack([grid_x, grid_z], axis=-1).reshape(-1, 2)
    heights, normals = terrain.sample(points)
    coarse = np.maximum(*np.meshgrid(np.abs(offsets_m), np.abs(offsets_m))) > fine_half_width_m
    if coarse.any():
        slope_z, slope_x = np.gradient(heights.reshape(count, count), offsets_m, offsets_m)
        grid_normals = np.stack([-slope_x, np.ones_like(slope_x), -slope_z], axis=-1)
        grid_normals /= np.linalg.norm(grid_normals, axis=-1, keepdims=True)
        normals = np.where(coarse.reshape(-1, 1), grid_normals.reshape(-1, 3), normals)
    positions = np.stack([points[:, 0], heights, points[:, 1]], axis=1).astype(np.float32)
    rows = np.arange(count - 1)[:, None] * count
    cols = np.arange(count - 1)[None, :]
    a = (rows + cols).reshape(-1)
    quads = np.stack([a, a + count, a + 1, a + 1, a + count, a + count + 1], axis=1)
    return positions, normals.astype(np.float32), quads.reshape(-1).astype(np.uint32)


class DogMesh:
    """All of one dog's capsules (a cylinder per bone, a sphere per joint) as one vertex list
    whose topology is fixed; each frame only the vertex positions and normals are rewritten,
    computed for every bone at once with numpy, and the whole dog is one draw call."""

    def __init__(self, program, parents: np.ndarray, radius_m: float = BONE_RADIUS_M):
        self.parents, self.radius = parents, radius_m
        self.bones = np.arange(1, len(parents))
        self.cylinder, self.cylinder_normals, cylinder_indices = _cylinder()
        self.sphere, _, sphere_indices = _sphere(rings=6, segments=10)
        self.sphere_scale = np.full(len(parents), radius_m)
        self.sphere_scale[0] = radius_m * 1.6  # the hips
        counts = (len(self.bones), len(self.cylinder)), (len(parents), len(self.sphere))
        indices, base = [], 0
        for (instances, vertices), mesh_indices in zip(
            counts, (cylinder_indices, sphere_indices), strict=True
        ):
            for i in range(instances):
                indices.append(mesh_indices + base + i * vertices)
            base += instances * vertices
        self.vertex_count = base
        self.vertices = program.vertex_list_indexed(
            base,
            GL_TRIANGLES,
            np.concatenate(indices).tolist(),
            position=("f", [0.0] * 3 * base),
            normal=("f", [0.0] * 3 * base),
        )

    def update(self, joints: np.ndarray) -> None:
        starts, ends = joints[self.parents[self.bones]], joints[self.bones]
        axis = ends - starts
        length = np.maximum(np.linalg.norm(axis, axis=1, keepdims=True), 1e-6)
        y = axis / length
        helper = np.where(np.abs(y[:, :1]) < 0.9, [[1.0, 0.0, 0.0]], [[0.0, 0.0, 1.0]])
        x = cross(y, helper)
        # Zero-length bones (Hips to Spine) give x = 0: a degenerate cylinder, not NaN.
        x /= np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-9)
        z = cross(x, y)
        c = self.cylinder
        cylinders = (
            starts[:, None]
            + self.radius * (c[None, :, :1] * x[:, None] + c[None, :, 2:] * z[:, None])
            + c[None, :, 1:2] * (y * length)[:, None]
        )
        n = self.cylinder_normals
        cylinder_normals = n[None, :, :1] * x[:, None] + n[None, :, 2:] * z[:, None]
        spheres = joints[:, None] + self.sphere_scale[:, None, None] * self.sphere[None]
        sphere_normals = np.broadcast_to(self.sphere[None], spheres.shape)
        positions = np.concatenate([cylinders.reshape(-1, 3), spheres.reshape(-1, 3)])
        normals = np.concatenate([cylinder_normals.reshape(-1, 3), sphere_normals.reshape(-1, 3)])
        self.vertices.position[:] = positions.astype(np.float32).reshape(-1)
        self.vertices.normal[:] = normals.astype(np.float32).reshape(-1)


def _sphere_matrix(centre: np.ndarray, radius: float) -> Mat4:
    return Mat4.from_translation(Vec3(*map(float, centre))) @ Mat4.from_scale(
        Vec3(radius, radius, radius)
    )


class Scene:
    """Draws, per frame: the terrain, the shadows over it, the dogs and the trajectories.
    (Drawing the dogs before the terrain would spare the terrain's shading behind them, 2% of
    the window, but the shadow then darkens paws that dip below it.) Every mesh is uploaded
    once; the trajectories' vertex lists are kept and rewritten in place."""

    def __init__(self, skeleton, terrain: Heightmap):
        self.skeleton = skeleton
        self.program = ShaderProgram(
            Shader(VERTEX_SHADER, "vertex"), Shader(SOLID_FRAGMENT_SHADER, "fragment")
        )
        self.terrain_program = ShaderProgram(
            Shader(VERTEX_SHADER, "vertex"), Shader(TERRAIN_FRAGMENT_SHADER, "fragment")
        )
        self.sphere = self._mesh(self.program, *_sphere())
        self.cylinder = self._mesh(self.program, *_cylinder())
        self.dog_mesh = None
        self.body = None  # the skinned body (demo/skinned_mesh.py), made on first use
        self.body_mesh = None  # its mesh: None the shipped dog's, else a rig's (RigMesh)
        self.show_body = True  # False: the bone capsules (the B key)
        self.lines: list = []  # one kept vertex list per trajectory
        # Parts left out of the picture, to time what each costs (demo/draw_parts.py):
        # any of "terrain", "shadow", "dog", "trajectories".
        self.hidden: set[str] = set()
        self.set_terrain(terrain)

    @staticmethod
    def _mesh(program, positions, normals, indices):
        return program.vertex_list_indexed(
            len(positions),
            GL_TRIANGLES,
            indices.tolist(),
            position=("f", positions.reshape(-1).tolist()),
            normal=("f", normals.reshape(-1).tolist()),
        )

    def set_terrain(self, terrain: Heightmap, centre_xz=(0.0, 0.0)) -> None:
        """The terrain patch around centre_xz. Its grid's topology never changes, so after the
        first only its vertices are rewritten in place (copied as arrays, not element by
        element), which keeps the frequent recentring cheap."""
        self.terrain = terrain
        self.terrain_centre = np.array(centre_xz, dtype=float)
        positions, normals, indices = _terrain_mesh(
            terrain, self.terrain_centre, terrain_grid_offsets_m(), TERRAIN_FINE_HALF_WIDTH_M
        )
        if getattr(self, "terrain_mesh", None) is None:
            self.terrain_mesh = self._mesh(self.terrain_program, positions, normals, indices)
            return
        np.ctypeslib.as_array(self.terrain_mesh.position)[:] = positions.reshape(-1)
        np.ctypeslib.as_array(self.terrain_mesh.normal)[:] = normals.reshape(-1)

    def follow(self, xz: np.ndarray) -> None:
        """Moves the terrain patch, on whole metres (so the fine cells stay where they were),
        when the dog walks TERRAIN_RECENTRE_M from its centre."""
        if np.max(np.abs(xz - self.terrain_centre)) > TERRAIN_RECENTRE_M:
            self.set_terrain(self.terrain, np.round(xz))

    def _draw(self, mesh, model: Mat4, colour, mode=GL_TRIANGLES) -> None:
        self.program["model"] = model
        self.program["colour"] = colour
        mesh.draw(mode)

    def draw(
        self,
        view_projection: Mat4,
        positions: np.ndarray,
        contacts: np.ndarray,
        trajectories: list[tuple[np.ndarray, tuple]] = (),
        rotations: np.ndarray | None = None,
    ) -> None:
        """positions (N, J, 3) world joints and rotations (N, J, 4) (None: bones only);
        contacts (N, 4); trajectories as (points (K, 3), colour) polylines."""
        glEnable(GL_DEPTH_TEST)
        glEnable(GL_CULL_FACE)
        self.program.use()
        self.program["view_projection"] = view_projection
        self.program["light_direction"] = LIGHT_DIRECTION
        self.terrain_program.use()
        self.terrain_program["view_projection"] = view_projection
        self.terrain_program["light_direction"] = LIGHT_DIRECTION
        self.terrain_program["model"] = Mat4()
        self.terrain_program["colour"] = TERRAIN_COLOUR
        if "terrain" not in self.hidden:
            self.terrain_mesh.draw(GL_TRIANGLES)
        self.program.use()
        glEnable(GL_BLEND)
        glBlendFunc(GL_SRC_ALPHA, GL_ONE_MINUS_SRC_ALPHA)
        glDisable(GL_CULL_FACE)
        for dog in range(len(positions) if "shadow" not in self.hidden else 0):
            self._draw_shadow(positions[dog].astype(np.float64))
        glDisable(GL_BLEND)
        if "dog" in self.hidden:
            pass
        elif self.show_body and rotations is not None:
            self.program.stop()
            if self.body is None:
                from canis.demo.skinned_mesh import SkinnedDog

                self.body = SkinnedDog(self.body_mesh)
            glEnable(GL_CULL_FACE)
            self.body.draw(view_projection, LIGHT_DIRECTION, positions, rotations)
            self.program.use()
        else:
            self._draw_bones(positions, contacts)
        self._draw_lines(trajectories if "trajectories" not in self.hidden else [])
        self.program.stop()

    def _draw_bones(self, positions: np.ndarray, contacts: np.ndarray) -> None:
        glDisable(GL_CULL_FACE)
        paws = self.skeleton.group("paws")
        if self.dog_mesh is None:
            self.dog_mesh = DogMesh(self.program, self.skeleton.parents)
        for dog in range(len(positions)):
            joints = positions[dog].astype(np.float64)
            self.dog_mesh.update(joints)
            self._draw(self.dog_mesh.vertices, Mat4(), DOG_COLOUR)
            for p, paw in enumerate(paws):
                colour = (0.9, 0.15, 0.1, 1.0) if contacts[dog, p] else (0.2, 0.2, 0.25, 1.0)
                self._draw(self.sphere, _sphere_matrix(joints[paw], 0.018), colour)

    def _draw_shadow(self, joints: np.ndarray) -> None:
        """A soft dark ellipse on the ground under the body, long along the body's facing
        (blending is on)."""
        hips = joints[0]
        middle = (hips + joints[self.skeleton.index("Spine1")]) / 2
        ground, _ = self.terrain.sample(middle[[0, 2]])
        facing = joints[self.skeleton.index("Neck"), [0, 2]] - hips[[0, 2]]
        yaw = math.atan2(float(facing[0]), float(facing[1]))
        shadow = (
            Mat4.from_translation(Vec3(float(middle[0]), float(ground) + 0.01, float(middle[2])))
            @ Mat4.from_rotation(-yaw, Vec3(0.0, 1.0, 0.0))  # pyglet turns clockwise
            @ Mat4.from_scale(Vec3(0.2, 0.004, 0.42))
        )
        self._draw(self.sphere, shadow, (0.0, 0.0, 0.0, 0.35))

    def _draw_lines(self, trajectories) -> None:
        """Each polyline as a line strip. Its vertex list is kept while its length is, and only
        its positions are rewritten, all before the first line is drawn: llvmpipe finishes
        every draw queued so far before it lets a buffer they read be written."""
        trajectories = [(p, c) for p, c in trajectories if len(p) >= 2]
        for extra in self.lines[len(trajectories) :]:
            extra.delete()
        del self.lines[len(trajectories) :]
        for i, (points, _) in enumerate(trajectories):
            flat = np.asarray(points, dtype=np.float32).reshape(-1)
            if i < len(self.lines) and self.lines[i].count == len(points):
                self.lines[i].position[:] = flat
                continue
            line = self.program.vertex_list(
                len(points),
                GL_LINE_STRIP,
                position=("f", flat.tolist()),
                normal=("f", [0.0, 1.0, 0.0] * len(points)),
            )
            if i < len(self.lines):
                self.lines[i].delete()
                self.lines[i] = line
            else:
                self.lines.append(line)
        for line, (_, colour) in zip(self.lines, trajectories, strict=True):
            self._draw(line, Mat4(), colour, GL_LINE_STRIP)


def camera_matrix(
    target: np.ndarray, yaw_rad: float, pitch_rad: float, distance_m: float, aspect: float
) -> Mat4:
    """A third-person orbit camera around target: yaw 0 looks along +z."""
    eye = target + distance_m * np.array(
        [
            -math.sin(yaw_rad) * math.cos(pitch_rad),
            math.sin(pitch_rad),
            -math.cos(yaw_rad) * math.cos(pitch_rad),
        ]
    )
    view = Mat4.look_at(Vec3(*map(float, eye)), Vec3(*map(float, target)), Vec3(0, 1, 0))
    projection = Mat4.perspective_projection(aspect, 0.05, 200.0, fov=55)
    return projection @ view

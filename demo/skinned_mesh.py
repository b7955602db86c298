"""The dog's body in the viewer: the shipped mesh (canis.runtime.body) skinned on the GPU.

The mesh is uploaded once; per dog and frame only the 27 joint matrices change (one
glUniformMatrix4fv of 27 x 16 floats) and the vertex shader blends them, 4 per vertex
(linear-blend skinning). Lighting: a key light (the scene's sun), a cooler fill light from
the other side, and a sky/ground ambient, on the coat colours stored per vertex.
"""

from __future__ import annotations

import ctypes

import numpy as np
from canis.runtime.body import BodyMesh, load_body_mesh, skinning_matrices
from pyglet.gl import (
    GL_FALSE,
    GL_TRIANGLES,
    GLfloat,
    glGetUniformLocation,
    glUniformMatrix4fv,
)
from pyglet.graphics.shader import Shader, ShaderProgram

MAX_JOINTS = 32

VERTEX_SHADER = f"""#version 330 core
in vec3 position;
in vec3 normal;
in vec3 colour;
in vec4 joints;   // joint indices, stored as floats
in vec4 weights;
uniform mat4 view_projection;
uniform mat4 bones[{MAX_JOINTS}];  // pose x inverse bind, world frame
out vec3 world_position;
out vec3 world_normal;
out vec3 coat;
void main() {{
    mat4 skin = weights.x * bones[int(joints.x)] + weights.y * bones[int(joints.y)]
              + weights.z * bones[int(joints.z)] + weights.w * bones[int(joints.w)];
    vec4 world = skin * vec4(position, 1.0);
    world_position = world.xyz;
    world_normal = mat3(skin) * normal;  // rigid blends: no inverse-transpose needed
    coat = colour;
    gl_Position = view_projection * world;
}}
"""

FRAGMENT_SHADER = """#version 330 core
in vec3 world_position;
in vec3 world_normal;
in vec3 coat;
uniform vec3 light_direction;  // the key light's travel direction
out vec4 fragment;
void main() {
    vec3 n = normalize(world_normal);
    float key = max(dot(n, -light_direction), 0.0);
    vec3 fill_direction = normalize(vec3(-light_direction.x, -0.3, -light_direction.z));
    float fill = max(dot(n, -fill_direction), 0.0);
    float sky = 0.5 + 0.5 * n.y;  // hemisphere ambient: brighter facing up
    vec3 light = vec3(1.0, 0.97, 0.9) * 0.8 * key
               + vec3(0.75, 0.82, 1.0) * 0.28 * fill
               + mix(vec3(0.32, 0.3, 0.27), vec3(0.45, 0.48, 0.55), sky);
    fragment = vec4(coat * light, 1.0);
}
"""


class SkinnedDog:
    """One vertex list for the mesh, drawn once per dog with that dog's joint matrices."""

    def __init__(self, mesh: BodyMesh | None = None):
        self.mesh = mesh or load_body_mesh()
        if len(self.mesh.joint_names) > MAX_JOINTS:
            raise ValueError(
                f"the body mesh has {len(self.mesh.joint_names)} joints, max {MAX_JOINTS}"
            )
        self.program = ShaderProgram(
            Shader(VERTEX_SHADER, "vertex"), Shader(FRAGMENT_SHADER, "fragment")
        )
        m = self.mesh
        self.vertices = self.program.vertex_list_indexed(
            m.vertex_count,
            GL_TRIANGLES,
            m.triangles.reshape(-1).tolist(),
            position=("f", m.positions_m.reshape(-1).tolist()),
            normal=("f", m.normals.reshape(-1).tolist()),
            colour=("Bn", m.colours.reshape(-1).tolist()),
            joints=("f", m.joints.astype(np.float32).reshape(-1).tolist()),
            weights=("f", m.weights.reshape(-1).tolist()),
        )
        self._bones_location = glGetUniformLocation(self.program.id, b"bones")

    def draw(self, view_projection, light_direction, positions: np.ndarray, rotations) -> None:
        """Draws N dogs: world joint positions (N, J, 3) and rotations (N, J, 4)."""
        matrices = skinning_matrices(self.mesh, positions, rotations)
        # GL wants column-major matrices: the transpose of numpy's row-major ones.
        columns = np.ascontiguousarray(matrices.transpose(0, 1, 3, 2), dtype=np.float32)
        self.program.use()
        self.program["view_projection"] = view_projection
        self.program["light_direction"] = light_direction
        for dog in columns:
            glUniformMatrix4fv(
                self._bones_location,
                len(dog),
                GL_FALSE,
                dog.ctypes.data_as(ctypes.POINTER(GLfloat)),
            )
            self.vertices.draw(GL_TRIANGLES)
        self.program.stop()

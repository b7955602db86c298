"""A game's own dog rig (runtime/rig.py, runtime/rig_mapping.py): made by `canis rig make`,
loaded back, mapped, and refused, naming the file and the joint, when it cannot be used."""

from __future__ import annotations

import json

import numpy as np
import pygltflib
import pytest
from canis.runtime.retarget import stride_scale
from canis.runtime.rig import Rig, RigError
from canis.tools.rig_make import BREEDS, EXTRA_JOINTS, RIG_NAMES, breed_skeleton, make_rig

COARSE_MESH_STEP_M = 0.012  # the body generator's grid, coarse: a rig in about a second


@pytest.fixture(scope="module")
def rigs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("rigs")
    return {b: make_rig(b, folder / f"{b}.glb", COARSE_MESH_STEP_M) for b in BREEDS}


def test_made_rigs_map_by_topology_with_their_own_names_and_extra_joints(rigs, dog):
    for breed, path in rigs.items():
        rig = Rig.load(path)
        names = rig.joint_names
        assert len(names) == dog.joint_count + len(EXTRA_JOINTS)
        # Every controller joint found under the rig's own name; the extras map to none.
        assert {d: names[j] for d, j in rig.mapping.items()} == {
            d: RIG_NAMES[d] for d in dog.joint_names
        }, breed
        mapped = set(rig.mapping.values())
        assert {names[j] for j in range(len(names)) if j not in mapped} == {
            e[0] for e in EXTRA_JOINTS
        }
        assert stride_scale(rig, dog) == pytest.approx(BREEDS[breed].leg_scale, abs=1e-6)
        # Standing in the controller's frame: the lowest paw on the ground, the hips above.
        paws = rig.skeleton.group("paws")
        assert rig.rest_positions_m[paws, 1].min() == pytest.approx(0.0, abs=1e-9)
        assert rig.rest_positions_m[0, [0, 2]] == pytest.approx([0.0, 0.0], abs=1e-9)
        # The tail the IK keeps above the ground: a chain from the joint playing Tail out.
        tail = rig.skeleton.group("tail")
        assert [names[j] for j in tail[[0, -1]]] == [RIG_NAMES["Tail"], RIG_NAMES["Tail1Site"]]
        assert all(rig.skeleton.parents[b] == a for a, b in zip(tail[:-1], tail[1:], strict=True))


def test_round_trip_keeps_every_bone_length(rigs, dog):
    for breed, path in rigs.items():
        rig = Rig.load(path)
        expected = breed_skeleton(BREEDS[breed], dog).bone_lengths_m()
        lengths = rig.skeleton.bone_lengths_m()
        for j, name in enumerate(dog.joint_names[1:], start=1):
            got = lengths[rig.skeleton.index(RIG_NAMES[name])]
            assert abs(got - expected[j]) < 1e-6, (breed, name)


def test_a_mapping_file_corrects_the_proposal_and_names_missing_joints(rigs, tmp_path):
    path = rigs["corgi"]
    mapping = tmp_path / "corgi.json"
    mapping.write_text(json.dumps({"joints": {"Tail": None, "Tail1": None, "Tail1Site": None}}))
    rig = Rig.load(path, mapping=mapping)
    assert "Tail" not in rig.mapping and "Hips" in rig.mapping  # the rest proposed
    mapping.write_text(json.dumps({"joints": {"LeftArm": "upper_arm.L"}}))
    with pytest.raises(RigError) as error:
        Rig.load(path, mapping=mapping)
    message = str(error.value)
    assert str(mapping) in message and "upper_arm.L" in message and "\n" not in message
    mapping.write_text(json.dumps({"joints": {"Neck": None}}))
    with pytest.raises(RigError, match="no neck and head chain.*Neck"):
        Rig.load(path, mapping=mapping)
    mapping.write_text(json.dumps({"joints": {"Paw": "hand_l"}}))
    with pytest.raises(RigError, match="'Paw' is not one of the controller's joints"):
        Rig.load(path, mapping=mapping)


def _edited(source, out, edit):
    gltf = pygltflib.GLTF2().load(str(source))
    edit(gltf)
    gltf.save(str(out))
    return out


def _node(gltf, name):
    return next(n for n in gltf.nodes if n.name == name)


def _refused(path, *parts, **load):
    with pytest.raises(RigError) as error:
        Rig.load(path, **load)
    message = str(error.value)
    assert str(path) in message and "\n" not in message, message
    for part in parts:
        assert part in message, message
    return message


def test_bad_rigs_are_refused_in_one_line_naming_the_file_and_joint(rigs, tmp_path):
    source = rigs["corgi"]
    no_skin = _edited(source, tmp_path / "no_skin.glb", lambda g: setattr(g, "skins", []))
    _refused(no_skin, "no skin")
    two = _edited(source, tmp_path / "two.glb", lambda g: g.skins.append(g.skins[0]))
    _refused(two, "2 skins")
    assert Rig.load(two, skin=1).joint_names == Rig.load(source).joint_names

    def cycle(g):
        pelvis = g.nodes.index(_node(g, "pelvis"))
        _node(g, "tail_end").children = [pelvis]

    _refused(_edited(source, tmp_path / "cycle.glb", cycle), "cycle", "pelvis")

    def not_finite(g):  # JSON holds no NaN or infinity: scales whose product overflows
        _node(g, "calf_l").scale = [1e200] * 3
        _node(g, "foot_l").scale = [1e200] * 3

    _refused(_edited(source, tmp_path / "inf.glb", not_finite), "foot_l", "non-finite")

    def zero_bone(g):
        _node(g, "toe_end_r").translation = [0.0, 0.0, 0.0]

    _refused(_edited(source, tmp_path / "zero.glb", zero_bone), "toe_end_r", "zero-length")

    def short_leg(g):  # the left hind leg folded up under the body
        _node(g, "calf_l").translation = [0.05, 0.0, 0.0]
        _node(g, "foot_l").translation = [0.05, 0.0, 0.0]

    # Mapped by a file (a folded leg's paw is no longer among the lowest end joints, which
    # is how the topology finds the paws).
    named = {d: RIG_NAMES[d] for d in RIG_NAMES}
    short = _edited(source, tmp_path / "short.glb", short_leg)
    _refused(short, "back left leg", "thigh_l", "does not reach the ground", mapping=named)
    missing = tmp_path / "missing.glb"
    _refused(missing, "no such rig file")


def test_a_rig_without_a_leg_is_refused_naming_the_chain(rigs, tmp_path):
    def drop_front_right(g):
        scapula = g.nodes.index(_node(g, "scapula_r"))
        for node in g.nodes:
            if node.children and scapula in node.children:
                node.children = [c for c in node.children if c != scapula]
        keep = [j for j in g.skins[0].joints if not _below(g, scapula, j)]
        g.skins[0].joints = keep

    def _below(g, top, j):
        if j == top:
            return True
        return any(_below(g, c, j) for c in g.nodes[top].children or [])

    # The inverse bind matrices no longer fit the shorter joint list: the mesh goes too.
    def edit(g):
        drop_front_right(g)
        g.skins[0].inverseBindMatrices = None
        for node in g.nodes:
            node.mesh = None if node.skin is not None else node.mesh

    path = _edited(rigs["corgi"], tmp_path / "three_legs.glb", edit)
    message = _refused(path)
    assert "paw tips" in message or "leg" in message


def test_a_rig_topology_cannot_read_loads_with_a_mapping_file(rigs, tmp_path, dog):
    """All four legs hang from the pelvis (as some game rigs have them): the front legs
    cannot be told from the hind ones by where they meet; a mapping file naming every joint
    makes it a rig, driven like the others."""
    from canis.runtime import Controller, ControlState, MotionModel, shipped_model_path
    from canis.runtime.retarget import RigDogs
    from canis.runtime.rig_gltf import _node_matrix

    def legs_from_pelvis(g):
        pelvis, chest = _node(g, "pelvis"), _node(g, "spine_02")
        chest_from_pelvis = _node_matrix(_node(g, "spine_01")) @ _node_matrix(chest)
        for side in ("l", "r"):
            node = _node(g, f"scapula_{side}")
            scapula = g.nodes.index(node)
            chest.children = [c for c in chest.children if c != scapula]
            pelvis.children = [*pelvis.children, scapula]
            # Where it was: its transform now from the pelvis (glTF matrices column-major).
            matrix = chest_from_pelvis @ _node_matrix(node)
            node.matrix = matrix.T.reshape(-1).tolist()
            node.translation = node.rotation = node.scale = None

    path = _edited(rigs["corgi"], tmp_path / "legs_from_pelvis.glb", legs_from_pelvis)
    _refused(path, "cannot tell its front legs from its hind legs")
    mapping = tmp_path / "mapping.json"
    mapping.write_text(json.dumps({"joints": {d: RIG_NAMES[d] for d in dog.joint_names}}))
    rig = Rig.load(path, mapping=mapping)
    assert rig.skeleton.parents[rig.skeleton.index("scapula_l")] == 0  # from the pelvis
    controller = Controller(MotionModel(shipped_model_path()))
    dogs = RigDogs(controller, rig)
    for _ in range(30):
        controller.step(dogs.control(ControlState.single((0.0, 1.0), 0.0, "move")))
        dogs.update()
    positions, _ = dogs.display_pose()
    paws = positions[0, rig.skeleton.group("paws")]
    assert np.isfinite(positions).all() and paws[:, 1].min() > -0.01


def test_rig_make_without_the_mesh_extra_names_it_before_writing(tmp_path, monkeypatch):
    """The body mesh needs fast_simplification (canis[mesh]): without it, one line naming the
    extra instead of a traceback, and no file."""
    import importlib.util

    from canis.tools.rig_make import make_rig

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "fast_simplification" else real(name, *a),
    )
    with pytest.raises(ValueError, match=r"pip install 'canis\[mesh\]'"):
        make_rig("corgi", tmp_path / "corgi.glb")
    assert not list(tmp_path.iterdir())

"""Export mjlab's own Unitree Go1 as an MJCF and a partial mjrl config, so that mjrl trains the
very robot mjlab's task `Mjlab-Velocity-Flat-Unitree-Go1` simulates (a like-for-like benchmark).

    /path/to/mjlab-venv/bin/python scripts/mjlab_go1.py --out DIR
    train Mjrl-Velocity-Flat-Quadruped --config DIR/robot.yaml

Runs in mjlab's Python environment, not mjrl's (docs/benchmarks.md, "How the scripts measure").
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import mujoco
from mjlab.asset_zoo.robots.unitree_go1.go1_constants import get_go1_robot_cfg
from mjlab.entity import Entity
from mjlab.sim import SimulationCfg
from mjlab.tasks.velocity.config.go1.env_cfgs import unitree_go1_flat_env_cfg

LEGS = ("FR", "FL", "RR", "RL")
# The fields of mjlab's MujocoCfg.apply, copied from the compiled model into <option>.
OPTION_FIELDS = (
    "timestep", "integrator", "cone", "impratio", "jacobian", "solver", "iterations", "tolerance",
    "ls_iterations", "ls_tolerance", "ccd_iterations", "gravity", "disableflags", "enableflags",
)  # fmt: skip
NCONMAX = 48  # mujoco_warp's choice for mjlab's model (docs/benchmarks.md, "How the scripts measure")
ACTION_SHARE = 0.25  # mjlab's GO1_ACTION_SCALE: 0.25 * effort_limit / stiffness per joint


def build_spec(sim: SimulationCfg) -> mujoco.MjSpec:
    """mjlab's Go1 spec with the keyframe `home` and the task's physics options."""
    spec = Entity(get_go1_robot_cfg()).spec
    assert not spec.worldbody.geoms, "mjlab's go1.xml should have no floor"
    spec.key("init_state").name = "home"  # mjlab writes INIT_STATE as this keyframe
    model = spec.compile()
    sim.mujoco.apply(model)  # mjlab sets its options on the compiled model; mjrl reads <option>
    for name in OPTION_FIELDS:
        setattr(spec.option, name, getattr(model.opt, name))
    spec.meshdir = str((Path(spec.modelfiledir) / spec.meshdir).resolve())
    return spec


def robot_section(spec: mujoco.MjSpec, mjcf: Path) -> dict:
    """The `env.robot` config: actuated joints in actuator order (mjlab groups hips and thighs
    before calves), feet and contact geoms by mjlab's names."""
    thighs = [f"{leg}_thigh_collision{i}" for leg in LEGS for i in (1, 2, 3)]
    calves = [f"{leg}_calf_collision{i}" for leg in LEGS for i in (1, 2)]
    fatal = ["trunk_collision", "head_collision", *thighs]
    robot = {
        "mjcf": str(mjcf),
        "base_body": "trunk",
        "joints": [actuator.target for actuator in spec.actuators],
        "home_keyframe": "home",
        "foot_geoms": [f"{leg}_foot_collision" for leg in LEGS],
        "fatal_contact_geoms": fatal,
        "undesired_contact_geoms": [*fatal, *calves],
        "mirror_names": [["FL", "FR"], ["RL", "RR"]],
        "action_scale_from_torque": ACTION_SHARE,
    }
    missing = [g for g in robot["foot_geoms"] + robot["undesired_contact_geoms"] if spec.geom(g) is None]
    assert not missing, f"geoms not in mjlab's Go1: {missing}"
    return robot


def config_yaml(robot: dict, sim: SimulationCfg, decimation: int) -> str:
    """robot.yaml: JSON values are YAML flow values, so no YAML library is needed."""
    lines = ["# mjlab's Unitree Go1 (Mjlab-Velocity-Flat-Unitree-Go1), written by scripts/mjlab_go1.py", "env:"]
    lines += ["  robot:", *(f"    {key}: {json.dumps(value)}" for key, value in robot.items())]
    lines += ["  sim:", f"    decimation: {decimation}", f"    timestep: {sim.mujoco.timestep}"]
    lines += ["    # mujoco_warp's default for this model, which mjlab gets (see NCONMAX in the script)"]
    lines += [f"    nconmax: {NCONMAX}", f"    njmax: {sim.njmax}  # mjlab's flat Go1 value"]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description="Export mjlab's Go1 for mjrl: an MJCF and a partial config.")
    parser.add_argument("--out", type=Path, required=True, help="folder for go1_mjlab.xml and robot.yaml")
    out = parser.parse_args().out.resolve()
    task = unitree_go1_flat_env_cfg()
    spec = build_spec(task.sim)
    out.mkdir(parents=True, exist_ok=True)
    mjcf = out / "go1_mjlab.xml"
    mjcf.write_text(spec.to_xml())
    (out / "robot.yaml").write_text(config_yaml(robot_section(spec, mjcf), task.sim, task.decimation))
    print(f"wrote {mjcf} and {out / 'robot.yaml'}")


if __name__ == "__main__":
    main()

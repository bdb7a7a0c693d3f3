"""How well does a tracking policy imitate each motion, against the baselines it must beat?

    python scripts/bench_tracking.py --run-dir RUN [--episodes 32] [--motions FILE.npz ...]

A table per motion and start (the clip's, a random frame) of the policy, zero actions and the
reference replayed open loop: episodes completed, joint, body and anchor errors, foot sliding;
then a JSON line. The method: docs/benchmarks.md, "How the scripts measure".
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

import torch

from mjrl.envs import VecEnv
from mjrl.tasks import load_task
from mjrl.tools.evaluate import ZeroActions, run_episodes
from mjrl.tools.trained import load_checkpoint_of, load_trained, trained_env_config

TASK = "Mjrl-Tracking-Flat-Humanoid"
HEADINGS = "joint err (rad) | body err (m) | anchor err (m) | foot slide (m/s)"
COLUMNS = ("completed", "joint_pos_error", "body_pos_error", "anchor_pos_error", "foot_slide", "mean_length")


class ReferenceReplay:
    """The reference frame's joint positions (the observation's first columns) as targets, open loop."""

    def __init__(self, env: VecEnv) -> None:
        self.offset, self.scale = env.action_offset, env.action_scale

    def act_deterministic(self, actor_obs: torch.Tensor) -> torch.Tensor:
        joints = self.offset.shape[0]
        return (actor_obs[:, :joints] - self.offset) / self.scale

    def reset(self, dones: torch.Tensor) -> None:
        """The reference frame comes with the observations: nothing carried."""


def evaluate(task, state, path, env_cfg, episodes: int) -> dict[str, dict]:
    """The policy's and the baselines' figures on one env config."""
    env, policy = load_trained(task, state, path, env_cfg, torch.device("cpu"))
    results = {"policy": run_episodes(env, policy, episodes, task.play_metrics).summary()}
    for name, baseline in (("zero actions", ZeroActions(env.num_actions)), ("reference replay", None)):
        env = VecEnv(env_cfg, task.build(env_cfg), torch.device("cpu"), seed=0)
        results[name] = run_episodes(env, baseline or ReferenceReplay(env), episodes, task.play_metrics).summary()
    return results


def row(name: str, start: str, s: dict) -> str:
    completed = 1.0 - s["early_termination_rate"]
    figures = [f"{completed:.0%}"] + [f"{s.get('mean_' + c, float('nan')):.3f}" for c in COLUMNS[1:5]]
    return f"| {name} | {start} | " + " | ".join(figures) + f" | {s['mean_length']:.0f} |"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", required=True)
    parser.add_argument("--episodes", type=int, default=32)
    parser.add_argument("--motions", nargs="*", default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)
    task = load_task(TASK)
    path, state = load_checkpoint_of(task, None, args.run_dir)
    trained = trained_env_config(task, state)
    figures: dict = {"checkpoint": str(path), "iteration": state["iteration"], "env_steps": state.get("env_steps")}
    for motion in args.motions or trained.motion.files:
        print(f"\n{motion} ({path.name}, {state.get('env_steps', 0) / 1e6:.1f} M env steps)")
        print(f"| policy | start | completed | {HEADINGS} | steps |")
        print("|---|---|---|---|---|---|---|---|")
        for start in ("first", "uniform"):
            motion_cfg = dataclasses.replace(trained.motion, files=(motion,), start=start)
            env_cfg = dataclasses.replace(trained, motion=motion_cfg).for_evaluation(args.episodes)
            results = evaluate(task, state, path, env_cfg, args.episodes)
            for name, summary in results.items():
                print(row(name, "clip start" if start == "first" else "random frame", summary))
            figures[f"{motion}:{start}"] = results
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())

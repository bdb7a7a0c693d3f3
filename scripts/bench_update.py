"""The PPO update alone, no simulator: its time and its arithmetic per matrix-product precision.

    python scripts/bench_update.py                                      # CPU: fp32, bf16
    python scripts/bench_update.py --device cuda --num-envs 4096        # + tf32 and a CUDA graph

A PPO learner for the flat quadruped's shapes by default (48 actor and 55 critic observations, 12
actions; `--actor-obs`, `--critic-obs`, `--actions` for another task) gets one rollout of
synthetic data (Gaussian observations, rewards and dones from a fixed seed), then runs
`--repeats` whole updates on it in each mode, every mode from the same weights and generator:
- fp32, tf32, bf16: `--policy.precision` (tf32 only on CUDA);
- graph: fp32 with the update captured once as a CUDA graph and replayed (`mjrl.runner.graphs`).

Per mode: host time per update (the Python call returning: what the host spends launching),
device time per update (CUDA events around it; on the CPU the same as the host's), and after one
update the largest difference of any parameter from fp32's and the KL's relative difference: what
a mode changes in the arithmetic. One JSON line per mode.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time

import torch

from mjrl.distributed.context import single_process
from mjrl.rl import make_algorithm
from mjrl.rl.config import AgentConfig


@dataclasses.dataclass
class SyntheticEnv:
    """The shapes a learner is built for (`mjrl.rl.algorithm.EnvInfo`), with no env behind them."""

    num_envs: int
    num_actions: int
    obs_dims: dict[str, int]
    obs_std_floors: dict[str, None] = dataclasses.field(default_factory=lambda: {"actor": None, "critic": None})
    mirrors: None = None
    mirror_problem: None = None


def learner(mode: str, env: SyntheticEnv, steps: int, device: str):
    """A PPO learner whose rollout is filled with the same synthetic data in every mode."""
    precision = "fp32" if mode == "graph" else mode
    agent = AgentConfig().replace(precision=precision, num_steps_per_env=steps)
    algorithm = make_algorithm(agent, env, steps, single_process(device), seed=0)
    data = torch.Generator().manual_seed(1)  # on the CPU, so every device gets the same numbers

    def draw(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=data).to(algorithm.ctx.device)

    for _ in range(steps):
        obs = {"actor": draw(env.num_envs, env.obs_dims["actor"]), "critic": draw(env.num_envs, env.obs_dims["critic"])}
        algorithm.act(obs)
        dones = draw(env.num_envs) > 2.0  # about 2 % of envs end at each step
        extras = {"final_obs": obs}
        algorithm.process_env_step(draw(env.num_envs), dones, torch.zeros_like(dones), extras)
    algorithm.compute_returns(obs)
    return algorithm


def timed_updates(algorithm, mode: str, repeats: int) -> tuple[float, float]:
    """(host seconds, device seconds) per update, over `repeats` updates after a warm-up one."""
    cuda = algorithm.ctx.device.type == "cuda"
    update = algorithm.update
    if mode == "graph":
        algorithm.update()  # eager first, as the runner's first iteration: whatever a first use makes, made
        graph = torch.cuda.CUDAGraph()
        graph.register_generator_state(algorithm.generator)
        torch.cuda.synchronize()
        with torch.cuda.graph(graph):
            algorithm.update()
        update = graph.replay
    update()  # warm-up: caches, allocator, the graph's first replay
    if cuda:
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
    host = 0.0
    for _ in range(repeats):
        began = time.perf_counter()
        update()
        host += time.perf_counter() - began
    if not cuda:
        return host / repeats, host / repeats
    end.record()
    torch.cuda.synchronize()
    return host / repeats, start.elapsed_time(end) / 1000 / repeats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--num-envs", type=int, default=4096)
    parser.add_argument("--steps", type=int, default=24, help="rollout length (the quadruped's)")
    parser.add_argument("--actor-obs", type=int, default=48)
    parser.add_argument("--critic-obs", type=int, default=55)
    parser.add_argument("--actions", type=int, default=12)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--modes", nargs="+", default=None, help="default: fp32 bf16 on the CPU, all four on CUDA")
    args = parser.parse_args()
    cuda = torch.device(args.device).type == "cuda"
    modes = args.modes or (["fp32", "tf32", "bf16", "graph"] if cuda else ["fp32", "bf16"])
    env = SyntheticEnv(args.num_envs, args.actions, {"actor": args.actor_obs, "critic": args.critic_obs})

    # One update from the same state in each mode: what the mode does to the arithmetic.
    after_one = {}
    for mode in modes:
        algorithm = learner(mode, env, args.steps, args.device)
        sums = algorithm.update()
        kl = float(sums["mean_kl"] / sums["steps"])
        after_one[mode] = (torch.cat([p.detach().flatten() for p in algorithm.parameters()]), kl)
    reference, reference_kl = after_one.get("fp32", next(iter(after_one.values())))
    for mode in modes:
        host, device = timed_updates(learner(mode, env, args.steps, args.device), mode, args.repeats)
        params, kl = after_one[mode]
        print(json.dumps({
            "mode": mode, "device": args.device, "num_envs": args.num_envs, "steps": args.steps,
            "host_s": round(host, 4), "device_s": round(device, 4),
            "max_param_diff": float((params - reference).abs().max()),
            "kl_rel_diff": abs(kl - reference_kl) / abs(reference_kl) if reference_kl else None,
        }), flush=True)  # fmt: skip


if __name__ == "__main__":
    main()

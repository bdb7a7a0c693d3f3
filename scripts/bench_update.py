"""The update alone, no simulator: its time and its arithmetic per matrix-product precision.

    python scripts/bench_update.py                                      # CPU: fp32, bf16
    python scripts/bench_update.py --device cuda --num-envs 4096        # + tf32 and a CUDA graph
    python scripts/bench_update.py --algo sac --num-envs 512 --steps 32 # SAC's update

A JSON line per mode (fp32, tf32, bf16, graph, compile and their pairs): host and device time per
update, and how far one update lands from fp32's. The method: docs/benchmarks.md, "How the
scripts measure".
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from types import SimpleNamespace

import torch

from mjrl.distributed.context import single_process
from mjrl.obs_spec import flat_spec
from mjrl.rl import make_algorithm
from mjrl.rl.algorithm import Transition
from mjrl.rl.config import AgentConfig, SacConfig, SymmetryConfig

PRECISIONS = ("fp32", "tf32", "bf16")
CUDA_MODES = ["fp32", "tf32", "bf16", "graph", "graph-tf32", "graph-bf16", "compile", "graph-compile"]


def task_shapes(task_name: str, num_envs: int) -> tuple[AgentConfig, SimpleNamespace]:
    """The task's agent (its PPO settings and networks), and the shapes of `num_envs` of its envs
    a learner is built for (`mjrl.rl.algorithm.EnvInfo`, no env behind them), read off one env."""
    from mjrl.envs import VecEnv
    from mjrl.tasks import load_task

    task = load_task(task_name)
    cfg = dataclasses.replace(task.env_cfg, num_envs=1)
    env = VecEnv(cfg, task.build(cfg), torch.device("cpu"), seed=0)
    dims = {"actor": env.obs_dims["actor"], "critic": env.obs_dims["critic"]}
    shapes = SimpleNamespace(num_envs=num_envs, num_actions=env.num_actions, obs_dims=dims, obs_spec=flat_spec(dims),
                             obs_std_floors=dict.fromkeys(dims), mirrors=None, mirror_problem=None)  # fmt: skip
    return task.agent_cfg, shapes


def learner(mode: str, env: SimpleNamespace, steps: int, device: str, agent: AgentConfig, sac: SacConfig | None = None):
    """A learner of `agent` (PPO's, or SAC's with `sac`) filled with the same synthetic data."""
    parts = mode.split("-")
    precision = next((part for part in parts if part in PRECISIONS), "fp32")
    # Without symmetry: the synthetic data has no mirror images (the networks are the task's).
    agent = agent.replace(precision=precision, num_steps_per_env=steps, symmetry=SymmetryConfig())
    if sac is not None:  # a SAC run's sections (`mjrl.rl.AgentSections`), with the task's networks
        agent = SimpleNamespace(algo="sac", algorithm=dataclasses.replace(sac, learning_starts=0), policy=agent.policy)
    algorithm = make_algorithm(agent, env, steps, single_process(device), seed=0)
    if "compile" in parts:
        algorithm.compile(rollout=False, update=True)  # the update's losses, as --runner.compile update
    data = torch.Generator().manual_seed(1)  # on the CPU, so every device gets the same numbers

    def draw(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=data).to(algorithm.ctx.device)

    for _ in range(steps):
        obs = {"actor": draw(env.num_envs, env.obs_dims["actor"]), "critic": draw(env.num_envs, env.obs_dims["critic"])}
        actions = algorithm.act(obs)
        dones = draw(env.num_envs) > 2.0  # about 2 % of envs end at each step
        rewards = draw(env.num_envs)
        algorithm.process_env_step(Transition(obs, actions, rewards, dones, torch.zeros_like(dones), obs, obs))
    if sac is None:
        algorithm.compute_returns(obs)
    return algorithm


def first_figure(sums: dict) -> float:
    """What one update says of its arithmetic: PPO's mean KL, SAC's critic loss, per step."""
    return float(sums["mean_kl" if "mean_kl" in sums else "critic_loss"] / sums["steps"])


def timed_updates(algorithm, mode: str, repeats: int) -> tuple[float, float]:
    """(host seconds, device seconds) per update, over `repeats` updates after a warm-up one."""
    cuda = algorithm.ctx.device.type == "cuda"
    update = algorithm.update
    if "graph" in mode.split("-"):
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
    parser.add_argument("--task", default="Mjrl-Velocity-Flat-Quadruped", help="whose networks and shapes")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--modes", nargs="+", default=None, help="default: fp32 bf16 on the CPU, all of them on CUDA")
    parser.add_argument("--algo", choices=["ppo", "sac"], default="ppo")
    parser.add_argument("--batch-size", type=int, default=SacConfig.batch_size, help="SAC's, per gradient step")
    args = parser.parse_args()
    sac = SacConfig(batch_size=args.batch_size, buffer_steps=args.steps) if args.algo == "sac" else None
    cuda = torch.device(args.device).type == "cuda"
    modes = args.modes or (CUDA_MODES if cuda else ["fp32", "bf16"])
    agent, env = task_shapes(args.task, args.num_envs)

    reference = reference_figure = None  # the first mode's parameters and figure after one update
    for mode in sorted(modes, key=lambda mode: mode != "fp32"):  # fp32 first: the others are compared with it
        try:
            algorithm = learner(mode, env, args.steps, args.device, agent, sac)
            began = time.perf_counter()
            figure = first_figure(algorithm.update())
            first_update_s = time.perf_counter() - began  # with a compile, mostly the compile
            params = torch.cat([p.detach().flatten() for p in algorithm.parameters()])
            if reference is None:  # fp32's, kept even if its timing below fails
                reference, reference_figure = params, figure
            host, device = timed_updates(learner(mode, env, args.steps, args.device, agent, sac), mode, args.repeats)
        except Exception as exc:  # a mode this machine cannot run: a compiler missing, a graph on the CPU
            print(json.dumps({"mode": mode, "device": args.device, "error": repr(exc)[:500]}), flush=True)
            continue
        print(json.dumps({
            "mode": mode, "device": args.device, "task": args.task, "num_envs": args.num_envs, "steps": args.steps,
            "actor_hidden_dims": list(agent.policy.actor_hidden_dims),
            "host_s": round(host, 4), "device_s": round(device, 4), "first_update_s": round(first_update_s, 2),
            "max_param_diff": float((params - reference).abs().max()),
            "algo": args.algo,
            **({"batch_size": sac.batch_size, "updates_per_step": sac.updates_per_step} if sac else {}),
            "figure_rel_diff": abs(figure - reference_figure) / abs(reference_figure) if reference_figure else None,
        }), flush=True)  # fmt: skip


if __name__ == "__main__":
    main()

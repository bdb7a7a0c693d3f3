"""Kernels launched per env step and per PPO minibatch step, whatever launches them, for every
task: `mjrl kernels` (`mjrl.cli.kernels`).

    mjrl kernels                          # every task, CPU, 64 envs
    mjrl kernels --tasks Mjrl-Velocity-Flat-Quadruped --top 15
    mjrl kernels --device cuda --num-envs 4096   # the profiler's counts

Outside the physics every small kernel costs the host a launch (microseconds of Python and
dispatch) and, on a GPU, the device a kernel of its own, whatever the number of envs: at
thousands of envs these, not the physics, bound the loop (docs/benchmarks.md, "Kernels per step").

CPU (no profiler needed, so it runs anywhere):
- torch: the operations that reach torch's kernels (a dispatch mode below autograd, so the
  backward's count too), less the views (`slice`, `view`, `t`, ...), which compute nothing;
- Warp: `wp.launch` calls (mjrl's own kernels, and mujoco_warp's where they are launched one by
  one) and `wp.capture_launch` replays of a captured graph, each counted as one launch; the
  physics' replay holds the substeps' kernels, given once per task as `physics_graph_kernels`.
Code compiled by `torch.compile` (`--compile`, mjrl's `--runner.compile`) escapes the first
counter (a dispatch mode even turns compiled code back to eager): there torch's profiler counts
instead, with inductor's C++ kernels recorded by name (`cpp.enable_kernel_profile`): the leaf
operations it records, less views and the operations that run no kernel, plus those kernels. On
eager code both counters are given (`launches`, `profiled_launches`): they agree.

CUDA (`--device cuda`): torch's profiler (CUPTI) sees every launch whoever makes it: the host's
launch calls (`cudaLaunchKernel`, `cuLaunchKernel`, `cudaGraphLaunch`, ...) and the kernels,
copies and fills the device ran (a graph's nodes included).

One JSON line per task and phase (`env` step alone, `env+act`: a rollout step, `minibatch`: one
PPO gradient step, the update's per-update work shared out over its steps).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
from collections.abc import Callable, Iterator

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# Operations that allocate or reshape without running a kernel.
_NO_KERNEL = {
    "aten.empty.memory_format",
    "aten.empty_strided.default",
    "aten.resize_.default",
    "aten.set_.source_Storage",
}


class TorchKernels(TorchDispatchMode):
    """Counts the operations reaching torch's kernels, views apart."""

    def __init__(self) -> None:
        super().__init__()
        self.kernels: collections.Counter[str] = collections.Counter()
        self.views = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = str(func)
        if func.is_view or name in _NO_KERNEL:
            self.views += 1
        else:
            self.kernels[name] += 1
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def warp_launches() -> Iterator[collections.Counter[str]]:
    """Counts Warp's kernel launches and graph replays made from Python while open."""
    import warp as wp
    import warp._src.context as context

    counts: collections.Counter[str] = collections.Counter()
    launch, capture_launch = context.launch, wp.capture_launch

    def counted_launch(kernel, *args, **kwargs):
        counts[f"warp:{kernel.key}"] += 1
        return launch(kernel, *args, **kwargs)

    def counted_capture_launch(graph, *args, **kwargs):
        counts["warp:graph replay"] += 1
        return capture_launch(graph, *args, **kwargs)

    # `wp.launch` is `context.launch`; launch_tiled calls the latter by its module's name.
    wp.launch = context.launch = counted_launch
    wp.capture_launch = counted_capture_launch
    try:
        yield counts
    finally:
        wp.launch = context.launch = launch
        wp.capture_launch = capture_launch


def count_cpu(fn: Callable[[], object], repeats: int) -> dict:
    with TorchKernels() as torch_counter, warp_launches() as warp_counter:
        for _ in range(repeats):
            fn()
    names = torch_counter.kernels + warp_counter
    torch_kernels, warp = sum(torch_counter.kernels.values()), sum(warp_counter.values())
    return {
        "launches": (torch_kernels + warp) / repeats,
        "torch_kernels": torch_kernels / repeats,
        "torch_views": torch_counter.views / repeats,
        "warp_launches": warp / repeats,
        "names": {k: v / repeats for k, v in names.items()},
    }


# Operations the profiler records that run no kernel of their own: views, allocations, and
# composites that return their input or a plain value.
_PROFILED_NO_KERNEL = {
    "aten::empty",
    "aten::empty_like",
    "aten::empty_strided",
    "aten::resize_",
    "aten::to",
    "aten::resolve_conj",
    "aten::resolve_neg",
    "aten::result_type",
    "aten::lift_fresh",
    "aten::item",
    "aten::_local_scalar_dense",
    "aten::is_nonzero",
}


def _is_view(name: str) -> bool:
    packet = getattr(torch.ops.aten, name.removeprefix("aten::"), None)
    overloads = [getattr(packet, o) for o in packet.overloads()] if packet is not None else []
    return any(o.is_view for o in overloads)


def count_cpu_profiled(fn: Callable[[], object], repeats: int) -> dict:
    """The CPU's kernels as torch's profiler records them, compiled code included: each aten
    operation called from outside another one (what a dispatch mode below autograd sees: its
    own calls inside are its implementation), looking inside the ones that run no kernel
    themselves (views, allocations, composites such as `to`), and inductor's C++ kernels."""
    from torch.profiler import ProfilerActivity, profile

    names: collections.Counter[str] = collections.Counter()

    def visit(event) -> None:
        if "cpp_fused" in event.name:  # one of inductor's generated kernels
            names["inductor:" + event.name.split("cpp_fused_", 1)[1][:40]] += 1
        elif event.name.startswith("aten::") and event.name not in _PROFILED_NO_KERNEL and not _is_view(event.name):
            names[event.name.replace("::", ".")] += 1
        else:  # a scope (a compiled region, an autograd node) or an operation with no kernel
            for child in event.cpu_children:
                visit(child)

    with warp_launches() as warp_counter, profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(repeats):
            fn()
    for event in prof.events():
        if event.cpu_parent is None:
            visit(event)
    torch_kernels, warp = sum(names.values()), sum(warp_counter.values())
    names += warp_counter
    return {
        "launches": (torch_kernels + warp) / repeats,
        "torch_kernels": torch_kernels / repeats,
        "warp_launches": warp / repeats,
        "names": {k: v / repeats for k, v in names.items()},
    }


# The host's launch calls, as the profiler names them (runtime and driver API).
_LAUNCH_CALLS = (
    "cudaLaunchKernel",
    "cuLaunchKernel",
    "cudaLaunchKernelExC",
    "cuLaunchKernelEx",
    "cudaGraphLaunch",
    "cuGraphLaunch",
)


def count_cuda(fn: Callable[[], object], repeats: int, device: torch.device) -> dict:
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize(device)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(repeats):
            fn()
        torch.cuda.synchronize(device)
    launches: collections.Counter[str] = collections.Counter()
    device_ops: collections.Counter[str] = collections.Counter()
    for event in prof.events():
        if event.device_type == DeviceType.CUDA:
            device_ops[event.name] += 1
        elif event.name.startswith(_LAUNCH_CALLS):
            launches[event.name] += 1
    return {
        "launches": sum(launches.values()) / repeats,
        "launch_calls": {k: v / repeats for k, v in launches.items()},
        "device_ops": sum(device_ops.values()) / repeats,
        "names": {k: v / repeats for k, v in device_ops.items()},
    }


def physics_graph_kernels(env) -> int:
    """Kernels in one replay of the physics' graph: the substeps launched one by one, counted."""
    sim = env.sim
    with warp_launches() as counts, sim._scope():
        sim._substeps()
    return sum(counts.values())


def measure(task_name: str, num_envs: int, device: str, steps: int, top: int, compile_: str = "off") -> list[dict]:
    """The kernels of `task_name`'s env step, rollout step and PPO minibatch step, as JSON lines."""
    from mjrl.distributed.context import single_process
    from mjrl.envs import VecEnv
    from mjrl.rl import make_algorithm
    from mjrl.rl.algorithm import compile_loop, rollout_step
    from mjrl.tasks import load_task

    task = load_task(task_name)
    env_cfg = dataclasses.replace(task.env_cfg, num_envs=num_envs)
    agent = task.agent_cfg  # the task's PPO, as `train` builds it
    ctx = single_process(device)
    env = VecEnv(env_cfg, task.build(env_cfg), ctx.device, seed=0)
    rollout = agent.runner.num_steps_per_env
    algorithm = make_algorithm(agent, env, rollout, ctx, seed=0)
    if compile_ != "off":
        # Not `import torch._dynamo`: that would make `torch` a name local to this function,
        # unbound where the import does not run (the default, --compile off: a NameError).
        from torch import _dynamo

        _dynamo.reset()  # each task compiles afresh: one process per task in training
    compile_loop(compile_, env, algorithm)
    count = _counter(ctx.device, compile_)

    def env_step() -> None:
        env.step(torch.rand(env.num_envs, env.num_actions, device=ctx.device) * 2 - 1)

    def env_and_act() -> None:
        env.step(algorithm.act(env.obs))  # act stores into the rollout's current step; nothing advances

    for _ in range(3):  # first calls build caches and compile kernels
        env_and_act()
    results = {"env": count(env_step, steps), "env+act": count(env_and_act, steps)}

    # A real rollout, then one whole update, shared out over its gradient steps.
    obs = env.obs
    for _ in range(rollout):
        obs = rollout_step(env, algorithm, obs)
    algorithm.compute_returns(obs)
    minibatch_steps = agent.algorithm.num_learning_epochs * agent.algorithm.num_mini_batches
    if compile_ != "off":  # compile the update's graphs before counting it
        algorithm.update()
        for _ in range(rollout):
            obs = rollout_step(env, algorithm, obs)
        algorithm.compute_returns(obs)
    results["minibatch"] = count(algorithm.update, 1)
    results["minibatch"] = {
        k: ({n: c / minibatch_steps for n, c in v.items()} if isinstance(v, dict) else v / minibatch_steps)
        for k, v in results["minibatch"].items()
    }
    graph_kernels = physics_graph_kernels(env) if env.sim.replays_graph and ctx.device.type == "cpu" else None
    head = {"task": task_name, "device": str(ctx.device), "num_envs": num_envs, "compile": compile_}
    return _lines(head, results, graph_kernels, top)


def _counter(device: torch.device, compile_: str) -> Callable[[Callable[[], object], int], dict]:
    """How to count: the profiler on a GPU and for compiled code; on eager CPU code both the
    dispatch counter and the profiler's count (`profiled_launches`), which agree."""
    if device.type == "cuda":
        return functools.partial(count_cuda, device=device)
    if compile_ != "off":
        return count_cpu_profiled

    def count(fn: Callable[[], object], repeats: int) -> dict:
        return count_cpu(fn, repeats) | {"profiled_launches": count_cpu_profiled(fn, repeats)["launches"]}

    return count


def _lines(head: dict, results: dict[str, dict], graph_kernels: int | None, top: int) -> list[dict]:
    """One JSON line per phase: `head`, the phase's figures rounded, its `top` kernels."""
    lines = []
    for phase, figures in results.items():
        names = figures.pop("names")
        if isinstance(figures.get("launch_calls"), dict):
            figures["launch_calls"] = {k: round(v, 1) for k, v in figures["launch_calls"].items()}
        line = {**head, "phase": phase}
        line |= {k: round(v, 1) if isinstance(v, float) else v for k, v in figures.items()}
        if phase != "minibatch" and graph_kernels is not None:
            line["physics_graph_kernels"] = graph_kernels
        if top:
            line["top"] = {k: round(v, 2) for k, v in collections.Counter(names).most_common(top)}
        lines.append(line)
    return lines

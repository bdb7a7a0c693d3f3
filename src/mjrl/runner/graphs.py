"""The training loop as graphs: the rollout and the update captured once, then replayed.

On a GPU the loop is bound by the host's kernel launches (docs/benchmarks.md, "On a GPU"). With
`--runner.cuda-graphs`, the runner captures its rollout (the policy, every env step with its
physics launched inline, the buffer writes) and its update each as one CUDA graph at the
second iteration of a session, and replays them after. What lets a replay stand for the code:
everything the loop carries between iterations is a tensor written in place, and nothing in it
reads the device on the host (`tests/test_host_sync.py`); `tests/test_capture.py` replays this
same segmenting code with a CPU emulation of capture and replay, bit for bit against the eager
loop. An iteration that needs Python inside the rollout (a video being recorded, a fault being
injected, a stop requested) runs eagerly; the graphs stay valid.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, Protocol

import torch

from mjrl.distributed import DistContext
from mjrl.envs import VecEnv
from mjrl.errors import UsageError
from mjrl.sim import gc_suspended

Setting = Literal["auto", "on", "off"]


class Graph(Protocol):
    def capture(self, fn: Callable[[], Any]) -> Any:
        """Record `fn()`, leave the state as one run of it would, and return its result (whose
        tensors each replay rewrites)."""
        ...

    def replay(self) -> None: ...


def why_not_graphs(device: torch.device, physics_graphs: bool, deterministic: bool) -> str | None:
    """Why the loop cannot be captured here, or None."""
    if device.type != "cuda":
        return "the loop runs on the CPU"
    if not physics_graphs:
        return "this GPU cannot capture mujoco_warp's step (memory pools and conditional graph nodes)"
    if deterministic:
        # H100, 2026-11-27: the rollout's capture was invalidated with it on, and succeeded without.
        return "mujoco_warp's deterministic mode (--env.sim.deterministic) failed to capture on a GPU"
    return None


CAPTURED = "cuda graphs: on (the rollout and the update are captured at their first run, then replayed)"
PROVEN = "proven bit for bit on the CPU emulator only: NCCL inside a graph awaits a GPU (gpu_checks.sh collectives)"
"""How far captured collectives are proven. Say more once a GPU window has run them."""
SEVERAL_RANKS = f"several ranks: captured collectives are {PROVEN}; --runner.cuda-graphs on captures them"
CAPTURED_WITH_RANKS = f"{CAPTURED}; with several ranks, their collectives inside, {PROVEN}"


def choose_graphs(setting: Setting, why_not: str | None, several_ranks: bool = False) -> tuple[bool, str | None]:
    """(capture the loop, the line that says so: printed unless the graphs are off by choice).
    With several ranks, `auto` stays eager and `on` captures, saying how far that is proven."""
    if setting == "off":
        return False, None
    if why_not is not None and setting == "on":
        raise UsageError(f"--runner.cuda-graphs on: {why_not}; use auto or off")
    if why_not is not None:
        return False, f"cuda graphs: off ({why_not})"
    if several_ranks:
        return (True, CAPTURED_WITH_RANKS) if setting == "on" else (False, f"cuda graphs: off ({SEVERAL_RANKS})")
    return True, CAPTURED


class CudaGraph:
    """A torch CUDA graph with the simulation's Warp launches inside (Warp joins torch's
    capture, so mujoco_warp's solver loop becomes a conditional node of the same graph), the
    env's and the algorithm's generators registered: each replay draws new numbers."""

    def __init__(self, sim: Any, generators: list[torch.Generator], pool: Any) -> None:
        self.sim = sim
        self.generators = generators
        self.pool = pool
        self.graph = torch.cuda.CUDAGraph()

    def capture(self, fn: Callable[[], Any]) -> Any:
        import warp as wp

        for generator in self.generators:
            self.graph.register_generator_state(generator)
        # On the rank's GPU, whichever is current: torch.cuda.graph captures on the current one.
        with torch.cuda.device(self.sim.device), gc_suspended(), torch.cuda.graph(self.graph, pool=self.pool):
            stream, mode = self.sim.warp_stream(), wp.CaptureMode.GLOBAL  # torch captures in its global mode
            with wp.ScopedCapture(device=self.sim.wp_device, stream=stream, external=True, capture_mode=mode):
                result = fn()
        self.replay()  # a capture runs nothing
        return result

    def replay(self) -> None:
        with torch.cuda.device(self.sim.device):
            self.graph.replay()


class LoopGraphs:
    """The loop's segments by name, each captured at its first `run` that may be captured and
    replayed at the next ones. A capture records the segment's collectives with it (`ctx`'s
    `capturing`): the update's gradient all-reduce is inside its graph, on every rank alike."""

    def __init__(self, make_graph: Callable[[], Graph], ctx: DistContext) -> None:
        self.make_graph = make_graph
        self.ctx = ctx
        self._graphs: dict[str, Graph] = {}
        self._results: dict[str, Any] = {}
        self.replays = 0
        """Segments replayed so far."""

    def run(self, name: str, fn: Callable[[], Any], eager: bool) -> Any:
        """`fn()`, eagerly (`eager`), captured, or replayed; its result."""
        if eager:
            return fn()
        if name not in self._graphs:
            graph = self.make_graph()
            with self.ctx.capturing():
                self._results[name] = graph.capture(fn)
            self._graphs[name] = graph
        else:
            self._graphs[name].replay()
            self.replays += 1
        return self._results[name]


def loop_graphs(
    setting: Setting, ctx: DistContext, env: VecEnv, generators: list[torch.Generator]
) -> LoopGraphs | None:
    """The loop's graphs for `--runner.cuda-graphs`, or None (eager). Every rank decides alike
    (with several ranks, `auto` is eager), and warms its collectives up before any capture."""
    why_not = why_not_graphs(ctx.device, env.sim.replays_graph, env.sim.cfg.deterministic)
    use, line = choose_graphs(setting, why_not, ctx.is_distributed)
    if line and ctx.is_main:
        print(line, flush=True)
    if not use:
        return None
    env.sim.launch_inline()  # the physics joins the loop's graphs
    ctx.warm_up_collectives()
    pool = torch.cuda.graph_pool_handle()  # one memory pool for the rollout's and the update's
    return LoopGraphs(lambda: CudaGraph(env.sim, generators, pool), ctx)

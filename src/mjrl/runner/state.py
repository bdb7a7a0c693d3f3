"""Where a run stands: its counters (`TrainingState`), its random streams (`RngStates`), what a
checkpoint holds of it (`checkpoint_contents`; the format: `mjrl.checkpoint`, older ones read
as it through `mjrl.compat`) and the lockstep of the ranks. `mjrl.runner.resume` takes it back."""

from __future__ import annotations

import dataclasses
import hashlib
import random
import uuid
from typing import Any

import numpy as np
import torch

from mjrl.checkpoint import FORMAT
from mjrl.distributed import DistContext
from mjrl.distributed.packing import NamedPack
from mjrl.envs import VecEnv
from mjrl.rl import Algorithm


@dataclasses.dataclass
class TrainingState:
    """The counters of a run, which go on across resumes."""

    iteration: int = 0
    """Iterations completed."""
    env_steps: int = 0
    """Env steps taken on all ranks (the normalisers' warm-up included)."""
    wall_s: float = 0.0
    """Collection and learning time of the slowest rank, summed over the iterations."""
    tracker_id: str = dataclasses.field(default_factory=lambda: uuid.uuid4().hex[:12])
    """The experiment tracker's run id (WandB), kept so that a resume continues the same run."""


@dataclasses.dataclass(frozen=True)
class RngStates:
    """Every random stream of a rank: the env's (resets, observation noise), the algorithm's
    (action noise, minibatch order), torch's global one and, on a GPU, CUDA's. Training draws
    nothing from the global ones; they are kept so that code a task adds which does, does so
    reproducibly."""

    torch: torch.Tensor
    """`torch.get_rng_state()`."""
    env: dict[str, Any]
    """The env's generator (`generator_state`)."""
    algorithm: dict[str, Any]
    """The algorithm's generator (`generator_state`)."""
    cuda: torch.Tensor | None = None
    """`torch.cuda.get_rng_state(device)` on a GPU, else None."""

    @classmethod
    def capture(cls, env: VecEnv, algorithm: Algorithm) -> RngStates:
        cuda = torch.cuda.get_rng_state(env.device) if env.device.type == "cuda" else None
        return cls(torch.get_rng_state(), generator_state(env.generator), generator_state(algorithm.generator), cuda)

    def restore(self, env: VecEnv, algorithm: Algorithm) -> None:
        torch.set_rng_state(self.torch)
        set_generator_state(env.generator, self.env)
        set_generator_state(algorithm.generator, self.algorithm)
        if self.cuda is not None and env.device.type == "cuda":
            torch.cuda.set_rng_state(self.cuda, env.device)

    def to_dict(self) -> dict[str, Any]:
        out = {"torch": self.torch, "env": self.env, "algorithm": self.algorithm}
        return out if self.cuda is None else {**out, "cuda": self.cuda}

    @classmethod
    def from_dict(cls, saved: dict[str, Any]) -> RngStates:
        return cls(saved["torch"], saved["env"], saved["algorithm"], saved.get("cuda"))


def checkpoint_contents(
    task_name: str,
    config: dict[str, Any],
    state: TrainingState,
    env: VecEnv,
    algorithm: Algorithm,
    env_states: list[dict[str, torch.Tensor]],
) -> dict[str, Any]:
    """What a checkpoint holds: the run's counters, random streams, the algorithm's state (for
    PPO: weights, optimizer, learning rate), the config it was trained with (`config`, as
    `to_dict` makes it) and every rank's env state (`gather_env_states`)."""
    checkpoint = {
        "format": FORMAT,
        "task": task_name,
        "iteration": state.iteration,
        "env_steps": state.env_steps,
        "wall_s": state.wall_s,
        **algorithm.state_dict(),
        "rng": RngStates.capture(env, algorithm).to_dict(),
        "config": config,
        "wandb_id": state.tracker_id,
        "obs_dims": dict(env.obs_dims),
        "num_actions": env.num_actions,
    }
    checkpoint["env_ranks"] = env_states
    return checkpoint


def gather_env_states(ctx: DistContext, env: VecEnv) -> list[dict[str, torch.Tensor]]:
    """On rank 0, every rank's `env.resume_state()` (its terrain rows and episode window), by
    rank; elsewhere []. A collective: every rank calls it at the same point."""
    mine = env.resume_state()
    if not ctx.issues_collectives:
        return [mine]
    gathered = {name: ctx.all_gather(value) for name, value in mine.items()}
    if not ctx.is_main:
        return []
    return [{name: value[rank].cpu() for name, value in gathered.items()} for rank in range(ctx.world_size)]


def seed_everything(seed: int) -> None:
    """Python's, NumPy's and torch's global random streams, from one seed."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def sync_from_main(ctx: DistContext, algorithm: Algorithm, state: TrainingState) -> TrainingState:
    """Put every rank in lockstep with rank 0: the algorithm's learning state, then the
    counters in one broadcast."""
    if not ctx.issues_collectives:
        return state
    algorithm.broadcast_from_main()
    pack = NamedPack(torch.float64, ctx.device)
    pack.add("iteration", state.iteration).add("env_steps", state.env_steps).add("wall_s", state.wall_s)
    main = {name: value.item() for name, value in pack.broadcast(ctx).items()}
    return dataclasses.replace(
        state, iteration=int(main["iteration"]), env_steps=int(main["env_steps"]), wall_s=main["wall_s"]
    )


def generator_state(generator: torch.Generator) -> dict[str, Any]:
    """A generator's state for a checkpoint, tagged with the kind of device it belongs to."""
    return {"device": generator.device.type, "state": generator.get_state()}


def set_generator_state(generator: torch.Generator, saved: dict[str, Any]) -> None:
    """Continue the saved random stream on the same kind of device. A stream cannot move to
    another kind (CUDA's Philox state is 16 bytes, the CPU's Mersenne Twister 5056, and they
    draw different numbers from one seed), so there the generator is seeded from the saved
    state instead: a GPU run continues on a laptop, and the reverse, deterministically."""
    if saved["device"] == generator.device.type:
        generator.set_state(saved["state"])
        return
    digest = hashlib.sha256(saved["state"].cpu().numpy().tobytes()).digest()
    generator.manual_seed(int.from_bytes(digest[:8], "little") >> 1)

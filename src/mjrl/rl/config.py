"""The agent's settings, in rsl_rl's three sections: the training loop (`--runner.*`), the
algorithm (`--algorithm.*`) and its policy (`--policy.*`)."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Literal


@dataclasses.dataclass(frozen=True)
class RunnerConfig:
    """The training loop: rollout length, iterations, checkpoints, evaluation."""

    max_iterations: int = 300
    """Total iterations of the run; a resumed or restarted run stops at the same total."""
    num_steps_per_env: int = 24
    """Env steps collected per env and iteration (the rollout length)."""
    save_interval: int = 50
    """Write a checkpoint every this many iterations (and always at the end)."""
    save_interval_s: float = 0.0
    """Also write one once this many seconds of training (the logged `wall_s`: collection and
    learning) have passed since the last; 0: by iterations only. 60 checkpoints a fast GPU run
    every minute, whatever its iteration time."""
    save_bulk_state: bool = True
    """With each checkpoint, also write the algorithm's bulky state (an off-policy learner's
    replay buffer) into `checkpoints/bulk_<iteration>.pt`, keeping only the newest; a resume
    reads the one of its checkpoint when it is there. False: none is written, so a resume from
    a later checkpoint starts that state empty. PPO has none."""
    eval_interval: int = 0
    """Every this many iterations (and at the end), rank 0 runs the deterministic policy (the
    Gaussian's mean) for one whole episode on each of `eval_envs` separate envs with clean
    observations, and logs `eval/<figure>`: return, length, early-termination rate and the task's
    own figures (tracking errors, foot contact and swing time). 0: never."""
    eval_envs: int = 16
    """Envs (one episode each) of the periodic evaluation."""
    replica_check_interval: int = 10
    """Every this many iterations, compare a checksum of the parameters across ranks and stop
    on a difference (0: never)."""
    cuda_graphs: Literal["auto", "on", "off"] = "off"
    """Capture the rollout and the update each as one CUDA graph at a session's second
    iteration and replay them after (`mjrl.runner.graphs`): one process on a GPU that captures
    mujoco_warp's step. auto: where possible, else eager with one line saying why; on: refuse
    to run without; off (the default until measured on a GPU): eager."""

    compile: Literal["off", "step", "update", "all"] = "off"
    """Fuse the loop's small tensor operations with `torch.compile` (at the first iteration):
    step: the env step's terms (terminations, rewards, observations and their bookkeeping, some
    150-400 kernels) into a few kernels; update: the policy's losses, forward and backward; all:
    both. It costs seconds to tens of seconds at the start (cached after in the user's cache
    directory) and about 300 MB of memory; results match eager within float rounding
    (docs/benchmarks.md, "Kernels per step"). off: eager, the reference."""

    bounds: ClassVar[dict] = {
        "max_iterations": ">= 1",
        "num_steps_per_env": ">= 1",
        "save_interval": ">= 1",
        "save_interval_s": ">= 0",
        "eval_interval": ">= 0",
        "eval_envs": ">= 1",
        "replica_check_interval": ">= 0",
    }
    """Ranges of the numeric fields (see `mjrl.config.check_numbers`)."""


@dataclasses.dataclass(frozen=True)
class PolicyConfig:
    """The policy: its kind, networks, action noise and observation normalisation."""

    kind: str = "auto"
    """The policy kind (`mjrl.rl.policies`): auto, the algorithm's own (mlp for PPO and
    distillation, squashed for SAC); mlp, a Gaussian MLP actor with an MLP value critic;
    squashed, a tanh-squashed Gaussian MLP actor whose std depends on the state (SAC's); a plugin
    registers more (`--plugins MODULE`). The settings below are theirs."""
    actor_hidden_dims: tuple[int, ...] = (256, 128, 64)
    """Hidden layer sizes of the actor MLP."""
    critic_hidden_dims: tuple[int, ...] = (256, 128, 64)
    """Hidden layer sizes of the critic MLP."""
    activation: Literal["elu", "relu", "tanh", "silu"] = "elu"
    """Activation between hidden layers."""
    init_noise_std: float = 1.0
    """Initial std of the Gaussian policy (a learnable, state-independent parameter)."""
    noise_std_type: Literal["log", "scalar"] = "log"
    """What the optimiser moves: the log of the std, or the std itself (rsl_rl's default). Adam
    steps by about the learning rate either way, so with "scalar" a small std shrinks faster."""
    normalize_observations: bool = True
    """Normalise observations with running float64 mean and variance."""
    obs_std_offset: float = 0.0
    """Added to each observation feature's std before dividing by it. With 0, a feature with
    almost no spread (a balanced pole's angle, an input that is mostly noise) is scaled up to
    unit variance; rsl_rl adds 0.01, which Balance learns better with (docs/benchmarks.md)."""
    precision: Literal["fp32", "tf32", "bf16"] = "fp32"
    """Arithmetic of the networks' matrix products while training (the rollout's `act` and the
    update's forward and backward passes); parameters, optimiser, normalisers and losses stay
    float32 and the networks' outputs are float32 either way. fp32: exact float32. tf32: float32
    products in TensorFloat-32 on CUDA (10-bit mantissa, Ampere and later); the same as fp32 on
    the CPU. bf16: products autocast to bfloat16 (on CUDA, and on CPUs with AVX-512 BF16 or
    AMX). `play`, `export` and evaluation run float32 whatever this says."""
    rnn_type: Literal["none", "lstm", "gru"] = "none"
    """A recurrent memory (`mjrl.rl.recurrent`) ahead of the MLPs: lstm or gru makes the policy
    the `recurrent` kind (PPO and distillation), whose state is carried per env between steps
    and zeroed where an episode ends. none: the MLPs read the observations."""
    rnn_networks: Literal["actor", "critic", "both"] = "both"
    """Which networks read through a memory of their own (the other reads the observations)."""
    rnn_hidden_size: int = 256
    """Width of the memory's state, per layer."""
    rnn_num_layers: int = 1
    """Stacked recurrent layers."""
    rnn_sequence_length: int = 24
    """Truncated backpropagation: the update cuts each env's rollout into windows of this many
    steps (the last padded and masked), minibatches of whole windows; longer than the rollout
    is the whole rollout."""
    rnn_burn_in: int = 0
    """Steps before each window that run through the memory without loss, to bring the state
    stored at their start up to date with the current weights (R2D2's burn-in)."""

    bounds: ClassVar[dict] = {
        "actor_hidden_dims": ">= 1",
        "critic_hidden_dims": ">= 1",
        "init_noise_std": "> 0",
        "obs_std_offset": ">= 0",
        "rnn_hidden_size": ">= 1",
        "rnn_num_layers": ">= 1",
        "rnn_sequence_length": ">= 1",
        "rnn_burn_in": ">= 0",
    }
    """Ranges of the numeric fields (see `mjrl.config.check_numbers`)."""


@dataclasses.dataclass(frozen=True)
class SymmetryConfig:
    """Left-right symmetry, as rsl_rl offers it, for tasks that declare how their observations
    and actions mirror (the legged tasks do)."""

    augment: bool = False
    """Train on every minibatch and its mirror image: mirrored observations and actions, with the
    original's advantage, return and old log-probability."""
    mirror_loss_coef: float = 0.0
    """Weight of the mirror loss: the squared distance between the policy's mean action on the
    mirrored observations and the mirror image of its mean action on the originals (0: off)."""

    bounds: ClassVar[dict] = {"mirror_loss_coef": ">= 0"}

    @property
    def enabled(self) -> bool:
        return self.augment or self.mirror_loss_coef > 0


@dataclasses.dataclass(frozen=True)
class PpoConfig:
    """PPO's update, its learning-rate schedule and how ranks stay in step."""

    warm_up_normalizers: bool = False
    """Start the observation normalisers from one rollout of the untrained policy (its env
    steps count) instead of from the first observations. For tasks that reset every robot to one
    pose: the quadruped's iteration-0 KL fell from 23x the later median to 3x. Off by default
    (Swingup learns better without it); on for Balance and the quadruped, whose actors move
    at full speed from the first update (`clip_networks_separately`)."""
    learning_rate: float = 1e-3
    """Initial Adam learning rate."""
    schedule: Literal["adaptive", "fixed"] = "adaptive"
    """adaptive: scale the learning rate so the policy KL per update stays near desired_kl."""
    desired_kl: float = 0.01
    """Target KL divergence per minibatch for the adaptive schedule."""
    num_learning_epochs: int = 5
    """Passes over the rollout per iteration."""
    num_mini_batches: int = 4
    """Minibatches per epoch; must divide num_envs * num_steps_per_env."""
    clip_param: float = 0.2
    """PPO ratio clip."""
    value_clip_param: float = 0.2
    """Clip of the value prediction change (clipped value loss); 0 turns value clipping off."""
    value_loss_coef: float = 1.0
    """Weight of the value loss."""
    entropy_coef: float = 0.005
    """Weight of the entropy bonus."""
    gamma: float = 0.99
    """Discount factor."""
    lam: float = 0.95
    """GAE lambda."""
    max_grad_norm: float = 1.0
    """Clip of the gradient norm (see `clip_networks_separately`)."""
    clip_networks_separately: bool = True
    """Clip the actor's (with its log-std) and the critic's gradient norms separately, as rsl_rl
    does, instead of their global norm. Separately, a large value-loss gradient cannot shrink
    the policy's step: over 5 seeds Swingup reached a mean of 862 against 678 with the global
    clip; Balance learned it best together with `warm_up_normalizers` (docs/benchmarks.md)."""
    normalize_advantages: bool = True
    """Normalise advantages with the mean and std of the whole rollout (of every rank)."""
    sync: Literal["gradients", "rollout"] = "gradients"
    """gradients: average gradients over ranks with one all-reduce per minibatch step.
    rollout: each rank runs its epochs on its own data, then the parameter change (and Adam's
    moments) of the whole update is averaged with one all-reduce per iteration, and the
    adaptive learning rate moves once per iteration from the rank-averaged KL."""
    symmetry: SymmetryConfig = SymmetryConfig()
    """Symmetry augmentation and the mirror loss (off by default)."""

    bounds: ClassVar[dict] = {
        "learning_rate": "> 0",
        "desired_kl": "> 0",
        "num_learning_epochs": ">= 1",
        "num_mini_batches": ">= 1",
        "clip_param": "> 0",
        "value_clip_param": ">= 0",
        "value_loss_coef": ">= 0",
        "entropy_coef": ">= 0",
        "gamma": "(0, 1]",
        "lam": "[0, 1]",
        "max_grad_norm": "> 0",
    }
    """Ranges of the numeric fields (see `mjrl.config.check_numbers`)."""


@dataclasses.dataclass(frozen=True)
class DistillationConfig:
    """Teacher-student distillation (DAgger, rsl_rl's `Distillation`), `--algo distillation`
    with these settings as `--algorithm.*`: the policy learns to imitate a trained teacher's
    actions in the states its own actions reach. The task must have a "teacher" observation
    group, the actor observations the teacher was trained with."""

    teacher: str = ""
    """Run directory (its newest checkpoint) or checkpoint file of the teacher (required)."""
    learning_rate: float = 1e-3
    """Adam's learning rate (fixed)."""
    num_learning_epochs: int = 2
    """Passes over each rollout."""
    num_mini_batches: int = 4
    """Minibatches per pass."""
    max_grad_norm: float = 1.0
    """Clip of the gradient norm."""
    warm_up_normalizers: bool = True
    """Start the student's observation normaliser from one rollout of the untrained student
    (as `PpoConfig.warm_up_normalizers`; before it had a setting of its own, distillation
    followed PPO's, which the student task turns on)."""

    bounds: ClassVar[dict] = {
        "learning_rate": "> 0",
        "num_learning_epochs": ">= 1",
        "num_mini_batches": ">= 1",
        "max_grad_norm": "> 0",
    }


@dataclasses.dataclass(frozen=True)
class SacConfig:
    """Soft actor-critic for massively parallel envs (`--algo sac`, FastSAC/FastTD3's family):
    a tanh-squashed Gaussian actor, twin distributional (C51) critics with clipped double Q and
    target networks, n-step returns, a tuned entropy temperature, learning from a replay ring
    of every env's transitions on the env's device after every `update_every` env steps."""

    learning_rate: float = 3e-4
    """Adam's learning rate for the actor, the critics and the temperature."""
    gamma: float = 0.99
    """Discount factor."""
    n_step: int = 3
    """Steps of the returns the critics learn from (rewards summed over up to n steps, cut at
    an episode's end; a time-out bootstraps from its final observation, a termination not)."""
    tau: float = 0.1
    """Target networks move this share of the way to the critics after each gradient step."""
    batch_size: int = 4096
    """Transitions per gradient step, per rank."""
    buffer_steps: int = 1024
    """Env steps kept per env in the replay ring (the ring holds buffer_steps x num_envs
    transitions per rank, on the env's device; the oldest are overwritten)."""
    update_every: int = 1
    """Env steps between updates (a divisor of `--runner.num-steps-per-env`)."""
    updates_per_step: int = 2
    """Gradient steps per update: with `update_every`, the update-to-data ratio
    (updates_per_step x batch_size / (update_every x num_envs) samples per transition)."""
    learning_starts: int = 8
    """Env steps per env in the ring before the first gradient step."""
    num_atoms: int = 101
    """Atoms of each critic's return distribution (C51)."""
    v_max: float = 0.0
    """The support of the return distributions, [-v_max, v_max]. 0: from the rewards seen by the
    first update and gamma: the largest |reward| of a step that ended its episode plus the largest
    of any other step over (1 - gamma), times `support_margin`. The share of target returns
    clipped to it is logged (`clipped_returns`)."""
    support_margin: float = 1.0
    """Headroom of the automatic support over the first rewards' scale."""
    init_temperature: float = 0.1
    """Initial entropy temperature (alpha), then tuned to keep the policy's entropy at its target."""
    target_entropy: float = -1.0
    """Target entropy per action dimension (the tuned temperature keeps the policy's there)."""
    critic_layer_norm: bool = False
    """A LayerNorm after each hidden layer of the critics (`critics.layer_normed`)."""
    clipped_double_q: bool = True
    """Learn from the pessimistic critic: the target's distribution and the actor's return are
    those of the critic expecting less (clipped double Q, as TD3's and SAC's papers). False: the
    two critics' mean (their distributions' mixture), FastTD3's option where the pessimism
    holds exploration back."""
    action_bound: float = 1.0
    """Actions are squashed into (-action_bound, action_bound), in the env's action units
    (the env then applies offset + scale x action); stated in an export's sidecar."""
    max_grad_norm: float = 0.0
    """Clip of each network's gradient norm; 0: none."""
    warm_up_normalizers: bool = True
    """Start the observation normalisers from one rollout of the untrained policy (its env
    steps count, and fill the ring), as `PpoConfig.warm_up_normalizers`."""
    symmetry: SymmetryConfig = SymmetryConfig()
    """Left-right symmetry, for tasks that mirror: with `augment`, every sampled window is
    followed by its mirror image (observations, next observations and actions mirrored, the same
    returns), doubling each gradient step's batch; with `mirror_loss_coef`, the actor's mean on
    mirrored observations is pulled to the mirror image of its mean on the originals."""

    bounds: ClassVar[dict] = {
        "learning_rate": "> 0",
        "gamma": "(0, 1)",
        "n_step": ">= 1",
        "tau": "(0, 1]",
        "batch_size": ">= 1",
        "buffer_steps": ">= 1",
        "update_every": ">= 1",
        "updates_per_step": ">= 1",
        "learning_starts": ">= 0",
        "num_atoms": ">= 2",
        "v_max": ">= 0",
        "support_margin": "> 0",
        "init_temperature": "> 0",
        "action_bound": "> 0",
        "max_grad_norm": ">= 0",
    }


def saved_policy_config(saved: dict[str, Any], default: PolicyConfig) -> PolicyConfig:
    """The policy config of a run from its saved config (`config` in a checkpoint). Runs before
    issue 23 kept it in one `agent` section with the loop's and PPO's settings; runs from before
    `obs_std_offset` existed were normalised without an offset."""
    from mjrl.config import apply_dict

    if "agent" in saved:
        old = {"obs_std_offset": 0.0, **saved["agent"]}
        names = {field.name for field in dataclasses.fields(default)}
        return apply_dict(default, {k: v for k, v in old.items() if k in names}, "agent.")
    return apply_dict(default, saved.get("policy", {}), "policy.")


@dataclasses.dataclass(frozen=True)
class AgentConfig:
    """A task's default agent: the loop, the algorithm and its policy (`Task.agent_cfg`)."""

    runner: RunnerConfig = RunnerConfig()
    """The training loop's settings."""
    algorithm: PpoConfig = PpoConfig()
    """The algorithm's settings."""
    policy: PolicyConfig = PolicyConfig()
    """The policy's settings."""

    def replace(self, **changes: Any) -> AgentConfig:
        """This config with fields changed by name, whichever section holds them."""
        sections = {}
        for section in ("runner", "algorithm", "policy"):
            current = getattr(self, section)
            mine = {k: changes.pop(k) for k in list(changes) if k in {f.name for f in dataclasses.fields(current)}}
            sections[section] = dataclasses.replace(current, **mine)
        if changes:
            raise TypeError(f"no agent setting named {', '.join(changes)}")
        return AgentConfig(**sections)

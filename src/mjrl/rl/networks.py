"""The policies' networks: actor-critic MLPs with a Gaussian policy whose std is a learnable,
state-independent parameter (PPO's, distillation's), and a tanh-squashed Gaussian actor whose
std depends on the state (SAC's)."""

from __future__ import annotations

import contextlib
import copy
import math
from collections.abc import Collection, Iterator, Mapping

import torch
from torch import nn

from mjrl.rl.config import PolicyConfig
from mjrl.rl.normalizer import RunningNormalizer

ACTIVATIONS = {"elu": nn.ELU, "relu": nn.ReLU, "tanh": nn.Tanh, "silu": nn.SiLU}


@contextlib.contextmanager
def _tf32_matmuls() -> Iterator[None]:
    before = torch.backends.cuda.matmul.fp32_precision
    torch.backends.cuda.matmul.fp32_precision = "tf32"
    try:
        yield
    finally:
        torch.backends.cuda.matmul.fp32_precision = before


def matmul_precision(precision: str, device: torch.device) -> contextlib.AbstractContextManager:
    """The context a network's passes run in for `PolicyConfig.precision` on `device`. TF32 is a
    process-wide cuBLAS setting, so it is switched on only for the passes (backward included)
    and back off after: the env's and the statistics' float32 products stay exact."""
    if precision == "bf16":
        # No cast cache: a CUDA graph replays the casts it captured, and a cache kept across
        # captures would hand a replay stale copies of the weights.
        return torch.autocast(device.type, dtype=torch.bfloat16, cache_enabled=False)
    if precision == "tf32" and device.type == "cuda":
        return _tf32_matmuls()
    return contextlib.nullcontext()


def mlp(in_dim: int, hidden: tuple[int, ...], out_dim: int, activation: str) -> nn.Sequential:
    layers: list[nn.Module] = []
    for width in hidden:
        layers += [nn.Linear(in_dim, width), ACTIVATIONS[activation]()]
        in_dim = width
    layers.append(nn.Linear(in_dim, out_dim))
    return nn.Sequential(*layers)


class DiagonalGaussian:
    """A Gaussian with a diagonal covariance and one log-std per action dimension.

    Written out instead of torch.distributions.Normal, whose argument checks and broadcasting
    cost more than the rest of the policy step at rollout batch sizes on the CPU.
    """

    _HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)

    def __init__(self, mean: torch.Tensor, log_std: torch.Tensor):
        self.mean = mean
        self.log_std = log_std.expand_as(mean)
        self.stddev = self.log_std.exp()

    def sample(self, generator: torch.Generator | None = None) -> torch.Tensor:
        return self.sample_from(torch.randn(self.mean.shape, device=self.mean.device, generator=generator))

    def sample_from(self, noise: torch.Tensor) -> torch.Tensor:
        """The sample that standard normal `noise` (the mean's shape) gives."""
        return self.mean + self.stddev * noise

    def log_prob(self, actions: torch.Tensor) -> torch.Tensor:
        """Log-density summed over action dimensions, shape (N,)."""
        z = (actions - self.mean) / self.stddev
        return (-0.5 * z * z - self.log_std - self._HALF_LOG_2PI).sum(-1)

    def entropy(self) -> torch.Tensor:
        """Entropy summed over action dimensions, shape (N,)."""
        return (0.5 + self._HALF_LOG_2PI + self.log_std).sum(-1)


class MlpActorPolicy(nn.Module):
    """What every policy whose `actor` maps normalised actor observations to its deterministic
    action shares: the normalisation, the action for raw observations, no state between steps,
    and the export module. A subclass sets `actor`, `actor_normalizer` (or None), `obs_dims`
    and `num_actions`."""

    actor: nn.Module
    actor_normalizer: RunningNormalizer | None

    def normalize_actor(self, obs: torch.Tensor) -> torch.Tensor:
        return self.actor_normalizer(obs) if self.actor_normalizer is not None else obs

    def act_deterministic(self, raw_actor_obs: torch.Tensor) -> torch.Tensor:
        """The actor's deterministic action for raw (unnormalised) observations (the Gaussian's
        mean; a squashed policy's `bound * tanh(mean)`): what `play` and deployment use."""
        return self.actor(self.normalize_actor(raw_actor_obs))

    def reset(self, dones: torch.Tensor) -> None:
        """Nothing to forget where episodes end: an MLP carries no state between steps."""

    def deployable(
        self,
        action_offset: torch.Tensor | None = None,
        action_scale: torch.Tensor | float = 1.0,
        action_clip: float = math.inf,
    ) -> DeployedActor:
        """The deterministic actor for export (`DeployedActor`: a squash is inside the actor)."""
        return DeployedActor(self, action_offset, action_scale, action_clip)


class ActorCritic(MlpActorPolicy):
    """Actor and critic take normalised observations of their own groups."""

    def __init__(
        self,
        actor_obs_dim: int,
        critic_obs_dim: int,
        num_actions: int,
        actor_hidden: tuple[int, ...],
        critic_hidden: tuple[int, ...],
        activation: str,
        init_noise_std: float,
        normalize: bool,
        obs_std_offset: float = 0.0,
        actor_std_floor: torch.Tensor | None = None,
        critic_std_floor: torch.Tensor | None = None,
        noise_std_type: str = "log",
        precision: str = "fp32",
        normalized_groups: Collection[str] = ("actor", "critic"),
    ):
        super().__init__()
        self.precision = precision
        self.obs_dims = {"actor": actor_obs_dim, "critic": critic_obs_dim}
        """The widths of the observation groups it reads."""
        self.actor = mlp(actor_obs_dim, actor_hidden, num_actions, activation)
        self.critic = mlp(critic_obs_dim, critic_hidden, 1, activation)
        self.num_actions = num_actions
        self.noise_std_type = noise_std_type
        # The action noise's learnable parameter: its log, or (rsl_rl's default) the std itself.
        if noise_std_type == "log":
            self.log_std = nn.Parameter(torch.full((num_actions,), float(torch.log(torch.tensor(init_noise_std)))))
        else:
            self.std = nn.Parameter(torch.full((num_actions,), float(init_noise_std)))
        # With `normalize`, each group the observation spec lets a normaliser scale gets one.
        self.actor_normalizer = self.critic_normalizer = None
        offset = obs_std_offset
        if normalize and "actor" in normalized_groups:
            self.actor_normalizer = RunningNormalizer(actor_obs_dim, std_offset=offset, std_floor=actor_std_floor)
        if normalize and "critic" in normalized_groups:
            self.critic_normalizer = RunningNormalizer(critic_obs_dim, std_offset=offset, std_floor=critic_std_floor)

    def critic_parameters(self) -> Iterator[nn.Parameter]:
        """What the value's gradient reaches (PPO clips it apart from the actor's)."""
        return self.critic.parameters()

    def normalize_critic(self, obs: torch.Tensor) -> torch.Tensor:
        return self.critic_normalizer(obs) if self.critic_normalizer is not None else obs

    def matmul_precision(self) -> contextlib.AbstractContextManager:
        """The context of the training passes (`PolicyConfig.precision`); a backward pass runs in
        it too, so that its products are those of the forward pass."""
        return matmul_precision(self.precision, self.actor[0].weight.device)

    def mean_action(self, actor_obs: torch.Tensor) -> torch.Tensor:
        """The actor's output for normalised observations, in float32 at any precision."""
        with self.matmul_precision():
            return self.actor(actor_obs).float()

    def distribution(self, actor_obs: torch.Tensor) -> DiagonalGaussian:
        """Policy over actions given normalised actor observations."""
        return DiagonalGaussian(self.mean_action(actor_obs), self.noise_log_std())

    def noise_log_std(self) -> torch.Tensor:
        """Log of the action noise's std, (num_actions,); a std parameter is kept above 1e-6."""
        return self.log_std if self.noise_std_type == "log" else self.std.clamp(min=1e-6).log()

    def noise_std(self) -> torch.Tensor:
        """The action noise's std, (num_actions,), without gradient."""
        return self.noise_log_std().detach().exp()

    def value(self, critic_obs: torch.Tensor) -> torch.Tensor:
        """State value given normalised critic observations, shape (N,), in float32."""
        with self.matmul_precision():
            return self.critic(critic_obs).float().squeeze(-1)


def build_actor_critic(
    obs_dims: Mapping[str, int],
    num_actions: int,
    cfg: PolicyConfig,
    device: torch.device,
    obs_std_floors: Mapping[str, torch.Tensor | None] | None = None,
    normalized_groups: Collection[str] = ("actor", "critic"),
) -> ActorCritic:
    """The actor-critic of `cfg` for an env's observation groups (`actor`, `critic`) and actions;
    `obs_std_floors` gives per group the smallest std each column is normalised by (the env's
    `obs_std_floors`), `normalized_groups` the groups a normaliser may scale."""
    floors = obs_std_floors or {}
    return ActorCritic(
        obs_dims["actor"],
        obs_dims["critic"],
        num_actions,
        cfg.actor_hidden_dims,
        cfg.critic_hidden_dims,
        cfg.activation,
        cfg.init_noise_std,
        cfg.normalize_observations,
        cfg.obs_std_offset,
        floors.get("actor"),
        floors.get("critic"),
        cfg.noise_std_type,
        cfg.precision,
        normalized_groups,
    ).to(device)


class SquashedActor(nn.Module):
    """The actor of `SquashedGaussianPolicy`: an MLP giving, for normalised observations, the
    mean and log-std of a Gaussian over pre-squash actions. Called, it returns the
    deterministic action `bound * tanh(mean)`, what play and export run."""

    LOG_STD_RANGE = (-5.0, 2.0)
    """Where the log-std is kept (SAC's usual bounds): no collapse to a point, no flat noise."""

    def __init__(self, net: nn.Sequential, num_actions: int, bound: float) -> None:
        super().__init__()
        self.net = net
        self.num_actions = num_actions
        self.register_buffer("bound", torch.tensor(float(bound)))
        """Actions lie in (-bound, bound), in the env's action units (a buffer: a checkpoint keeps it)."""

    def mean_and_log_std(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean, log_std = self.net(obs).float().split(self.num_actions, dim=-1)
        low, high = self.LOG_STD_RANGE
        # A smooth squash into the range (rather than a clamp, whose gradient vanishes at its ends).
        return mean, low + 0.5 * (high - low) * (torch.tanh(log_std) + 1.0)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.bound * torch.tanh(self.mean_and_log_std(obs)[0])


class SquashedGaussianPolicy(MlpActorPolicy):
    """SAC's policy (`--policy.kind squashed`): a Gaussian whose mean and std both come from an
    MLP of the normalised actor observations, squashed by tanh into (-bound, bound) in the env's
    action units. No critic: SAC's critics are its own (`mjrl.rl.sac`), not part of what is
    played or exported."""

    _HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)

    def __init__(
        self,
        actor_obs_dim: int,
        num_actions: int,
        hidden: tuple[int, ...],
        activation: str,
        normalize: bool,
        obs_std_offset: float = 0.0,
        std_floor: torch.Tensor | None = None,
        precision: str = "fp32",
        bound: float = 1.0,
    ) -> None:
        super().__init__()
        self.precision = precision
        self.obs_dims = {"actor": actor_obs_dim}
        self.num_actions = num_actions
        self.actor = SquashedActor(mlp(actor_obs_dim, hidden, 2 * num_actions, activation), num_actions, bound)
        self.actor_normalizer = (
            RunningNormalizer(actor_obs_dim, std_offset=obs_std_offset, std_floor=std_floor) if normalize else None
        )

    def matmul_precision(self) -> contextlib.AbstractContextManager:
        return matmul_precision(self.precision, self.actor.bound.device)

    def sample(self, actor_obs: torch.Tensor, noise: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(actions, their log-density) for normalised observations and standard normal `noise`:
        the Gaussian's sample squashed, the density corrected for the squash (tanh's Jacobian,
        in a form that stays finite where tanh saturates) and for the bound."""
        with self.matmul_precision():
            mean, log_std = self.actor.mean_and_log_std(actor_obs)
        pre = mean + log_std.exp() * noise
        gaussian = (-0.5 * noise * noise - log_std - self._HALF_LOG_2PI).sum(-1)
        # log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u))
        squash = (2.0 * (math.log(2.0) - pre - nn.functional.softplus(-2.0 * pre))).sum(-1)
        bound = self.actor.bound
        return bound * torch.tanh(pre), gaussian - squash - self.num_actions * torch.log(bound)

    def noise_std(self) -> torch.Tensor:
        """Not a parameter of this policy (its std depends on the state): a NaN per action."""
        return torch.full((self.num_actions,), math.nan, device=self.actor.bound.device)


def build_squashed(
    obs_dims: Mapping[str, int],
    num_actions: int,
    cfg: PolicyConfig,
    device: torch.device,
    obs_std_floors: Mapping[str, torch.Tensor | None] | None = None,
    normalized_groups: Collection[str] = ("actor", "critic"),
) -> SquashedGaussianPolicy:
    """The squashed-Gaussian policy of `cfg` (its actor's widths, activation, normalisation and
    precision) for an env's actor observations and actions; its bound is its trainer's to set."""
    return SquashedGaussianPolicy(
        obs_dims["actor"],
        num_actions,
        cfg.actor_hidden_dims,
        cfg.activation,
        cfg.normalize_observations and "actor" in normalized_groups,
        cfg.obs_std_offset,
        (obs_std_floors or {}).get("actor"),
        cfg.precision,
    ).to(device)


class DeployedActor(nn.Module):
    """The deterministic actor as one self-contained float32 CPU module, for export: raw
    observations in, the policy mean out. The normaliser's statistics become constants, and with
    `action_offset` given, the env's action transform is folded in as well, so the output is the
    actuator targets `offset + scale * clip(mean, -clip, clip)`."""

    def __init__(
        self,
        policy: MlpActorPolicy,
        action_offset: torch.Tensor | None = None,
        action_scale: torch.Tensor | float = 1.0,
        action_clip: float = math.inf,
    ):
        super().__init__()
        self.actor = copy.deepcopy(policy.actor).float().cpu().eval()
        norm = policy.actor_normalizer
        dim = policy.obs_dims["actor"]
        # Cast and summed as RunningNormalizer.forward does for float32 input, so the exported
        # model and act_deterministic round the same way.
        mean = norm.mean.float().cpu() if norm is not None else torch.zeros(dim)
        std = norm.std().cpu() if norm is not None else torch.ones(dim)
        self.register_buffer("obs_mean", mean)
        self.register_buffer("obs_std", std)
        self.obs_clip = norm.clip if norm is not None else math.inf
        self.scaled = action_offset is not None
        offset = action_offset if action_offset is not None else torch.zeros(policy.num_actions)
        self.register_buffer("action_offset", offset.float().cpu())
        self.register_buffer("action_scale", torch.as_tensor(action_scale, dtype=torch.float32).cpu())
        self.action_clip = float(action_clip)
        self.requires_grad_(False)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.transform(self.actor(self.normalize(obs)))

    def normalize(self, obs: torch.Tensor) -> torch.Tensor:
        """Raw observations as the actor reads them (the normaliser's statistics as constants)."""
        return ((obs - self.obs_mean) / self.obs_std).clamp(-self.obs_clip, self.obs_clip)

    def transform(self, actions: torch.Tensor) -> torch.Tensor:
        """The actor's outputs, as actuator targets when the action transform is folded in."""
        if self.scaled:
            actions = self.action_offset + self.action_scale * actions.clamp(-self.action_clip, self.action_clip)
        return actions

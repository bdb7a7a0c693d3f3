"""SAC's critics: two categorical (C51) critics over fixed atoms, the projection of a target
distribution onto those atoms, and the n-step returns the critics learn. `sac.py` reads them
top to bottom beside its update."""

from __future__ import annotations

import torch
from torch import nn

from mjrl.rl.networks import mlp


def n_step_returns(
    rewards: torch.Tensor, terminated: torch.Tensor, truncated: torch.Tensor, gamma: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """For windows of consecutive steps of one env, (B, n) each: the discounted rewards from the
    window's first step up to its last or to the first step that ended an episode, whichever
    comes first; the discount of the bootstrap after that step (gamma^(k+1) for its index k, 0
    where it terminated: nothing follows a termination; a time-out is bootstrapped from its
    final observation); and k itself, (B,) each."""
    batch, n = rewards.shape
    ended = (terminated | truncated).float()
    # alive[k]: no episode ended before step k of the window.
    alive = torch.cumprod(torch.cat([ended.new_ones(batch, 1), 1.0 - ended[:, :-1]], dim=1), dim=1)
    powers = gamma ** torch.arange(n + 1, device=rewards.device, dtype=rewards.dtype)
    returns = (alive * powers[:n] * rewards).sum(dim=1)
    # The step the return stops at: the first that ended its episode, else the window's last.
    last_step = (torch.arange(n, device=rewards.device) == n - 1).to(ended.dtype)
    stop = alive * torch.clamp(ended + last_step, max=1.0)
    discount = (stop * powers[1:] * (1.0 - terminated.float())).sum(dim=1)
    return returns, discount, stop.argmax(dim=1)


def project_onto_support(
    atoms: torch.Tensor, target_atoms: torch.Tensor, probs: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """C51's projection: the distribution on `atoms` (K,), equally spaced, nearest to the one
    that puts `probs` (B, K) at `target_atoms` (B, K). A mass outside the support goes to its
    end; inside, it is split between the two atoms around it in proportion to its distance to
    each. Returns (the projected probabilities (B, K), the share of the mass that was outside)."""
    v_min, v_max = atoms[0], atoms[-1]
    delta = (v_max - v_min) / (atoms.shape[0] - 1)
    outside = ((target_atoms < v_min) | (target_atoms > v_max)).float()
    position = (target_atoms.clamp(v_min, v_max) - v_min) / delta  # in [0, K - 1]
    lower = position.floor().clamp(max=atoms.shape[0] - 1)
    upper_weight = position - lower  # 0 where a target lands on an atom: all its mass to `lower`
    projected = torch.zeros_like(probs)
    projected.scatter_add_(1, lower.long(), probs * (1.0 - upper_weight))
    projected.scatter_add_(1, (lower.long() + 1).clamp(max=atoms.shape[0] - 1), probs * upper_weight)
    return projected, (outside * probs).sum(dim=1)


def target_distribution(probs: torch.Tensor, atoms: torch.Tensor, clipped_double_q: bool) -> torch.Tensor:
    """What the critics learn from, of the target critics' two distributions `probs` (2, B, K)
    over `atoms` (K,): with `clipped_double_q`, the one expecting less (per sample); without,
    their mixture (whose expectation is the two's mean)."""
    if not clipped_double_q:
        return probs.mean(dim=0)
    expected = (probs * atoms).sum(dim=-1)
    return torch.where((expected[1] < expected[0]).unsqueeze(-1), probs[1], probs[0])


def critics_value(probs: torch.Tensor, atoms: torch.Tensor, clipped_double_q: bool) -> torch.Tensor:
    """The return the actor maximises, of the critics' two distributions `probs` (2, B, K): the
    lower expectation with `clipped_double_q`, the two's mean without, (B,)."""
    expected = (probs * atoms).sum(dim=-1)
    return expected.min(dim=0).values if clipped_double_q else expected.mean(dim=0)


def layer_normed(net: nn.Sequential) -> nn.Sequential:
    """The MLP with a LayerNorm after each hidden linear layer, before its activation (as
    BRO's, SimBa's and FastSAC's critics): bounded features, which keep a critic's values for
    states and actions its replay never held near those it learned."""
    layers: list[nn.Module] = []
    for layer in net[:-1]:
        layers.append(layer)
        if isinstance(layer, nn.Linear):
            layers.append(nn.LayerNorm(layer.out_features))
    return nn.Sequential(*layers, net[-1])


class TwinCritic(nn.Module):
    """Two critics, each an MLP of (normalised critic observations, actions) to the logits of a
    categorical distribution of the return over the atoms (with `layer_norm`, normalised
    hidden layers: `layer_normed`)."""

    def __init__(
        self, obs_dim: int, num_actions: int, hidden: tuple[int, ...], activation: str, atoms: int,
        layer_norm: bool = False,
    ) -> None:  # fmt: skip
        super().__init__()
        nets = (mlp(obs_dim + num_actions, hidden, atoms, activation) for _ in range(2))
        self.nets = nn.ModuleList(layer_normed(net) if layer_norm else net for net in nets)

    def forward(self, obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """Logits, (2, B, atoms)."""
        x = torch.cat([obs, actions], dim=-1)
        return torch.stack([net(x).float() for net in self.nets])

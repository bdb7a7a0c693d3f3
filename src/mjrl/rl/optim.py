"""Adam, written out with multi-tensor (`torch._foreach_*`) operations.

Constructing torch.optim.Adam imports torch._dynamo (about 800 modules and 70 MB of memory,
measured with torch 2.13), more than the rest of PPO and a third of mjrl's memory budget for a
CPU run. This class does the same arithmetic as torch.optim.Adam with default settings (tested
against it), keeps its state in the same per-parameter form, and never synchronises with the
host: the learning rate is a float64 tensor on the parameters' device (an adaptive schedule
changes it there), and a step can be skipped by a decision made on the device. Each step
issues about ten operations whatever the number of parameter tensors (one per tensor per stage
before): on a GPU every operation costs host time, whatever its size; a skippable step adds
two copies and a `where` per parameter tensor and one for all the state.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch


class Adam:
    def __init__(
        self,
        params: Iterable[torch.nn.Parameter],
        lr: float,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
    ):
        self.params = [p for p in params if p.requires_grad]
        self.lr = torch.tensor(lr, dtype=torch.float64, device=self.params[0].device)
        """The learning rate, written in place (a captured step reads it from this tensor)."""
        self.betas = betas
        self.eps = eps
        # Every parameter's state is a view into one flat buffer (its moments, then the step
        # counts), so that a skipped step puts the state back in one operation.
        sizes = [p.numel() for p in self.params]
        total = sum(sizes)
        self._flat_state = torch.zeros(2 * total + len(sizes), device=self.params[0].device)
        averages, squares = self._flat_state[:total].split(sizes), self._flat_state[total : 2 * total].split(sizes)
        self.state: dict[torch.Tensor, dict[str, torch.Tensor]] = {
            p: {"step": self._flat_state[2 * total + i], "exp_avg": a.view_as(p), "exp_avg_sq": sq.view_as(p)}
            for i, (p, a, sq) in enumerate(zip(self.params, averages, squares, strict=True))
        }
        # What a skipped step puts back.
        self._state_backup = torch.empty_like(self._flat_state)
        self._param_backup = [p.detach().clone() for p in self.params]

    def zero_grad(self) -> None:
        grads = [p.grad for p in self.params if p.grad is not None]
        if grads:
            torch._foreach_zero_(grads)

    @torch.no_grad()
    def step(self, skip: torch.Tensor | None = None) -> None:
        """One Adam step. With `skip` (a bool tensor), where it is True everything is left as it
        was (a non-finite gradient, say): the step is taken, then undone on the device, so the
        host never waits to decide."""
        if skip is not None:
            torch._foreach_copy_(self._param_backup, self.params)
            self._state_backup.copy_(self._flat_state)
        self._step()
        if skip is not None:
            torch.where(skip, self._state_backup, self._flat_state, out=self._flat_state)
            for param, before in zip(self.params, self._param_backup, strict=True):
                torch.where(skip, before, param, out=param)

    def _step(self) -> None:
        params = [p for p in self.params if p.grad is not None]
        if not params:
            return
        beta1, beta2 = self.betas
        grads = [p.grad for p in params]
        states = [self.state[p] for p in params]
        exp_avgs, exp_avg_sqs = [s["exp_avg"] for s in states], [s["exp_avg_sq"] for s in states]
        steps = [s["step"] for s in states]
        torch._foreach_add_(steps, 1.0)
        torch._foreach_lerp_(exp_avgs, grads, 1 - beta1)
        torch._foreach_mul_(exp_avg_sqs, beta2)
        torch._foreach_addcmul_(exp_avg_sqs, grads, grads, value=1 - beta2)
        # Every parameter has taken the same number of steps: one bias correction for all.
        step = steps[0]
        bias_correction1 = 1 - beta1**step
        bias_correction2_sqrt = torch.sqrt(1 - beta2**step)
        denom = torch._foreach_div(torch._foreach_sqrt(exp_avg_sqs), bias_correction2_sqrt)
        torch._foreach_add_(denom, self.eps)
        torch._foreach_mul_(denom, bias_correction1 / self.lr.float())
        torch._foreach_addcdiv_(params, exp_avgs, denom, value=-1.0)

    def tensors(self) -> list[torch.Tensor]:
        """Every state tensor, in a fixed order (for broadcasting and averaging across ranks)."""
        return [self.state[p][k] for k in ("exp_avg", "exp_avg_sq", "step") for p in self.params]

    def state_dict(self) -> dict[str, Any]:
        return {
            "lr": self.lr.item(),
            "betas": list(self.betas),
            "eps": self.eps,
            "state": [{k: v.clone() for k, v in self.state[p].items()} for p in self.params],
        }

    def load_state_dict(self, saved: dict[str, Any]) -> None:
        if len(saved["state"]) != len(self.params):
            raise ValueError(f"optimizer state of {len(saved['state'])} parameters for {len(self.params)} parameters")
        self.lr.fill_(saved["lr"])
        self.betas, self.eps = tuple(saved["betas"]), saved["eps"]
        for p, state in zip(self.params, saved["state"], strict=True):
            for key, value in state.items():
                self.state[p][key].copy_(value)

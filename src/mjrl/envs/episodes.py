"""The window of the last finished episodes: what the logged return and length are means over,
kept on the device and carried through a resume."""

from __future__ import annotations

import torch

EPISODE_STATISTICS = ("episode_return_sum", "episode_length_sum", "episodes")
"""`EpisodeWindow.stats()`: over the window of finished whole episodes."""


class EpisodeWindow:
    """Returns and lengths of the last `size` finished episodes, in a ring buffer written without
    a host sync: finished envs get consecutive slots, the others all write to a spare slot that
    is never read."""

    def __init__(self, size: int, device: torch.device) -> None:
        self.size = size
        self.returns = torch.zeros(size + 1, device=device)
        self.lengths = torch.zeros(size + 1, device=device)
        self.total = torch.zeros((), dtype=torch.long, device=device)
        """Episodes finished so far."""
        self._spare_slot = torch.tensor(size, device=device)

    def record(self, done: torch.Tensor, returns: torch.Tensor, lengths: torch.Tensor) -> None:
        """Add the `done` envs' episodes. When more than a window of envs finish in one step,
        only the last `size` of them are written: the earlier ones would share their slots, and
        a GPU keeps an arbitrary one of the values written to the same slot."""
        order = torch.cumsum(done, 0)  # 1, 2, ... over this step's finished envs
        finished = order[-1]
        keep = done & (order > finished - self.size)
        slots = torch.where(keep, (self.total + order - 1) % self.size, self._spare_slot)
        self.returns.scatter_(0, slots, returns)
        self.lengths.scatter_(0, slots, lengths.float())
        self.total += finished

    def stats(self) -> dict[str, torch.Tensor]:
        """Sums of returns and lengths, and the count, of the episodes in the window, by
        `EPISODE_STATISTICS` name (float64 scalars: ranks pool them by summing)."""
        count = self.total.clamp(max=self.size)
        valid = torch.arange(self.size, device=self.total.device) < count
        returns = (self.returns[:-1] * valid).sum()
        lengths = (self.lengths[:-1] * valid).sum()
        values = torch.stack([returns.double(), lengths.double(), count.double()])
        return dict(zip(EPISODE_STATISTICS, values.unbind(), strict=True))

    def resume_state(self) -> dict[str, torch.Tensor]:
        """What a checkpoint keeps, so that a resumed run's logged return and length go on from
        where they were (not from the first episodes to end after the resume, the falls)."""
        return {
            "episode_returns": self.returns.clone(),
            "episode_lengths": self.lengths.clone(),
            "episodes_finished": self.total.clone(),
        }

    def load_resume_state(self, saved: dict[str, torch.Tensor]) -> None:
        """Take what `resume_state` kept, when the window has the same size."""
        keys = ("episode_returns", "episode_lengths", "episodes_finished")
        if all(k in saved for k in keys) and saved["episode_returns"].shape == self.returns.shape:
            self.returns.copy_(saved["episode_returns"])
            self.lengths.copy_(saved["episode_lengths"])
            self.total.copy_(saved["episodes_finished"])

"""The terrain as the env sees it: heights on the device, each env's patch, and the curriculum
that moves envs between rows of difficulty.

The rows and distances are written in place, never rebound (see `mjrl.envs.env`).
`TerrainState.height_at` interpolates the heightfield exactly as MuJoCo triangulates it, so
heights read here (the height scan, foot clearance, spawn points) are those the physics
collides with. Nothing here synchronises with the host.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch

from mjrl.envs.component import EnvComponent
from mjrl.sim.terrain import TerrainConfig, TerrainGrid


class TerrainState(EnvComponent):
    """A generated grid on `device`, and per env: its row (difficulty), column (type) and the
    centre of that patch. Rows change at episode ends (`end_episodes`), unless fixed by
    `spawn_row`."""

    def __init__(
        self, cfg: TerrainConfig, grid: TerrainGrid, num_envs: int, device: torch.device, generator: torch.Generator
    ):
        self.cfg = cfg
        self.grid = grid
        self.device = device
        self.cells = _triangle_table(grid.heights).to(device)
        self._cell_stride = torch.tensor([grid.heights.shape[1] - 1, 1.0], device=device)
        self._first_cell = torch.zeros(2, device=device)
        self._last_cell = torch.tensor(grid.heights.shape, device=device) - 1 - 1e-4
        self.origin = torch.tensor(grid.origin, device=device)
        self._far_corner = self.origin + torch.tensor(grid.extent, device=device)
        self.centers = torch.as_tensor(grid.patch_centers, dtype=torch.float32, device=device)
        self.rows = grid.patch_centers.shape[0]
        self.type_names = tuple(dict.fromkeys(grid.column_types))
        self.column_type = torch.tensor([self.type_names.index(t) for t in grid.column_types], device=device)
        # Envs are spread over the columns (of one type, with `spawn_type`), round robin.
        allowed = [c for c, t in enumerate(grid.column_types) if not cfg.spawn_type or t == cfg.spawn_type]
        self.column = torch.tensor(allowed, device=device)[torch.arange(num_envs, device=device) % len(allowed)]
        if cfg.spawn_row >= 0:
            self.level = torch.full((num_envs,), cfg.spawn_row, dtype=torch.long, device=device)
        else:
            top = min(cfg.max_initial_row, self.rows - 1)
            self.level = torch.randint(0, top + 1, (num_envs,), device=device, generator=generator)
        self.generator = generator
        self.last_distance = torch.zeros(num_envs, device=device)
        """How far (m) each env's last finished episode ended from its patch's centre."""
        self._ended = torch.zeros(len(self.type_names), dtype=torch.float64, device=device)
        self._off_top = torch.zeros(len(self.type_names), dtype=torch.float64, device=device)
        # Over the episodes judged since the last gauges: distance walked, distance commanded,
        # promoted, demoted (sums), to see why the rows move as they do.
        self._outcomes = torch.zeros(4, dtype=torch.float64, device=device)

    @property
    def curriculum(self) -> bool:
        return self.cfg.curriculum and self.cfg.spawn_row < 0

    def patch_center(self) -> torch.Tensor:
        """(num_envs, 3): the centre of each env's patch, z its platform's height."""
        return self.centers[self.level, self.column]

    def height_at(self, xy: torch.Tensor) -> torch.Tensor:
        """Terrain height (m) under world points `xy` (..., 2), as MuJoCo triangulates the
        heightfield: each cell is split along its diagonal from (x0, y0) to (x1, y1). Points
        off the grid take the height of its edge, and non-finite ones (a diverged world, reset
        at the end of this step) a height on the grid rather than an index off it."""
        cell = ((xy - self.origin) / self.grid.resolution).nan_to_num(0.0)
        cell = torch.clamp(cell, self._first_cell, self._last_cell)
        corner = cell.floor()
        u_v = cell - corner  # where the point lies in its cell, from (x0, y0)
        index = (corner * self._cell_stride).sum(-1).long()
        plane = self.cells.index_select(0, index.flatten()).view(*index.shape, 5)
        below_diagonal = (u_v[..., 0] > u_v[..., 1]).unsqueeze(-1)
        slopes = torch.where(below_diagonal, plane[..., 1:3], plane[..., 3:5])
        return plane[..., 0] + (u_v * slopes).sum(-1)

    def inner_bounds(self, margin: float) -> tuple[torch.Tensor, torch.Tensor]:
        """Lowest and highest x, y at least `margin` inside the grid's edge."""
        return self.origin + margin, self._far_corner - margin

    def end_episodes(self, ended: torch.Tensor, distance: torch.Tensor, commanded: torch.Tensor) -> None:
        """The curriculum, for the envs whose episode `ended`: up a row when they walked from
        their patch's centre farther than half a patch, down a row when less than half the
        distance their command asked for; past the top row, a random row."""
        torch.where(ended, distance, self.last_distance, out=self.last_distance)
        if not self.curriculum:
            return
        up = ended & (distance > self.cfg.patch_size / 2)
        down = ended & ~up & (distance < 0.5 * commanded)
        level = self.level + up.long() - down.long()
        off_top = level >= self.rows
        random_row = torch.randint(0, self.rows, level.shape, device=self.device, generator=self.generator)
        torch.where(off_top, random_row, level.clamp(min=0), out=self.level)
        types = self.column_type[self.column]
        self._ended.index_add_(0, types, ended.double())
        self._off_top.index_add_(0, types, (ended & off_top).double())
        outcomes = torch.stack([distance * ended, commanded * ended, up.to(distance.dtype), down.to(distance.dtype)])
        self._outcomes += outcomes.sum(dim=1).double()

    def resume_state(self) -> dict[str, torch.Tensor]:
        """Each env's row, so that a resumed run goes on from the curriculum it had reached."""
        return {"terrain_level": self.level.clone()}

    def load_resume_state(self, saved: Mapping[str, torch.Tensor]) -> bool:
        """The rows, when the run had the same number of envs: the envs then start afresh on them."""
        level = saved.get("terrain_level")
        if level is None or level.shape != self.level.shape:
            return False
        self.level.copy_(level.to(self.device).clamp(0, self.rows - 1))
        return True

    def gauges(self) -> dict[str, torch.Tensor]:
        """Since the last call, `name -> [sum, count]` (float64): the mean row over envs, per
        type, and the share of the episodes finished since then that were promoted off the top row,
        overall and per type; over those episodes, the mean distance walked and commanded (m) and
        the shares promoted and demoted."""
        level, types = self.level.double(), self.column_type[self.column]
        count = torch.ones_like(level)
        per_type_sum = torch.zeros(len(self.type_names), dtype=torch.float64, device=self.device)
        per_type_count = torch.zeros_like(per_type_sum)
        per_type_sum.index_add_(0, types, level)
        per_type_count.index_add_(0, types, count)
        out = {"terrain/mean_level": torch.stack([level.sum(), count.sum()])}
        for k, name in enumerate(self.type_names):
            out[f"terrain/mean_level/{name}"] = torch.stack([per_type_sum[k], per_type_count[k]])
        out["terrain/promoted_off_top"] = torch.stack([self._off_top.sum(), self._ended.sum()])
        for k, name in enumerate(self.type_names):
            out[f"terrain/promoted_off_top/{name}"] = torch.stack([self._off_top[k], self._ended[k]])
        judged = self._ended.sum()
        names = ("mean_distance", "mean_commanded_distance", "promoted", "demoted")
        for name, total in zip(names, self._outcomes.unbind(), strict=True):
            out[f"terrain/{name}"] = torch.stack([total, judged])
        self._ended.zero_()
        self._off_top.zero_()
        self._outcomes.zero_()
        return out


def _triangle_table(heights: np.ndarray) -> torch.Tensor:
    """(cells, 5) per cell of the lattice (x-major): its height at (x0, y0), then the slopes
    (d/du, d/dv) of its triangle below the diagonal (u > v), then of the one above: a height
    is one row lookup and a dot product."""
    h = torch.as_tensor(heights, dtype=torch.float32)
    h00, h10, h01, h11 = h[:-1, :-1], h[1:, :-1], h[:-1, 1:], h[1:, 1:]
    table = torch.stack([h00, h10 - h00, h11 - h10, h11 - h01, h01 - h00], dim=-1)
    return table.reshape(-1, 5)

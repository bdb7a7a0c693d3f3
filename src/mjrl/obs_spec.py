"""What an env tells a learner of each observation group (`ObsGroupSpec`): its shape and dtype
per env, whether a learner's running normaliser may scale it and with which per-column floor,
and whether the env adds noise to it. Envs declare it (`VecEnv.obs_spec`, from the task's terms
and its `ObsGroup` settings); learners build their networks and storage from it. Beside the
layers, like `mirror.py`: envs and rl both use it and know nothing of each other.

Today every group is a flat vector of float32 terms; the shape is where a group of another kind
(a camera's images, (C, H, W) of uint8) states what it is.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

import torch


@dataclasses.dataclass(frozen=True, eq=False)
class ObsGroupSpec:
    shape: tuple[int, ...]
    """Per env: (width,) for a vector of terms."""
    dtype: torch.dtype = torch.float32
    normalize: bool = True
    """Whether a learner's running normaliser may scale it (not inputs already in range)."""
    std_floor: torch.Tensor | None = None
    """Per column, the smallest std a normaliser divides by (`ObsTerm.std_floor`); None: none."""
    noise: bool = False
    """Whether the env adds its terms' noise to it (with `EnvConfig.obs_noise`)."""

    @property
    def width(self) -> int:
        """Values per env: the width of a flat vector."""
        return math.prod(self.shape)


def flat_spec(dims: Mapping[str, int]) -> dict[str, ObsGroupSpec]:
    """Plain float32 vectors of the given widths, normalised, without floors or noise: the spec
    of groups known by their widths alone (a teacher's, from its checkpoint's `obs_dims`)."""
    return {group: ObsGroupSpec((width,)) for group, width in dims.items()}

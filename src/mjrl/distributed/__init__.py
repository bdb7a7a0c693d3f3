"""Process-group state: the one place that knows ranks, devices and how to reduce across them."""

from mjrl.distributed.context import DistContext, usable_cores
from mjrl.distributed.devices import resolve_device

__all__ = ["DistContext", "resolve_device", "usable_cores"]

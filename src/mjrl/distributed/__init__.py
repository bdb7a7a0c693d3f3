"""Process-group state: the one place that knows ranks, devices and how to reduce across them."""

from mjrl.distributed.context import DistContext, resolve_device, usable_cores

__all__ = ["DistContext", "resolve_device", "usable_cores"]

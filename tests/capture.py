"""A CUDA graph's capture and replay, emulated on the CPU (issue "A loop the GPU can replay").

A CUDA graph records the kernels a piece of code launches, with the memory each reads and
writes, and replays exactly those: Python does not run again, so a Python number the code
changed, a tensor it rebound to a new one, or a branch it took on a value, stays as captured.
`EmulatedGraph` does the same with torch's operations on any device: a dispatch mode records
every operation (autograd's backward included) with its arguments, and the simulation's Warp
launches (`step`, `forward`, `kinematics`) as calls; a replay runs the records again on the
same tensors, writing each operation's result into the tensor it produced at capture, so that
later records read it there. Random operations draw from their generators again, as CUDA
graphs do with registered generators. As in a real capture, these are errors:
- a host read inside the captured code, by any route: the operations that read (`item`,
  `nonzero`, ...) and the tensor methods that do where Python calls them (`tolist`, `cpu`,
  `numpy`, `bool`, `int`, `float` of a tensor), which on the CPU dispatch no operation;
- a tensor made from Python data (`torch.tensor`, `new_tensor`: on a GPU a copy from host
  memory);
- a Warp array of the simulation reallocated between the capture and a replay (a CUDA graph
  holds the pointers it saw).

Collectives (`c10d` operations, recorded inside a capture: `DistContext.capturing`) are records
too: a replay issues each again on the same tensors and waits for it, as a graph orders its
next node after it, so ranks replaying graphs pair with ranks running the same code eagerly.

Compiled code (`mjrl.fused.Fused`, `--runner.compile`) runs compiled inside the capture, as a
real capture holds its kernels: torch would fall back to the eager code under a recording mode,
so a fused call runs with the emulator's modes set aside, and each inductor graph it runs (its
forward, and at the backward pass its backward) is one record, like a Warp launch.

The recording pass executes (a CUDA capture would not): it stands for the capture and the
first replay together.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

from mjrl.fused import Fused
from mjrl.sim import Simulation

HOST_READS = {"aten._local_scalar_dense.default", "aten.nonzero.default", "aten.masked_select.default",
              "aten.is_nonzero.default", "aten.equal.default"}  # fmt: skip
# A tensor made from Python data inside a capture: on a GPU, a copy from pageable host memory,
# which CUDA refuses during a capture (found by the first real capture, 2026-11-27).
HOST_COPIES = {"aten.lift_fresh.default", "aten.lift_fresh_copy.default"}
WARP_CALLS = ("step", "forward", "kinematics")
HOST_READ_METHODS = {"item", "tolist", "__bool__", "__float__", "__int__", "__index__", "cpu", "numpy"}
"""Tensor methods that read a tensor's data on the host: a blocking copy on a GPU, and on the
CPU no dispatched operation at all (`tolist`, `numpy`, `cpu` of a CPU tensor)."""


class CaptureError(RuntimeError):
    """The captured code did something a CUDA graph cannot hold."""


class _Recorder(TorchDispatchMode):
    def __init__(self, records: list[Callable[[], None]]) -> None:
        super().__init__()
        self.records = records

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if str(func) in HOST_READS:
            raise CaptureError(f"{func} reads the device on the host inside a captured segment")
        if str(func) in HOST_COPIES:
            raise CaptureError(f"{func} copies Python data to the device inside a captured segment")
        out = func(*args, **kwargs)
        self.records.append(_replay_op(func, args, kwargs, out))
        return out


class _NoHostReads(TorchFunctionMode):
    """Refuses the tensor methods that read on the host, where Python calls them."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if getattr(func, "__name__", "") in HOST_READ_METHODS:
            raise CaptureError(f"Tensor.{func.__name__} reads the device on the host inside a captured segment")
        return func(*args, **(kwargs or {}))


def _replay_op(func: Any, args: tuple, kwargs: dict, captured: Any) -> Callable[[], None]:
    if func.namespace == "c10d":  # a collective: it completes before the next record reads it
        return lambda: _wait_for(func(*args, **kwargs))

    def replay() -> None:
        _write_back(captured, func(*args, **kwargs))

    return replay


def _wait_for(collective: tuple) -> None:
    """A replayed collective's work, waited for, as a CUDA graph orders its next node after it
    (gloo works on a thread of its own, into the captured tensors)."""
    from torch._C._distributed_c10d import Work

    Work.unbox(collective[-1]).wait()


def _write_back(captured: Any, fresh: Any) -> None:
    """Put a replayed operation's result where the capture's result lives."""
    if isinstance(captured, list | tuple):
        for c, f in zip(captured, fresh, strict=True):
            _write_back(c, f)
    elif isinstance(captured, torch.Tensor) and captured is not fresh:
        same_memory = captured.data_ptr() == fresh.data_ptr() and captured.stride() == fresh.stride()
        if not same_memory or captured.shape != fresh.shape:  # a view made again needs nothing
            captured.copy_(fresh)


class EmulatedGraph:
    """`capture(fn)` records `fn()` (running it once); `replay()` runs the records again."""

    def __init__(self, sims: list[Simulation]) -> None:
        self.sims = sims
        self.records: list[Callable[[], None]] = []
        self.warp_pointers: dict[str, int] = {}
        self.compiled_calls = 0
        """Inductor graphs run compiled inside the capture (`--runner.compile`)."""

    def capture(self, fn: Callable[[], Any]) -> Any:
        with self._warp_calls_recorded(), self._compiled_calls_recorded(), _NoHostReads(), _Recorder(self.records):
            result = fn()
        self.warp_pointers = warp_pointers(self.sims)
        return result

    def replay(self) -> None:
        moved = sorted(k for k, ptr in warp_pointers(self.sims).items() if self.warp_pointers.get(k, ptr) != ptr)
        if moved:
            raise CaptureError(f"Warp arrays reallocated since the capture: {moved[:4]}")
        # Below autograd: the records hold the backward's operations themselves.
        with torch.no_grad():
            for record in self.records:
                record()

    @contextlib.contextmanager
    def _warp_calls_recorded(self) -> Iterator[None]:
        """The simulations' Warp launches, recorded in order with the torch operations."""
        originals = {(id(sim), name): getattr(sim, name) for sim in self.sims for name in WARP_CALLS}

        def recorded(call: Callable[[], None]) -> Callable[[], None]:
            def run() -> None:
                with _disable_current_modes():  # the call is one record, whatever it runs
                    call()
                self.records.append(call)

            return run

        try:
            for sim in self.sims:
                for name in WARP_CALLS:
                    setattr(sim, name, recorded(originals[id(sim), name]))
            yield
        finally:
            for sim in self.sims:
                for name in WARP_CALLS:
                    delattr(sim, name)  # the class's methods again

    @contextlib.contextmanager
    def _compiled_calls_recorded(self) -> Iterator[None]:
        """Fused calls run compiled, each inductor graph they run recorded as one call: on replay
        it runs again on the inputs it was given (which earlier records rewrote) and its outputs
        are written where the capture's are (the backward reads the activations it saved)."""
        from torch._inductor.output_code import CompiledFxGraph

        fused_call, graph_call = Fused.__call__, CompiledFxGraph.__call__

        def call_fused(fused: Fused, *args: Any, **kwargs: Any) -> Any:
            with _no_modes():
                return fused_call(fused, *args, **kwargs)

        def call_graph(graph: CompiledFxGraph, inputs: list[Any]) -> Any:
            kept = list(inputs)  # the graph empties the list it is given (its inputs freed early)
            with _no_modes():
                out = graph_call(graph, inputs)
            self.records.append(lambda: _write_back(out, graph_call(graph, list(kept))))
            self.compiled_calls += 1
            return out

        Fused.__call__, CompiledFxGraph.__call__ = call_fused, call_graph
        try:
            yield
        finally:
            Fused.__call__, CompiledFxGraph.__call__ = fused_call, graph_call


@contextlib.contextmanager
def _no_modes() -> Iterator[None]:
    """Without the recording modes, dispatch and torch function alike."""
    from torch.overrides import _len_torch_function_stack, _pop_mode_temporarily

    with contextlib.ExitStack() as stack:
        stack.enter_context(_disable_current_modes())
        for _ in range(_len_torch_function_stack()):
            stack.enter_context(_pop_mode_temporarily())
        yield


def warp_pointers(sims: list[Simulation]) -> dict[str, int]:
    """The device address of every Warp array of the simulations' data and model, by name."""
    import warp as wp

    pointers = {}
    for i, sim in enumerate(sims):
        for part in ("data", "model"):
            for name, value in vars(getattr(sim, part)).items():
                if isinstance(value, wp.array):
                    pointers[f"sim{i}.{part}.{name}"] = value.ptr
    return pointers

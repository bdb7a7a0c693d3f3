"""One object that owns the MuJoCo-Warp model and data of N worlds on one device.

Everything above this layer sees torch tensors that alias Warp's arrays (zero-copy), so
writing `sim.qpos[...] = x` changes the simulator state directly. Every Warp call names its
device (`wp.ScopedDevice`, or on a GPU `wp.ScopedStream` on torch's current stream of that
device): with several ranks per node, nothing may ever touch another rank's GPU by accident.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import os
import sys
import tempfile
from collections.abc import Iterator
from typing import ClassVar

import mujoco
import torch
import warp as wp

# Warp prints a banner and a line per kernel module unless told otherwise before it starts.
if os.environ.get("MJRL_WARP_VERBOSE", "0") != "1":
    wp.config.log_level = wp.LOG_WARNING

# mujoco_warp is imported where a simulation is built or stepped, not here: its import defines
# some 500 kernels (2-3 s on a CPU) that a launcher, `mjrl list`, a plot or a refused flag never use.


@dataclasses.dataclass(frozen=True)
class SimConfig:
    """Physics settings of a task."""

    decimation: int = 5
    """Physics substeps per env step (the policy acts every `decimation * timestep` seconds)."""
    timestep: float = 0.0
    """Physics timestep in seconds; 0 keeps the MJCF's own value."""
    nconmax: int | None = None
    """Contacts allocated per world (mujoco_warp `nconmax`); None lets mujoco_warp choose."""
    njmax: int | None = None
    """Constraint rows allocated per world (mujoco_warp `njmax`); None lets mujoco_warp choose."""
    graph: bool = True
    """Capture the substep loop once and replay it: a CUDA graph on GPUs, Warp's C++ replay on the
    CPU (3-4x faster there, since it skips the Python cost of about 90 kernel launches per physics
    step). False launches every kernel from Python on each step."""
    deterministic: bool = False
    """mujoco_warp's deterministic mode: atomic sums that do not depend on the order of their
    terms. In mujoco_warp 4.0.0 its contact and constraint-row sorts are still empty, so on a GPU
    two runs with contacts still differ (H100, 2026-11-27); without contacts they are
    bit-identical either way. It cost 3.8x of the quadruped's training loop there (4096 envs),
    and a capture of the loop's CUDA graphs failed with it on, so `--runner.cuda-graphs` leaves
    the two apart. On the CPU the physics is deterministic either way."""
    per_world_model_fields: tuple[str, ...] = ()
    """Model fields given one copy per world (e.g. geom_friction, body_mass) so that events can
    randomise them per env; all other model fields are shared by every world."""

    bounds: ClassVar[dict] = {"decimation": ">= 1", "timestep": ">= 0", "nconmax": ">= 1", "njmax": ">= 1"}
    """Ranges of the numeric fields (see `mjrl.config.check_numbers`)."""


@dataclasses.dataclass(frozen=True)
class GraphChoice:
    capture: bool
    """Capture the substep loop and replay it."""
    warning: str | None = None
    """One line saying why a requested capture is off."""


def warp_device_name(device: torch.device) -> str:
    """Warp's name for the rank's torch device: `cuda:N` for `cuda:N` (with its index always:
    Warp's "cuda" is its current device, cuda:0 in a process that chose none), else `cpu`."""
    if device.type != "cuda":
        return "cpu"
    if device.index is None:
        raise ValueError(f"{device}: a rank's CUDA device names its index")
    return f"cuda:{device.index}"


def choose_graph(requested: bool, is_cuda: bool, mempool_enabled: bool, conditional_nodes: bool) -> GraphChoice:
    """Whether to capture the substep loop. On the CPU, Warp's API capture always works. A CUDA
    graph of mujoco_warp's step needs CUDA memory pools (its solver allocates temporaries
    inside `step`) and conditional graph nodes (its solver loop, `capture_while`; CUDA driver
    and toolkit 12.4 or newer). Without them every kernel is launched from Python."""
    if not requested or not is_cuda:
        return GraphChoice(requested)
    missing = []
    if not mempool_enabled:
        missing.append("CUDA memory pools are off on this device")
    if not conditional_nodes:
        missing.append("conditional graph nodes need CUDA driver and toolkit 12.4+")
    if not missing:
        return GraphChoice(True)
    reason = "; ".join(missing)
    return GraphChoice(False, f"warning: physics not captured in a CUDA graph ({reason}): kernels launched one by one")


@contextlib.contextmanager
def gc_suspended() -> Iterator[None]:
    """Python's garbage collector off for a capture: a stale Warp graph it finalised meanwhile
    would free memory the new capture is recording (mjlab suspends it for the same reason)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


# Data arrays exposed as torch views. Names match mujoco's MjData fields.
_NO_DRIVER = "Warp CUDA warning: Could not find or load the NVIDIA CUDA driver"
_warp_started = False


def init_warp() -> None:
    """Start Warp's runtime (once per process) without the line its C++ code prints to stderr on
    a machine without an NVIDIA driver: a CPU run is what that machine is for, and every command
    printed it first. Any other line Warp prints there is passed on."""
    global _warp_started
    if _warp_started:
        return
    _warp_started = True
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            wp.init()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        captured.seek(0)
        printed = captured.read().decode(errors="replace")
    sys.stderr.write("".join(line for line in printed.splitlines(keepends=True) if not line.startswith(_NO_DRIVER)))


_STATE_FIELDS = (
    "qpos",
    "qvel",
    "qacc",
    "ctrl",
    "act",
    "qfrc_applied",
    "xfrc_applied",
    "xpos",
    "xquat",
    "xmat",
    "site_xpos",
    "geom_xpos",
    "geom_xmat",
    "site_xmat",
    "sensordata",
    "cvel",
    "subtree_com",
    "actuator_force",
    "qfrc_actuator",
    "cfrc_ext",
    "time",
    "qacc_warmstart",
)


class Simulation:
    """MuJoCo-Warp model plus data for `num_worlds` worlds, stepped `decimation` times per call."""

    def __init__(self, mj_model: mujoco.MjModel, num_worlds: int, device: str, cfg: SimConfig):
        import mujoco_warp as mjw

        init_warp()
        if cfg.timestep > 0:
            mj_model.opt.timestep = cfg.timestep
        self.mj_model = mj_model
        self.cfg = cfg
        self.num_worlds = num_worlds
        self.device = torch.device(device)
        if self.device.type == "cuda" and self.device.index is None:  # a script's "cuda": torch's current GPU
            self.device = torch.device("cuda", torch.cuda.current_device())
        self.wp_device = wp.get_device(warp_device_name(self.device))
        self.dt = mj_model.opt.timestep * cfg.decimation
        with wp.ScopedDevice(self.wp_device):
            fields = set(cfg.per_world_model_fields)
            if "body_mass" in fields:  # the subtree masses follow the masses: see update_subtree_masses
                fields.add("body_subtreemass")
            batch = {name: num_worlds for name in sorted(fields)}
            self.model = mjw.put_model(mj_model, batch_sizes=batch or None)
            # A solver or line search capped at a few iterations (mjlab's velocity tasks cap them at
            # 10 and 20) stops at its cap by design; mujoco_warp prints a line from the kernel for
            # every world and substep that does, dozens per env step at 4096 worlds. Buffer
            # overflows (contacts, constraint rows) still warn.
            capped = mjw.OverflowType.ITERATIONS | mjw.OverflowType.LS_ITERATIONS
            self.model.opt.warn_overflow = int(self.model.opt.warn_overflow) & ~int(capped)
            if cfg.deterministic:
                self.model.opt.deterministic = mjw.DeterminismType.ALL
            self.data = mjw.make_data(mj_model, nworld=num_worlds, nconmax=cfg.nconmax, njmax=cfg.njmax)
            for name in _STATE_FIELDS:
                setattr(self, name, wp.to_torch(getattr(self.data, name)))
            # Contacts of all worlds in one array: the first `nacon[0]` rows are valid, each with
            # its two geom ids and its world id.
            self.contact_geom = wp.to_torch(self.data.contact.geom)
            self.contact_worldid = wp.to_torch(self.data.contact.worldid)
            self.nacon = wp.to_torch(self.data.nacon)
            rows = self.contact_worldid.shape[0]
            self._contact_rows = torch.arange(rows, device=self.contact_worldid.device).view(rows, 1)
            self._spare_geom_slot = torch.tensor(num_worlds * mj_model.ngeom, dtype=torch.int32, device=self.device)
            mjw.forward(self.model, self.data)
        self.qpos0 = torch.as_tensor(mj_model.qpos0, dtype=torch.float32, device=self.device)
        # State that a reset zeroes (empty arrays, such as `act` without activation states, skipped).
        states = (self.qvel, self.qacc_warmstart, self.ctrl, self.act, self.qfrc_applied)
        self._zeroed_on_reset = [state for state in states if state.numel()]
        self._model_views: dict[str, torch.Tensor] = {}
        self._in_subtree: torch.Tensor | None = None
        self._stream: wp.Stream | None = None  # Warp's handle on torch's current stream (GPU)
        choice = self._graph_choice()
        if choice.warning:
            print(choice.warning, file=sys.stderr, flush=True)
        self._graph = self._capture_substeps() if choice.capture else None
        if self.wp_device.is_cuda:
            # Set-up ran on Warp's own stream; from here on Warp runs on torch's current one.
            wp.synchronize_device(self.wp_device)

    @property
    def replays_graph(self) -> bool:
        """Whether `step` replays a captured graph of the substeps (else it launches them)."""
        return self._graph is not None

    def launch_inline(self) -> None:
        """From now on launch the substep kernels at each step rather than replaying their
        graph: for a capture that holds the whole env step (`mjrl.runner.graphs`), whose
        replays then run them."""
        self._graph = None

    def _graph_choice(self) -> GraphChoice:
        if not self.wp_device.is_cuda:
            return choose_graph(self.cfg.graph, False, True, True)
        mempool, conditional = wp.is_mempool_enabled(self.wp_device), wp.is_conditional_graph_supported()
        return choose_graph(self.cfg.graph, True, mempool, conditional)

    def _scope(self) -> wp.ScopedDevice | wp.ScopedStream:
        """Where Warp launches: on a GPU, torch's current stream of this device. torch writes
        `ctrl` and `qpos` on its current stream; Warp on a stream of its own would race with
        those writes whenever that stream is not the default one (`torch.cuda.graph`,
        `torch.compile(mode="reduce-overhead")`, a `torch.cuda.stream` block)."""
        if not self.wp_device.is_cuda:
            return wp.ScopedDevice(self.wp_device)
        # Nothing to wait for on entry: Warp's own stream was drained after set-up.
        return wp.ScopedStream(self.warp_stream(), sync_enter=False)

    def warp_stream(self) -> wp.Stream:
        """Warp's handle on torch's current stream of this GPU, made once per stream: Warp knows
        a capture on a stream by this object, so a capture that torch begins and Warp joins
        (`wp.ScopedCapture(stream=..., external=True)`) must name the one the steps run on."""
        current = torch.cuda.current_stream(self.device)
        if self._stream is None or self._stream.cuda_stream != current.cuda_stream:
            self._stream = wp.stream_from_torch(current)  # keeps a reference to `current`
        return self._stream

    def _substeps(self) -> None:
        import mujoco_warp as mjw

        for _ in range(self.cfg.decimation):
            mjw.step(self.model, self.data)

    def _capture_substeps(self) -> wp.Graph:
        """Record the substep loop once. The graph holds pointers to this object's arrays, so
        they must never be reallocated (every writer above goes through the torch views)."""
        with wp.ScopedDevice(self.wp_device):
            self._substeps()  # compiles and loads every kernel before capture
            with gc_suspended(), wp.ScopedCapture(device=self.wp_device) as capture:
                self._substeps()
            if self.wp_device.is_cuda:
                wp.synchronize_device(self.wp_device)  # the warm-up step, before torch's reset
        # Undo the warm-up step: a new simulation starts at rest in qpos0, as mujoco_warp's does.
        self.reset(torch.ones(self.num_worlds, dtype=torch.bool, device=self.device))
        self.forward()
        return capture.graph

    def step(self) -> None:
        """Advance every world by `decimation` physics steps with the current `ctrl`."""
        with self._scope():
            if self._graph is not None:
                wp.capture_launch(self._graph)
            else:
                self._substeps()

    def reset(self, mask: torch.Tensor) -> None:
        """Put the worlds where `mask` is True back to the model's rest state (qpos0, at rest,
        no controls or applied forces).

        Done with masked torch writes rather than `mujoco_warp.reset_data`, which rebuilds its
        kernels on every call (about 6 ms of Python on the CPU); these writes need no host
        synchronisation and can be captured in a CUDA graph.
        """
        # masked_fill, not multiplication by the mask: a world reset for NaN state must lose it.
        rows = mask.unsqueeze(1)
        torch.where(rows, self.qpos0, self.qpos, out=self.qpos)
        for state in self._zeroed_on_reset:
            state.masked_fill_(rows, 0.0)
        self.xfrc_applied.masked_fill_(rows.unsqueeze(2), 0.0)
        self.time.masked_fill_(mask, 0.0)

    def forward(self) -> None:
        """Recompute derived quantities (kinematics, contacts, sensors) from qpos/qvel without stepping."""
        import mujoco_warp as mjw

        with self._scope():
            mjw.forward(self.model, self.data)

    def kinematics(self) -> None:
        """Recompute body and site poses from qpos only: cheaper than `forward`."""
        import mujoco_warp as mjw

        with self._scope():
            mjw.kinematics(self.model, self.data)

    def geom_contacts(self, against: int | None = None) -> torch.Tensor:
        """(num_worlds, ngeom) bool: which geoms of each world are in a contact of the last
        physics substep; with `against`, in a contact with that geom (the ground). One scatter
        over the contact array that all worlds share (its first `nacon` rows are valid), with no
        host synchronisation. Contact sensors would give the same answer but are evaluated at
        every substep and cost about 20% of the physics."""
        ngeom = self.mj_model.ngeom
        valid = self._contact_rows < self.nacon  # (nconmax, 1)
        if against is not None:
            valid = valid & (self.contact_geom == against).any(dim=1, keepdim=True)
        flat = self.contact_worldid.view(-1, 1) * ngeom + self.contact_geom  # (nconmax, 2), int32
        # Invalid rows mark a spare last slot, which is cut off.
        index = torch.where(valid, flat, self._spare_geom_slot).long()
        hits = torch.zeros(self.num_worlds * ngeom + 1, dtype=torch.bool, device=self.device)
        hits.index_fill_(0, index.view(-1), True)
        return hits[:-1].view(self.num_worlds, ngeom)

    def count_contacts_excluding(self, geom: int) -> torch.Tensor:
        """(num_worlds,) float: the number of contacts of the last physics substep in each world
        that do not involve `geom`. With the terrain's geom: the robot's self-collisions."""
        valid = (self._contact_rows.view(-1) < self.nacon) & (self.contact_geom != geom).all(dim=1)
        counts = torch.zeros(self.num_worlds + 1, device=self.device)
        # Invalid rows count into a spare last world, which is cut off.
        world = torch.where(valid, self.contact_worldid, self.num_worlds).long()
        return counts.index_add_(0, world, valid.float())[:-1]

    def update_subtree_masses(self) -> None:
        """Recompute every body's subtree mass from the per-world `body_mass`, after an event
        changed it. MuJoCo computes subtree masses once, when it compiles the model; left at
        their nominal values, they put each world's subtree centres of mass (`subtree_com`) off,
        and with them the subtree momentum sensors. The dynamics do not depend on them."""
        if self._in_subtree is None:
            # in_subtree[j, b] = 1 where body j lies in the subtree of body b.
            m = self.mj_model
            in_subtree = torch.zeros(m.nbody, m.nbody, dtype=torch.float32)
            for body in range(m.nbody):
                ancestor = body
                while True:
                    in_subtree[body, ancestor] = 1.0
                    if ancestor == 0:
                        break
                    ancestor = int(m.body_parentid[ancestor])
            self._in_subtree = in_subtree.to(self.device)
        torch.matmul(self.model_field("body_mass"), self._in_subtree, out=self.model_field("body_subtreemass"))

    def model_field(self, name: str) -> torch.Tensor:
        """A zero-copy torch view of a model field; (num_worlds, ...) for per-world fields.
        Views are made once: building one costs host work on every call, and the model's
        arrays are never reallocated (the captured graph holds their pointers)."""
        view = self._model_views.get(name)
        if view is None:
            view = self._model_views[name] = wp.to_torch(getattr(self.model, name))
        return view

    def actuator_joints(self) -> list[str]:
        """Name of the joint (or other target) each actuator drives, in actuator order: the
        order of the action vector."""
        m = self.mj_model
        kinds = {
            mujoco.mjtTrn.mjTRN_JOINT: mujoco.mjtObj.mjOBJ_JOINT,
            mujoco.mjtTrn.mjTRN_JOINTINPARENT: mujoco.mjtObj.mjOBJ_JOINT,
            mujoco.mjtTrn.mjTRN_TENDON: mujoco.mjtObj.mjOBJ_TENDON,
            mujoco.mjtTrn.mjTRN_SITE: mujoco.mjtObj.mjOBJ_SITE,
            mujoco.mjtTrn.mjTRN_BODY: mujoco.mjtObj.mjOBJ_BODY,
        }
        names = []
        for i in range(m.nu):
            obj = kinds.get(mujoco.mjtTrn(int(m.actuator_trntype[i])))
            name = mujoco.mj_id2name(m, obj, int(m.actuator_trnid[i, 0])) if obj is not None else None
            names.append(name or f"actuator_{i}")
        return names

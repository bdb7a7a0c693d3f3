"""Where a run's memory goes (formerly the code string of `scripts/bench_startup.py --phases`):
the peak RSS after each piece of a run built as `train` builds it, piece by piece, in a fresh
process (`memory_phases`): the interpreter, `import torch`, `import warp, mujoco_warp`, mjrl and
the task, the scene, the env (Warp's kernels loaded, or compiled on a cold cache), the learner,
the first rollout and the first update. Linux only: it reads /proc/self/status.

Run as `python -m mjrl.tools.memory TASK NUM_ENVS`, this module is that process. Its first figure
is the bare interpreter's, so its top imports no more than that holds: `subprocess` and
`dataclasses`, a MiB each, are imported where they are used."""

from __future__ import annotations

import json
import sys
import time


def memory_phases(task: str, num_envs: int) -> list[dict]:
    """Per piece, in order: `phase`, `peak_rss_mib` (VmHWM), `rss_mib`, `anon_mib` (the process's
    own memory), `file_mib` (library pages mapped in, which the page cache's state moves) and
    `s`, the seconds since the process started, for `num_envs` envs of `task` on the CPU."""
    import subprocess

    child = [sys.executable, "-m", __name__, task, str(num_envs)]
    out = subprocess.run(child, capture_output=True, text=True, check=True)
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def _build_by_phases(task_name: str, num_envs: int) -> None:
    """`memory_phases`' child: build the run piece by piece, a JSON line after each."""
    start = time.monotonic()

    def peak(phase: str) -> None:
        with open("/proc/self/status") as status_file:
            status = dict(line.split(":", 1) for line in status_file)
        mib = {key: round(int(status[key].split()[0]) / 1024) for key in ("VmHWM", "VmRSS", "RssAnon", "RssFile")}
        print(json.dumps({"phase": phase, "peak_rss_mib": mib["VmHWM"], "rss_mib": mib["VmRSS"],
                          "anon_mib": mib["RssAnon"], "file_mib": mib["RssFile"],
                          "s": round(time.monotonic() - start, 2)}), flush=True)  # fmt: skip

    peak("python")
    import torch

    peak("import torch")
    import mujoco_warp  # noqa: F401 (imported for what it costs)
    import warp  # noqa: F401

    peak("import warp, mujoco_warp")
    import dataclasses

    from mjrl.distributed.context import single_process
    from mjrl.envs import VecEnv
    from mjrl.rl import make_algorithm
    from mjrl.rl.algorithm import rollout_step
    from mjrl.tasks import load_task

    task = load_task(task_name)
    cfg = dataclasses.replace(task.env_cfg, num_envs=num_envs)
    peak("import mjrl, load the task")
    spec = task.build(cfg)
    peak("scene (MJCF, terms)")
    env = VecEnv(cfg, spec, torch.device("cpu"), seed=1)
    peak("env (kernels loaded or compiled, first reset)")
    steps = task.agent_cfg.runner.num_steps_per_env  # the task's PPO, as `train` builds it
    algorithm = make_algorithm(task.agent_cfg, env, steps, single_process("cpu"), seed=1)
    peak("learner")
    obs = env.obs
    for _ in range(steps):
        obs = rollout_step(env, algorithm, obs)
    algorithm.compute_returns(obs)
    peak("first rollout")
    algorithm.update()
    peak("first update")


if __name__ == "__main__":  # `memory_phases`' child: TASK NUM_ENVS
    _build_by_phases(sys.argv[1], int(sys.argv[2]))

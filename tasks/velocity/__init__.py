"""Velocity tracking for legged robots: the task's build in `task.py`, its config in
`config.py`, its terms by kind (`commands.py`, `state.py`, `rewards.py`, `gait.py`,
`curriculum.py`, `evaluation.py`), one module per robot (`go1.py`, `mule.py`, `humanoid.py`)
and the tasks registered in `registry.py`. This file stays empty, so that listing tasks
imports no simulator."""

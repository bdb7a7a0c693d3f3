"""Velocity tracking for legged robots: the task's build in `task.py`, its config in
`config.py`, its terms by kind (`commands.py`, `state.py`, `rewards.py`, `gait.py`,
`curriculum.py`, `evaluation.py`), one module per robot it trains (`go1.py`, `mule.py`,
`humanoid.py`: the robots themselves are in `mjrl.tasks.robots`)
and the tasks registered in `registry.py`. This file stays empty, so that listing tasks
imports no simulator."""

"""The packages are found, not listed: a task package added under tasks/ installs as
mjrl.tasks.<name> (pyproject.toml holds everything else)."""

from setuptools import find_packages, setup

setup(
    packages=[
        *find_packages("src"),
        "mjrl.tasks",
        *(f"mjrl.tasks.{name}" for name in find_packages("tasks")),
        "mjrl.presets",
    ],
    package_dir={"": "src", "mjrl.tasks": "tasks", "mjrl.presets": "configs"},
)

"""What counts as a shipped task learned: per task, the figures `play` must report under each
command setting (walking, for the legged robots: the issues' definitions) and the CPU preset it
is trained to them with; and the first periodic evaluation of a run that meets them. The
benchmarks under scripts/ train to these targets and check them (bench_locomotion.py,
bench_seeds.py)."""

from __future__ import annotations

import dataclasses
import math

GO1, HUMANOID = "Mjrl-Velocity-Flat-Quadruped", "Mjrl-Velocity-Flat-Humanoid"
ROUGH, STUDENT = "Mjrl-Velocity-Rough-Quadruped", "Mjrl-Velocity-Flat-Quadruped-Student"
NO_LIMIT = math.inf
Target = tuple[str, str, float, float]


@dataclasses.dataclass(frozen=True)
class Profile:
    """How a robot is trained on the CPU and what counts as walking: the issue's definition."""

    preset: str | None
    """The config preset the task trains with on the CPU (None: the task's own defaults)."""
    forward: tuple[float, float]
    """Range of the forward commands (m/s) of the "forward" setting (no lateral or yaw command)."""
    targets: tuple[Target, ...]
    """(command setting, figure, lowest and largest allowed value). Settings: "forward", "full"
    (the task's own command distribution), both with the training's pushes, and "zero" (told to
    stand, without pushes: how far the robot drifts by itself)."""
    reported: tuple[str, ...] = ()
    """Command settings reported beside the targets' without a target of their own: "forward,
    no pushes" (the forward setting as Isaac Lab's and mjlab's play configs run it)."""

    def settings(self) -> dict[str, list[str]]:
        """The command settings the targets use and those reported, each with its `play` flags."""
        low, high = self.forward
        no_pushes = ["--env.randomization.push-velocity", "0"]
        flags = {
            "forward": ["--env.commands.lin-vel-x", str(low), str(high)],
            "forward, no pushes": ["--env.commands.lin-vel-x", str(low), str(high), *no_pushes],
            "full": [],
            "zero": ["--env.commands.lin-vel-x", "0", "0", *no_pushes],
        }
        still = ["--env.commands.lin-vel-y", "0", "0", "--env.commands.yaw-rate", "0", "0"]
        used = {cmds for cmds, *_ in self.targets} | set(self.reported)
        return {cmds: f + (still if cmds != "full" else []) for cmds, f in flags.items() if cmds in used}


QUADRUPED_PROFILE = Profile(
    "cpu-locomotion",
    (0.5, 1.0),
    (
        ("forward", "mean_lin_vel_error", -NO_LIMIT, 0.20),
        ("forward", "early_termination_rate", -NO_LIMIT, 0.0),
        ("full", "mean_lin_vel_error", -NO_LIMIT, 0.30),
        ("full", "mean_yaw_rate_error", -NO_LIMIT, 0.40),
        ("full", "early_termination_rate", -NO_LIMIT, 0.05),
    ),
)
PROFILES = {
    HUMANOID: Profile(
        "cpu-humanoid",
        (0.3, 0.8),
        (
            ("forward", "mean_lin_vel_error", -NO_LIMIT, 0.15),
            ("forward", "mean_yaw_rate_error", -NO_LIMIT, 0.20),
            ("forward", "early_termination_rate", -NO_LIMIT, 0.0),
            # A real gait: each foot down 35-75 % of the time, swings of at least 0.25 s.
            *(
                check
                for foot in ("left_foot", "right_foot")
                for check in (
                    ("forward", f"mean_foot_contact_fraction/{foot}", 0.35, 0.75),
                    ("forward", f"mean_swing_time/{foot}", 0.25, NO_LIMIT),
                )
            ),
            ("full", "early_termination_rate", -NO_LIMIT, 0.05),
            # Told to stand: no falls, and the base ends at most 0.2 m from where it began.
            ("zero", "early_termination_rate", -NO_LIMIT, 0.0),
            ("zero", "mean_displacement", -NO_LIMIT, 0.2),
        ),
        # The humanoid is pushed every 1-3 s (the quadrupeds every 8-12 s): what that costs
        # its tracking.
        reported=("forward, no pushes",),
    ),
    # Rough terrain: the quadruped's targets on flat ground; its own per terrain type: ROUGH_SUCCESS.
    ROUGH: dataclasses.replace(QUADRUPED_PROFILE, preset="cpu-rough"),
    # A student without base velocity (issue 23): the definition of one that works.
    STUDENT: Profile(
        "cpu-locomotion",
        (0.5, 1.0),
        (("forward", "mean_lin_vel_error", -NO_LIMIT, 0.25), ("forward", "early_termination_rate", -NO_LIMIT, 0.0)),
        reported=("full",),
    ),
    # The cart-poles: a return of 900 of the 1,000 a perfect episode earns (the quick start's
    # promise for Balance); Swingup's PPO ends its default budget at 700-730.
    "Mjrl-Cartpole-Balance": Profile(None, (0.0, 0.0), (("full", "mean_return", 900.0, NO_LIMIT),)),
    "Mjrl-Cartpole-Swingup": Profile(None, (0.0, 0.0), (("full", "mean_return", 700.0, NO_LIMIT),)),
}


# The rough quadruped's success rate on the hardest row, per terrain type: the "climbs".
ROUGH_SUCCESS = {"rough": 0.8, "slope_up": 0.8, "slope_down": 0.8, "stairs_down": 0.6, "stairs_up": 0.5}


def profile(task: str) -> Profile:
    """The task's profile: its own, else the quadrupeds'."""
    return PROFILES.get(task, QUADRUPED_PROFILE)


def full_set_targets(targets: tuple[Target, ...]) -> list[Target]:
    """The targets of the full command distribution, the only ones the periodic evaluation sees."""
    return [target for target in targets if target[0] == "full"]


def first_eval_meeting_targets(lines: list[dict], targets: tuple[Target, ...]) -> dict | None:
    """The first periodic evaluation (full command distribution) within the full-set targets."""
    full = full_set_targets(targets)
    for line in lines:
        if all(low <= line.get(f"eval/{figure}", math.nan) <= high for _, figure, low, high in full):
            return line
    return None


def bounds(low: float, high: float) -> str:
    """A target's allowed range, as a report writes it."""
    if low == -NO_LIMIT:
        return f"≤ {high}"
    return f"≥ {low}" if high == NO_LIMIT else f"in [{low}, {high}]"

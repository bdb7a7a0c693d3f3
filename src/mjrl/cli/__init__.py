"""Command-line entry points: train, play, mjrl."""

import os

# On the CPU the PPO update runs on several threads while the rollout runs on one (see
# runner.Runner). OpenMP's default is to spin while its threads wait; when another process holds
# a core (a second rank, a test run) the spinning threads steal it: measured here, 2 threads
# took 3.4 s for an update that 1 thread did in 2.9 s, and 2.25 s with passive waiting. This
# must be set before torch loads its OpenMP runtime; an explicit setting wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

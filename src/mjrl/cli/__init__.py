"""Command-line entry points: train, play, mjrl.

OpenMP keeps libgomp's default waiting (spin a little, then sleep). Until 2026-11-28 the
commands set `OMP_WAIT_POLICY=PASSIVE`, measured once against another process holding a core;
on a quiet 2-core machine it slowed every update: Balance's PPO update 0.18 s -> 0.10 s per
iteration without it, the quadruped's 1.04 s -> 0.79 s, SAC's Balance update 1.42 s -> 0.55 s
(docs/benchmarks.md, "OpenMP's waiting"). Several ranks on one machine run one torch thread
each, so nothing spins against them; an explicit `OMP_WAIT_POLICY` in the environment still wins.
"""

"""RL layer: PPO, its networks and its observation normaliser. Knows nothing of simulators."""

"""mjrl: distributed PPO for robots simulated with MuJoCo-Warp."""

__version__ = "0.1.0"

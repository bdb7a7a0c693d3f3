"""The cart-pole: balance (`Mjrl-Cartpole-Balance`) and swing-up (`Mjrl-Cartpole-Swingup`),
defined in `task.py` and registered in `registry.py`. This file stays empty, so that listing
tasks imports no simulator."""

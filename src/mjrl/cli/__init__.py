"""Command-line entry points: train, play, mjrl."""

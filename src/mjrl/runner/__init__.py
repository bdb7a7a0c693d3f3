"""Runner layer: the training loop, run directories, checkpoints and metric logging."""

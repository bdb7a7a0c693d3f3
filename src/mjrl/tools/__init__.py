"""What one does with a trained policy or a finished run: evaluate it (`evaluate`, `play`),
export it, film it (`video`) and plot runs (`plots`). `trained` rebuilds an env and a policy from
a checkpoint, the one way every tool does. The training loop (`mjrl.runner`) uses evaluation,
export and video too; nothing here imports the runner."""

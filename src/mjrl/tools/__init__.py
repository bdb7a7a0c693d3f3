"""What one does with a trained policy or a finished run: evaluate it (`evaluate`, `play`),
export it, film it (`video`), plot runs (`plots`) and judge them against a task's targets
(`targets`). `trained` rebuilds an env and a policy from a checkpoint, the one way every tool
does; `commands` drives mjrl's console commands from Python, as the benchmarks do. The training
loop (`mjrl.runner`) uses evaluation, export and video too; nothing here imports the runner."""

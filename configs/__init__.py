"""Named presets: partial configs applied with `train TASK --preset NAME` before other flags."""

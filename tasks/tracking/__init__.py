"""Motion tracking: a robot imitates reference motions (`task.py`), its terms by kind
(observations, rewards, terminations, evaluation), the motions on the device and where
episodes start in them (`library.py`)."""

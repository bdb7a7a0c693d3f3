"""The cart-pole's tasks (definitions in `__init__.py`, imported when asked for)."""

from mjrl.tasks import register_task

register_task(
    "Mjrl-Cartpole-Balance", "mjrl.tasks.cartpole.task:BALANCE", "keep a pole upright on a cart (dm_control reward)"
)
register_task("Mjrl-Cartpole-Swingup", "mjrl.tasks.cartpole.task:SWINGUP", "swing a hanging pole up, then balance it")
register_task(
    "Mjrl-Cartpole-Balance-Positions",
    "mjrl.tasks.cartpole.task:BALANCE_POSITIONS",
    "Balance observing positions only: a memory (LSTM) infers the motion",
)

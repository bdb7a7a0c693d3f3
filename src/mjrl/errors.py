"""The one exception type that means "the user asked for something we cannot do"."""


class UsageError(Exception):
    """Bad input from the user: the CLI prints the message on one line and exits with code 2."""

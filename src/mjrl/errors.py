"""The one exception type that means "the user asked for something we cannot do"."""


class UsageError(Exception):
    """Bad input from the user: the CLI prints the message on one line and exits with code 2."""


class SharedUsageError(UsageError):
    """Bad input that every rank of a job learned through a collective (rank 0 found it and
    broadcast it): each rank exits 2 by itself, so none needs to tell the others."""

"""The one exception type that means "the user asked for something we cannot do"."""

import errno

RESUME_HINT = "continue with --resume True"
"""What to do after a write a run needed failed: its checkpoints and metrics are whole."""


class UsageError(Exception):
    """Bad input from the user: the CLI prints the message on one line and exits with code 2."""


class SharedUsageError(UsageError):
    """Bad input that every rank of a job learned through a collective (rank 0 found it and
    broadcast it): each rank exits 2 by itself, so none needs to tell the others."""


class OutputError(UsageError):
    """A file mjrl writes was refused (disk full, over quota, read-only, over a file-size limit,
    no permission): one line naming the path and the cause, exit code 2, and nothing
    half-written left behind. Like bad input, the user fixes it and runs again."""


def cannot_write(path: object, exc: OSError, then: str = "run it again") -> OutputError:
    """The one line for a write the OS refused, with what fixes its cause."""
    cause = exc.strerror or type(exc).__name__
    return OutputError(f"cannot write {path}: {cause}; {_fix(exc.errno)}, then {then}")


def _fix(code: int | None) -> str:
    if code in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return "free space or raise the limit"
    if code in (errno.ENOTDIR, errno.EEXIST):
        return "a file stands where a folder must be: remove it or choose another path"
    if code == errno.EISDIR:
        return "a folder stands where the file must be: name a file (inside it, or elsewhere)"
    if code in (errno.EACCES, errno.EPERM, errno.EROFS):
        return "fix the permissions or choose another path"
    return "choose another path"

"""The error types: raised anywhere, printed as one line at the CLI boundary.

Exit codes (docs/cli.md): 2 for a usage error, 3 for evidence that cannot be read or a
source that cannot be reached. 1 is `--exit-status` for a failed job, never an error.
"""

USAGE_EXIT = 2
EVIDENCE_EXIT = 3


class ZdebugError(Exception):
    """A user-facing failure: `message` is shown as-is, `exit_code` is the process exit."""

    def __init__(self, message: str, exit_code: int = USAGE_EXIT):
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code

    def __str__(self) -> str:
        return self.message


class UsageError(ZdebugError):
    """Bad arguments or options: exit 2."""

    def __init__(self, message: str):
        super().__init__(message, USAGE_EXIT)


class EvidenceError(ZdebugError):
    """Unreadable evidence (a bad file, a missing job) or an unreachable source: exit 3."""

    def __init__(self, message: str):
        super().__init__(message, EVIDENCE_EXIT)

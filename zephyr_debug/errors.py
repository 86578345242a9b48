"""The one error type: raised anywhere, printed as one line at the CLI boundary."""


class ZdebugError(Exception):
    """A user-facing failure: `message` is shown as-is, `exit_code` is the process exit."""

    def __init__(self, message: str, exit_code: int = 2):
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code

    def __str__(self) -> str:
        return self.message

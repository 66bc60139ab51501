"""The one exception type users see: its message is a sentence that says what to do next."""


class HelixError(Exception):
    """A user-facing failure. The CLI prints ``error: <message>`` and exits 1, no traceback."""

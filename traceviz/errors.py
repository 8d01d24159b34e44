"""The exceptions the CLI turns into a single readable line."""


class TraceVizError(Exception):
    """A problem with the user's input or environment, worded for the user."""


class Terminated(BaseException):
    """SIGTERM arrived: unwind like Ctrl-C (outputs in progress are removed), exit 143."""

"""The one exception type the CLI turns into a single readable line."""


class TraceVizError(Exception):
    """A problem with the user's input or environment, worded for the user."""

"""The exceptions the CLI turns into a single readable line, with their exit status.

Library code words its errors for any caller: an option is named as the keyword it is
(``force``); the CLI spells it as the flag (``--force``) through ``cli_text``.
"""

from __future__ import annotations


class TraceVizError(Exception):
    """A problem with the user's input or environment, worded for the user.

    ``option``: the setting the problem is about; with ``action``, the setting that
    would get past it ("already exists" + option ``force``, action "replace it").
    """

    exit_code = 2

    def __init__(self, message: str, *, option: str | None = None,
                 action: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.option = option
        self.action = action

    def __str__(self) -> str:
        return self._text(self.option)

    def cli_text(self) -> str:
        return self._text(self.option and "--" + self.option.replace("_", "-"))

    def _text(self, name: str | None) -> str:
        if name is None:
            return self.message
        if self.action:
            how = f"use {name}" if name.startswith("--") else f"pass {name}=True"
            return f"{self.message} ({how} to {self.action})"
        return f"{name}: {self.message}"


class InputError(TraceVizError):
    """The input cannot be read as a trace (exit 2)."""


class UsageError(TraceVizError):
    """An option or a combination of options that cannot work (exit 2)."""


class RunFailed(TraceVizError):
    """A capture's runner failed: the variant crashed, ran out of memory, was killed
    (exit 2: the workload, not traceviz, failed; ``runner.log`` says why)."""


class Terminated(BaseException):
    """SIGTERM arrived: unwind like Ctrl-C (outputs in progress are removed), exit 143."""

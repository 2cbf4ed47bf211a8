"""The exception hierarchy of anvil-ledger.

Every error the toolkit raises on purpose derives from :class:`Error`, split by fault:
bad input (:class:`InvalidArtifact`, :class:`SchemaError`), verification and gating
(:class:`VerificationError`, :class:`GateError`) and runners (:class:`RunnerError`).
Misuse by a caller raises builtins instead.
"""

from __future__ import annotations

import re
import sys
from typing import ClassVar, NoReturn

__all__ = [
    "ContainerError",
    "Error",
    "GPUProbeError",
    "GateError",
    "InvalidArtifact",
    "RunnerError",
    "SchemaError",
    "ServerError",
    "Terminated",
    "UsageError",
    "VerificationError",
    "printable",
]

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` with control characters escaped (``\\n``, ``\\x1b``): a file name or a
    value from the evidence can never start a new line or drive the terminal."""
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], text)


class Error(Exception):
    """Base class of every anvil-ledger error.

    Attributes:
        exit_status: the command line's exit status for it: 1, a refusal about the
            evidence or a failed operation; 2 (:class:`UsageError`), unusable input.
    """

    exit_status: ClassVar[int] = 1

    def diagnostics(self) -> str:
        """Returns a one-line, human-readable explanation of the error."""
        text = str(self) or self.__class__.__name__
        return printable(" ".join(text.split()))

    def log_and_exit(self, raise_error: bool = False) -> NoReturn:
        """Prints the diagnostics to stderr and exits with :attr:`exit_status`.

        Args:
            raise_error: re-raise instead of exiting (the CLI's ``--verbose``).
        """
        if raise_error:
            raise self
        print(f"error: {self.diagnostics()}", file=sys.stderr)
        sys.exit(self.exit_status)


class UsageError(Error):
    """Unusable input: a bad argument, a missing or unreadable path, a malformed file given
    as an argument, or an output that would replace existing files (exit status 2)."""

    exit_status = 2


class Terminated(BaseException):
    """SIGTERM, raised where the command is, so that its outputs are cleaned up like after
    Ctrl-C (exit status 143)."""


class InvalidArtifact(Error):
    """An artifact could not be read: too large, not UTF-8, not strict JSON, ...

    Attributes:
        code: the stable finding code of the defect (``duplicate-key``, ``json-bom``, ...).
        pointer: the JSON pointer of the defect inside the document, ``""`` for the whole.
    """

    def __init__(self, message: str, *, code: str = "json-syntax", pointer: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.pointer = pointer


class SchemaError(Error):
    """A document does not satisfy its schema, or names an unknown schema.

    Attributes:
        code: ``schema-invalid``, ``schema-unknown`` or ``schema-undeclared``.
        pointer: the JSON pointer of the first offending value.
    """

    def __init__(self, message: str, *, code: str = "schema-invalid", pointer: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.pointer = pointer


class VerificationError(Error):
    """Evidence failed verification (a command that gives up on the first failure)."""


class GateError(Error):
    """A gate or promotion policy refused."""


class RunnerError(Error):
    """A runner could not produce evidence."""


class ServerError(RunnerError):
    """The serving endpoint misbehaved in a way a runner cannot record as a request result."""


class GPUProbeError(RunnerError):
    """NVML could not be queried."""


class ContainerError(RunnerError):
    """The container engine could not be queried or refused an operation."""

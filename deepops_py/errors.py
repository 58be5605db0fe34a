"""The one error type users see, and the exit codes it maps to.

Everything a user can cause (bad inventory, unreachable hosts, a failed run)
raises ``DeepopsError`` or a subclass; ``cli.main`` turns it into a message on
stderr and an exit code. Tracebacks are shown only with ``--debug``.
"""

from __future__ import annotations

from ansible_collections.deepops.cluster.plugins.plugin_utils.problems import Problem

EXIT_OK = 0
EXIT_FAILURE = 1  # a host problem or a failed run
EXIT_INVALID_INPUT = 2  # nothing was touched
EXIT_BUSY = 75  # another run holds the inventory's lock (sysexits' EX_TEMPFAIL: try again later)

__all__ = ["EXIT_BUSY", "EXIT_FAILURE", "EXIT_INVALID_INPUT", "EXIT_OK", "DeepopsError", "InputError", "Interrupted", "Problem"]


class DeepopsError(Exception):
    """A failure the user can act on; carries its own exit code."""

    exit_code = EXIT_FAILURE

    def __init__(self, message: str, *, exit_code: int | None = None, problems: tuple[Problem, ...] | list[Problem] = ()):
        super().__init__(message)
        self.message = message
        self.problems = tuple(problems)
        if exit_code is not None:
            self.exit_code = exit_code

    def render(self) -> str:
        lines = [self.message]
        lines.extend(f"  - {problem}" for problem in self.problems)
        return "\n".join(lines)


class InputError(DeepopsError):
    """Invalid input (inventory, options, variables): exit 2, no host touched."""

    exit_code = EXIT_INVALID_INPUT


class Interrupted(KeyboardInterrupt):
    """A run stopped by SIGINT, SIGTERM or SIGHUP, after its children were
    ended; the command exits 128 + the signal's number, as a shell reports it."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum

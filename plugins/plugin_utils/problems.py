"""What is wrong with user input: one ``Problem`` per finding, raised together."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """One finding about user input: where it is, which key, what is wrong."""

    file: str
    scope: str  # "host gpu01", "group slurm_compute", or "" for the file itself
    key: str
    message: str

    def __str__(self) -> str:
        where = ": ".join(part for part in (self.file, self.scope, self.key) if part)
        return f"{where}: {self.message}" if where else self.message


class InvalidInventory(Exception):
    """The inventory is invalid; ``problems`` lists every finding."""

    def __init__(self, message: str, problems: Iterable[Problem] = ()):
        super().__init__(message)
        self.message = message
        self.problems = tuple(problems)

    def render(self) -> str:
        return "\n".join([self.message, *(f"  - {problem}" for problem in self.problems)])


class BrokenContent(Exception):
    """A file shipped with the collection (a role's argument specs) cannot be read: a defect, not user input."""

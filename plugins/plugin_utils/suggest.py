"""'Did you mean ...?' for names a user mistyped (groups, variables, keys)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

# Close enough to be a typo, far enough that site variables such as
# ``slurm_site_notes`` are not mistaken for ``slurm_partitions``.
SIMILARITY_CUTOFF = 0.8


def _normalise(name: str) -> str:
    return name.lower().replace("-", "_")


def closest(name: str, candidates: Iterable[str]) -> str | None:
    """The candidate ``name`` most likely meant, or None when nothing is close.

    Hyphen/underscore and case confusion are caught before fuzzy matching,
    since those are the commonest slips and difflib scores them unevenly.
    """
    candidates = [candidate for candidate in candidates if candidate != name]
    normalised = _normalise(name)
    for candidate in candidates:
        if _normalise(candidate) == normalised:
            return candidate
    matches = difflib.get_close_matches(name, candidates, n=1, cutoff=SIMILARITY_CUTOFF)
    if matches:
        return matches[0]
    # A lower-cased comparison catches 'Slurm_Partitions'-style mixes with other typos.
    lowered = {candidate.lower(): candidate for candidate in candidates}
    matches = difflib.get_close_matches(normalised, list(lowered), n=1, cutoff=SIMILARITY_CUTOFF)
    return lowered[matches[0]] if matches else None


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """' — did you mean X?' or '' (ready to append to a message)."""
    match = closest(name, candidates)
    return f" — did you mean {match}?" if match else ""

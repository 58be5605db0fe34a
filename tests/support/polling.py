"""Waiting for a cluster to reach a state, for the integration tests."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(predicate: Callable[[], T], timeout: float, step: float = 2.0) -> T:
    """PREDICATE's first truthy value within TIMEOUT seconds, polled every STEP; else its last value."""
    deadline = time.monotonic() + timeout
    last = predicate()
    while not last and time.monotonic() < deadline:
        time.sleep(step)
        last = predicate()
    return last

"""Suite-wide rules.

With DEEPOPS_REQUIRE_INTEGRATION=1 (set by scripts/test.sh, so by CI) a
skipped test is reported as a failure: an integration test that did not run
must never look like a pass.
"""

from __future__ import annotations

import os

import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get("DEEPOPS_REQUIRE_INTEGRATION") == "1":
        report.outcome = "failed"
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.longrepr = f"skipped, which counts as a failure here (DEEPOPS_REQUIRE_INTEGRATION=1): {reason}"

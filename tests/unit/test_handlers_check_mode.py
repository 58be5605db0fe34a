"""deepops plan (check mode) must survive every handler it notifies.

A handler that retries (``until``) a command or request fails in check mode:
the module is skipped there, so the condition never holds and the retries
fail the play (the hardening issue's "plan exits 1 whenever slurm.conf would
change"). Every such handler either runs for real in check mode
(``check_mode: false``, read-only commands only) or is skipped there.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
HANDLER_FILES = sorted((REPO / "roles").glob("*/handlers/main.yml"))


def _retrying_handlers():
    for path in HANDLER_FILES:
        for handler in yaml.safe_load(path.read_text()) or []:
            if "until" in handler:
                yield pytest.param(handler, id=f"{path.parts[-3]}: {handler['name']}")


@pytest.mark.parametrize("handler", list(_retrying_handlers()))
def test_a_retrying_handler_is_safe_in_check_mode(handler):
    when = handler.get("when", "")
    conditions = when if isinstance(when, list) else [when]
    skipped_in_check_mode = any("not ansible_check_mode" in str(condition) for condition in conditions)
    assert handler.get("check_mode") is False or skipped_in_check_mode, handler["name"]


def test_there_are_retrying_handlers_to_check():
    assert len(list(_retrying_handlers())) >= 10

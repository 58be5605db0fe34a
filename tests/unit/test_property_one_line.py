"""Property (hardening issue): any text given to any string-typed variable of the shipped roles is
either refused by the inventory check or is exactly one line without control characters, so it can
add no line to a file or command line a role writes (slurm.conf's and gres.conf's renderers refuse
such values again: test_slurm_conf_injection.py)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.deepops.cluster.plugins.plugin_utils import schema

KNOWN = schema.known_variables()  # the shipped roles' argument specs
TEXT_VARIABLES = sorted(name for name, spec in KNOWN.items() if spec.type in ("str", "path", "raw"))
LIST_OF_TEXT = sorted(name for name, spec in KNOWN.items() if spec.type == "list" and spec.elements == "str")
# Line breaks of every kind str.splitlines() knows, control characters, and ordinary text around them.
TEXTS = st.text(alphabet=st.sampled_from(list("ab=# \t\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029\x00\x7f;$()") + ["x"]),
                max_size=12)


def _one_line(text: str) -> bool:
    return text.splitlines() in ([], [text]) and not any(ord(char) < 32 or ord(char) == 127 for char in text)


def test_the_roles_have_text_variables_to_check():
    assert len(TEXT_VARIABLES) > 50 and LIST_OF_TEXT


@settings(max_examples=400, deadline=None)
@given(name=st.sampled_from(TEXT_VARIABLES), text=TEXTS)
def test_a_text_is_refused_or_one_line(name, text):
    problems = schema.check_variables({name: text}, KNOWN)
    assert problems or _one_line(text), (name, text)


@settings(max_examples=200, deadline=None)
@given(name=st.sampled_from(LIST_OF_TEXT), texts=st.lists(TEXTS, max_size=3))
def test_every_text_of_a_list_is_refused_or_one_line(name, texts):
    problems = schema.check_variables({name: texts}, KNOWN)
    assert problems or all(_one_line(text) for text in texts), (name, texts)

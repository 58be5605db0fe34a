"""deepops.cluster.block_in_place: a role skips blockinfile only where the module
itself would change nothing, so the filter is checked against the module.
deepops.cluster.block_text: the block a file holds, found as the module finds it."""

from __future__ import annotations

import json

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.deepops.cluster.plugins.filter.blockinfile import block_in_place, block_text
from local_playbook import run_local_playbook

MARKER = "# {mark} deepops test"
BLOCK = "10.0.0.1 ctl01\n10.0.0.2 gpu01"
IN_PLACE = f"127.0.0.1 localhost\n# BEGIN deepops test\n{BLOCK}\n# END deepops test\n"

# (file content, block, state): blockinfile's own answer decides what the filter must say.
CASES = [
    (IN_PLACE, BLOCK, "present"),
    (IN_PLACE, BLOCK + "\n", "present"),
    (IN_PLACE, "10.0.0.1 ctl01", "present"),
    (IN_PLACE + "# trailing\n", BLOCK, "present"),
    ("127.0.0.1 localhost\n", BLOCK, "present"),
    ("127.0.0.1 localhost", BLOCK, "present"),
    ("", BLOCK, "present"),
    (IN_PLACE.replace("# END deepops test\n", ""), BLOCK, "present"),
    (f"# END deepops test\n{BLOCK}\n# BEGIN deepops test\n", BLOCK, "present"),
    (IN_PLACE + IN_PLACE, BLOCK, "present"),
    (IN_PLACE.replace("10.0.0.2", "10.0.0.9"), BLOCK, "present"),
    (IN_PLACE, BLOCK, "absent"),
    (IN_PLACE, "", "present"),
    ("127.0.0.1 localhost\n", BLOCK, "absent"),
    ("127.0.0.1 localhost", BLOCK, "absent"),
    ("", "", "absent"),
]


def test_the_filter_agrees_with_blockinfile(tmp_path):
    playbook = tmp_path / "play.yml"
    files = []
    for index, (content, _block, _state) in enumerate(CASES):
        path = tmp_path / f"case{index}"
        path.write_text(content)
        files.append(str(path))
    items = [{"path": path, "block": block, "state": state} for path, (_c, block, state) in zip(files, CASES)]
    playbook.write_text(
        "- hosts: localhost\n  connection: local\n  gather_facts: false\n  tasks:\n"
        "    - ansible.builtin.blockinfile:\n"
        f"        path: '{{{{ item.path }}}}'\n        marker: '{MARKER}'\n"
        "        block: '{{ item.block }}'\n        state: '{{ item.state }}'\n"
        "      check_mode: true\n"
        f"      loop: {json.dumps(items)}\n"
    )
    [task] = run_local_playbook(playbook)
    module_changed = [result["changed"] for result in task["hosts"]["localhost"]["results"]]
    filter_in_place = [block_in_place(content, MARKER, block, state) for content, block, state in CASES]
    assert [not changed for changed in module_changed] == filter_in_place
    # The cases cover both answers in both states.
    assert {(state, in_place) for (_c, _b, state), in_place in zip(CASES, filter_in_place)} == {
        ("present", True), ("present", False), ("absent", True), ("absent", False)}


def test_an_unread_file_is_not_in_place():
    assert block_in_place(None, MARKER, BLOCK) is False


@pytest.mark.parametrize(("marker", "state"), [("# deepops", "present"), (None, "present"), (MARKER, "gone")])
def test_bad_arguments_are_refused(marker, state):
    with pytest.raises(AnsibleFilterError):
        block_in_place(IN_PLACE, marker, BLOCK, state)


@pytest.mark.parametrize(("content", "text"), [
    (IN_PLACE, BLOCK + "\n"),
    (IN_PLACE.replace("10.0.0.2", "10.0.0.9") + IN_PLACE, BLOCK + "\n"),  # the last markers, as blockinfile
    (IN_PLACE.replace("# END deepops test\n", ""), ""),
    (f"# END deepops test\n{BLOCK}\n# BEGIN deepops test\n", ""),
    ("# BEGIN deepops test\n# END deepops test\n", ""),
    ("127.0.0.1 localhost\n", ""),
    (None, ""),  # not read
])
def test_block_text_is_what_the_file_holds_between_the_markers(content, text):
    assert block_text(content, MARKER) == text


def test_block_text_refuses_a_marker_without_mark():
    with pytest.raises(AnsibleFilterError):
        block_text(IN_PLACE, "# deepops")

"""Jinja filter that lets a role skip ansible.builtin.blockinfile where the file,
read earlier in the run by deepops.cluster.host_reads, already is what the
module would leave: in a re-run that is every time, and each module call saved
is a module start on the host (about a tenth of a second).

- ``content | deepops.cluster.block_in_place(marker, block, state='present')``
  -> true when blockinfile with that marker and block (default insertafter EOF,
  no extra newlines) would change nothing in a file holding ``content``;
  ``content`` none (the file was not read, or does not exist) is false, so the
  task runs as before.
- ``content | deepops.cluster.block_text(marker)`` -> the block's text as the file
  holds it now (what blockinfile would replace), "" when it has none.

It decides as blockinfile does (ansible-core 2.19): with both marker lines in
the file, the lines from the last begin marker to the last end marker must
be exactly the block's; with either missing, ``present`` would insert and
``absent`` changes nothing, unless the file's last line lacks its newline
(blockinfile adds one). Any doubt counts as a change, so the task runs.
"""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleFilterError


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def block_in_place(content: Any, marker: Any, block: Any = "", state: str = "present") -> bool:
    if not isinstance(marker, str) or "{mark}" not in marker:
        raise AnsibleFilterError(f"block_in_place expects a marker with {{mark}}, got {marker!r}")
    if state not in ("present", "absent"):
        raise AnsibleFilterError(f"block_in_place expects state present or absent, got {state!r}")
    if not isinstance(content, str):
        return False
    block = block if isinstance(block, str) else ""
    begin, end = _marker_lines(marker)
    lines = _lines(content)
    first, last = _block_bounds(lines, begin, end)
    if state == "absent" or not block:
        if first is None or last is None:
            return not content or content.endswith("\n")
        return False
    wanted = [begin] + _lines(block if block.endswith("\n") else block + "\n") + [end]
    return first is not None and last is not None and first < last and lines[first:last + 1] == wanted


def block_text(content: Any, marker: Any) -> str:
    if not isinstance(marker, str) or "{mark}" not in marker:
        raise AnsibleFilterError(f"block_text expects a marker with {{mark}}, got {marker!r}")
    if not isinstance(content, str):
        return ""
    lines = _lines(content)
    first, last = _block_bounds(lines, *_marker_lines(marker))
    if first is None or last is None or first > last:
        return ""
    return "".join(lines[first + 1:last])


def _marker_lines(marker: str) -> tuple[str, str]:
    return marker.replace("{mark}", "BEGIN") + "\n", marker.replace("{mark}", "END") + "\n"


def _block_bounds(lines: list[str], begin: str, end: str) -> tuple[int | None, int | None]:
    """The indexes of the last begin and the last end marker line, as blockinfile finds them."""
    first = last = None
    for index, line in enumerate(lines):
        if line == begin:
            first = index
        if line == end:
            last = index
    return first, last


class FilterModule:
    """deepops blockinfile filter."""

    def filters(self) -> dict[str, Any]:
        return {"block_in_place": block_in_place, "block_text": block_text}

"""Action plugin deepops.cluster.managed_files: many files and directories in one module call.

Every module call costs a host a Python start and the import of its modules
(a quarter of a second of CPU); a role that writes eight files with eight
file/copy/template tasks pays that eight times. This plugin checks all the
entries on the controller, renders their templates and reads their files here,
and sends everything to the host in one call of the module
(plugins/modules/managed_files.py, which also documents the arguments).

Nothing is sent when an argument is wrong: the task fails with every problem,
each naming its entry's path.

Nothing is sent either where every entry is as the run's first read found it
and nothing in the run has changed since (plugins/plugin_utils/managed_state.py).
"""

from __future__ import annotations

import base64
import os
import posixpath
import re
from typing import Any

from ansible.errors import AnsibleError, AnsibleFileNotFound
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase
from ansible.template import generate_ansible_template_vars, trust_as_template
from ansible_collections.deepops.cluster.plugins.plugin_utils import managed_state, read_requests, run_changes
from ansible_collections.deepops.cluster.plugins.plugin_utils.suggest import did_you_mean
from jinja2.defaults import (
    BLOCK_END_STRING,
    BLOCK_START_STRING,
    COMMENT_END_STRING,
    COMMENT_START_STRING,
    VARIABLE_END_STRING,
    VARIABLE_START_STRING,
)

MODULE = "deepops.cluster.managed_files"
TASK_KEYS = ("files", "owner", "group", "mode", "dir_mode")
ENTRY_KEYS = ("path", "state", "content", "template", "template_vars", "src", "validate", "target", "owner", "group", "mode")
STATES = ("file", "directory", "absent", "link")
SOURCES = ("content", "template", "src")
# ansible.builtin.template's defaults (plugins/action/template.py in ansible-core 2.19).
TEMPLATE_OVERRIDES = {
    "block_start_string": BLOCK_START_STRING,
    "block_end_string": BLOCK_END_STRING,
    "variable_start_string": VARIABLE_START_STRING,
    "variable_end_string": VARIABLE_END_STRING,
    "comment_start_string": COMMENT_START_STRING,
    "comment_end_string": COMMENT_END_STRING,
    "trim_blocks": True,
    "lstrip_blocks": False,
    "newline_sequence": "\n",
}
SYMBOLIC_MODE = re.compile(r"[ugoa]*(?:[-+=][rwxXstugo]*)+(?:,[ugoa]*(?:[-+=][rwxXstugo]*)+)*")
HIDDEN = "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"


class Problems(Exception):
    """The task fails before anything is sent to the host; the message lists every problem."""

    def __init__(self, what: str, problems: list[str]) -> None:
        self.problems = problems
        count = f"{len(problems)} problems" if len(problems) > 1 else "1 problem"
        super().__init__(f"managed_files: {what} ({count}), nothing was changed:\n" + "\n".join(f"- {problem}" for problem in problems))


def _expected(key: Any, known: tuple[str, ...]) -> str:
    """' — did you mean X?' for a likely typo, else the keys that are known."""
    hint = did_you_mean(key, known) if isinstance(key, str) else ""
    return hint or f"; expected one of {', '.join(known)}"


def _mode_problem(value: Any, key: str) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return f"{key} must be a string such as \"0644\", got {type(value).__name__}"
    if isinstance(value, int):
        return (f"{key} must be a quoted string such as \"0644\", got the integer {value}"
                f" (YAML reads an unquoted 0644 as the number 420; quote the mode)")
    if not (managed_state.OCTAL_MODE.fullmatch(value) or SYMBOLIC_MODE.fullmatch(value)):
        return f"{key} {value!r} is neither an octal mode such as \"0644\" nor a symbolic one such as \"u=rw,g=r,o=r\""
    return None


def _name(value: Any, key: str, problems: list[str], where: str) -> str | None:
    """An owner or group: a name, or a numeric id."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, str) and value:
        return value
    problems.append(f"{where}{key} must be a user or group name, got {value!r}")
    return None


def _check_mode_value(value: Any, key: str, problems: list[str], where: str) -> str | None:
    if value is None:
        return None
    problem = _mode_problem(value, key)
    if problem:
        problems.append(where + problem)
        return None
    return value


def check_arguments(args: dict[str, Any]) -> dict[str, Any]:
    """The module arguments for a task's arguments, before templates and src files are read.

    Raises Problems with every problem found. Entries keep their order; each one
    gets its state and normalized path, and only the keys it was given.
    """
    problems: list[str] = []
    problems += [f"unknown argument {key}{_expected(key, TASK_KEYS)}" for key in sorted(set(args) - set(TASK_KEYS), key=str)]
    checked: dict[str, Any] = {}
    for key in ("owner", "group"):
        value = _name(args.get(key), key, problems, "")
        if value is not None:
            checked[key] = value
    for key in ("mode", "dir_mode"):
        value = _check_mode_value(args.get(key), key, problems, "")
        if value is not None:
            checked[key] = value
    files = args.get("files")
    if not isinstance(files, list):
        problems.append(f"files must be a list of entries, got {'nothing' if files is None else type(files).__name__}")
        files = []
    seen: set[str] = set()
    checked["files"] = [_check_entry(index, entry, seen, problems) for index, entry in enumerate(files)]
    if problems:
        raise Problems("invalid arguments", problems)
    return checked


def _check_entry(index: int, entry: Any, seen: set[str], problems: list[str]) -> dict[str, Any]:
    if not isinstance(entry, dict):
        problems.append(f"files[{index}] must be a mapping with a path, got {type(entry).__name__}")
        return {}
    path = entry.get("path")
    if not isinstance(path, str) or not posixpath.isabs(path):
        problems.append(f"files[{index}]: path must be an absolute path, got {path!r}")
        return {}
    path = posixpath.normpath(path)
    where = f"{path}: "
    if path in seen:
        problems.append(f"{where}listed more than once")
    seen.add(path)
    problems += [f"{where}unknown key {key}{_expected(key, ENTRY_KEYS)}" for key in sorted(set(entry) - set(ENTRY_KEYS), key=str)]
    state = "file" if entry.get("state") is None else entry["state"]
    if state not in STATES:
        problems.append(f"{where}state must be one of {', '.join(STATES)}, got {state!r}")
        return {}
    checked: dict[str, Any] = {"path": path, "state": state}
    given = [key for key in SOURCES if entry.get(key) is not None]
    if state == "file":
        if len(given) != 1:
            problems.append(f"{where}a file needs exactly one of content, template, src; got {', '.join(given) or 'none'}")
        for key in given:
            value = entry[key]
            if not isinstance(value, str) or (key != "content" and not value):
                what = "text" if key == "content" else "a file name"
                problems.append(f"{where}{key} must be {what}, got {type(value).__name__}")
            else:
                checked[key] = value
        optional = (
            ("template_vars", "a mapping beside a template", lambda value: isinstance(value, dict) and "template" in given),
            ("validate", "a command with %s for the new file", lambda value: isinstance(value, str) and "%s" in value),
        )
        for key, expected, fits in optional:
            value = entry.get(key)
            if value is None:
                continue
            if fits(value):
                checked[key] = value
            else:
                problems.append(f"{where}{key} must be {expected}, got {value!r}")
    else:
        extra = [key for key in (*SOURCES, "template_vars", "validate") if entry.get(key) is not None]
        if state in ("absent", "link"):
            extra += [key for key in ("owner", "group", "mode") if entry.get(key) is not None]
        if state != "link" and entry.get("target") is not None:
            extra.append("target")
        if extra:
            problems.append(f"{where}a{'n' if state == 'absent' else ''} {state} entry takes no {', '.join(extra)}")
        if state == "link":
            target = entry.get("target")
            if isinstance(target, str) and target:
                checked["target"] = target
            else:
                problems.append(f"{where}a link entry needs a target (the path it points to), got {target!r}")
    if state == "file" and entry.get("target") is not None:
        problems.append(f"{where}a file entry takes no target (state: link makes a link)")
    if state not in ("absent", "link"):
        for key in ("owner", "group"):
            value = _name(entry.get(key), key, problems, where)
            if value is not None:
                checked[key] = value
        mode = _check_mode_value(entry.get("mode"), "mode", problems, where)
        if mode is not None:
            checked["mode"] = mode
    return checked


def hide_contents(module_args: dict[str, Any]) -> dict[str, Any]:
    """The module arguments as a result may show them: without file contents."""
    hidden = ("content", "content_base64")
    files = [{**entry, **{key: HIDDEN for key in hidden if key in entry}} for entry in module_args["files"]]
    return {**module_args, "files": files}


class ActionModule(ActionBase):
    """Check, render and read on the controller; converge on the host in one module call."""

    TRANSFERS_FILES = False
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        task_vars = task_vars if task_vars is not None else {}
        result = super().run(tmp, task_vars)
        del tmp  # no effect since ansible-core 2.5
        try:
            module_args = check_arguments(dict(self._task.args))
            problems: list[str] = []
            for entry in module_args["files"]:
                self._add_content(entry, task_vars, problems)
            if problems:
                raise Problems("cannot render or read the contents", problems)
        except Problems as error:
            result.update(failed=True, changed=False, msg=str(error))
            return result
        if not module_args["files"]:
            result.update(changed=False, results=[], changed_paths=[])
            return result
        if self._in_place_since_first_read(module_args, task_vars):
            # The module would have found every entry as it is: no module run (plugin_utils/managed_state.py).
            result.update(changed=False, changed_paths=[], in_place_at_first_read=True,
                          results=[{"path": entry["path"], "state": entry["state"], "changed": False}
                                   for entry in module_args["files"]])
        else:
            try:
                result.update(self._execute_module(module_name=MODULE, module_args=module_args, task_vars=task_vars))
            finally:
                self._remove_tmp_path(self._connection._shell.tmpdir)
            if not result.get("failed") and not self._task.delegate_to:
                managed_state.remember(task_vars.get("inventory_file"), str(task_vars.get("inventory_hostname")),
                                       [entry["path"] for entry in module_args["files"]])
        result["invocation"] = {"module_args": hide_contents(module_args)}
        return result

    def _in_place_since_first_read(self, module_args: dict[str, Any], task_vars: dict[str, Any]) -> bool:
        """Every entry in place as the run's first read found it, with nothing changed since.

        Not for a delegated task (the read is of the inventory host, not of the
        one the files are on)."""
        if self._task.delegate_to or not run_changes.unchanged_so_far():
            return False
        states = (task_vars.get(read_requests.FIRST_READ) or {}).get("file_states")
        return isinstance(states, dict) and managed_state.all_in_place(module_args, states, run_changes.run_key())

    def _add_content(self, entry: dict[str, Any], task_vars: dict[str, Any], problems: list[str]) -> None:
        """Fill in a template's or src file's content; a problem names the entry's path."""
        try:
            if "template" in entry:
                entry["content"] = self._render(entry["template"], entry["path"], {**task_vars, **entry.pop("template_vars", {})})
            elif "src" in entry:
                data = self._read(entry["src"])
                try:
                    entry["content"] = data.decode("utf-8")
                except UnicodeDecodeError:
                    # A key: bytes travel as base64 (module arguments are JSON text).
                    entry["content_base64"] = base64.b64encode(data).decode("ascii")
        except AnsibleFileNotFound as error:
            key = "template" if "template" in entry else "src"
            searched = "".join(f"\n    {path}" for path in error.paths or [])
            problems.append(f"{entry['path']}: {key} {entry[key]} not found on the controller, searched:{searched}")
        except AnsibleError as error:
            key = "template" if "template" in entry else "src"
            problems.append(f"{entry['path']}: {key} {entry[key]}: {to_text(error)}")

    def _render(self, name: str, dest: str, task_vars: dict[str, Any]) -> str:
        """Render as ansible.builtin.template does (ansible-core 2.19's plugins/action/template.py)."""
        source = self._find_needle("templates", name)
        template_data = trust_as_template(self._loader.get_text_file_contents(source))
        # Jinja's search path for includes: each of the task's search paths, then its templates/ subdirectory first.
        searchpath = [*task_vars.get("ansible_search_path", []), self._loader._basedir, os.path.dirname(source)]
        searchpath = [path for base in searchpath for path in (os.path.join(base, "templates"), base)]
        template_vars = dict(task_vars)
        generated = generate_ansible_template_vars(path=name, fullpath=source, dest_path=dest)
        if "ansible_managed" in task_vars:  # as template does: a user's ansible_managed wins
            generated.pop("ansible_managed", None)
        template_vars.update(generated)
        templar = self._templar.copy_with_new_env(searchpath=searchpath, available_variables=template_vars)
        rendered = templar.template(template_data, escape_backslashes=False, overrides=TEMPLATE_OVERRIDES)
        return "" if rendered is None else to_text(rendered)

    def _read(self, name: str) -> bytes:
        """A src file's bytes, found as ansible.builtin.copy finds it (vault files decrypted)."""
        source = self._find_needle("files", name)
        if os.path.isdir(source):
            raise AnsibleError(f"{source} is a directory; managed_files copies single files")
        real = self._loader.get_real_file(source, decrypt=True)
        try:
            with open(real, "rb") as stream:
                data = stream.read()
        finally:
            self._loader.cleanup_tmp_file(real)
        return data

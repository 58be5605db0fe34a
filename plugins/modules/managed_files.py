#!/usr/bin/python
"""Ansible module: converge a list of files and directories in one call (remote side of
deepops.cluster.managed_files; the action plugin plugins/action/managed_files.py validates the
arguments and renders templates on the controller)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: managed_files
short_description: Converge many files and directories on a host in one module call
description:
  - Creates directories, writes files and removes paths from one list, in list order, with
    a single module call per host, where a role would otherwise run one
    M(ansible.builtin.file), M(ansible.builtin.copy) or M(ansible.builtin.template) task
    (and one module start on the host) per path.
  - The action plugin checks every argument on the controller and fails, naming the
    entry's path, before anything is sent to the host. It renders O(files[].template) with
    the task's variables as M(ansible.builtin.template) does (same template search path, so
    C({% include %}) works in a role's C(templates/)), reads O(files[].src) from the role's
    C(files/) as M(ansible.builtin.copy) does, and sends the contents as UTF-8 text (a
    C(src) file that is not UTF-8 text, such as a key, as base64).
  - On the host a file is written only when its content differs byte for byte from what is
    there, through a temporary file in the destination directory that is validated first
    (O(files[].validate)) and then moved into place atomically. Owner, group and mode are
    set only where they differ.
  - Entries are applied in list order, so list a directory before the files in it. When an
    entry fails, the task fails with the entry's path; entries before it stay applied and
    are reported in RV(results) and RV(changed_paths).
  - In a deploy, the action plugin makes no module call where every entry is as the run's
    first read found it on the host (M(deepops.cluster.host_reads) option C(file_states), by
    the same comparisons as the module's) and no task of the run has changed anything since
    (the callback deepops.cluster.run_changes, which must be enabled). It remembers on the
    controller the paths it wrote on each host, for the next run's read (lookup
    deepops.cluster.managed_paths). A delegated task always makes its module call.
version_added: "0.1.0"
author:
  - deepops developers (@deepops)
options:
  files:
    description: The files, directories and paths to remove, applied in this order.
    type: list
    elements: dict
    required: true
    suboptions:
      path:
        description:
          - Absolute path on the host. A path may appear only once in O(files).
          - A symlink at a file's path is followed, like M(ansible.builtin.copy) with
            C(follow=true) - content is compared with and written to the file it points
            to, owner, group and mode are set on that file, and the link stays.
            A symlink at a directory's path is followed the same way.
        type: path
        required: true
      state:
        description:
          - V(file) writes the file from exactly one of O(files[].content),
            O(files[].template) or O(files[].src). Its directory must exist, or be created
            by a C(directory) entry earlier in the list.
          - V(directory) creates the directory when missing, with its missing parents
            (created like C(mkdir -p), with default mode and owner; list a parent as its
            own entry to manage it), and sets its owner, group and mode.
          - V(absent) removes a file, a symlink (not what it points to) or a directory with
            everything in it, like M(ansible.builtin.file) with C(state=absent).
          - V(link) makes the path a symbolic link to O(files[].target), replacing a file
            or another link there (not a directory), like M(ansible.builtin.file) with
            C(state=link) and C(force=true).
          - C(directory), C(absent) and C(link) entries take no content, template, src or
            validate, and C(absent) and C(link) entries no owner, group or mode.
        type: str
        choices: [file, directory, absent, link]
        default: file
      target:
        description:
          - What a V(link) entry points to (written as given; a relative target is relative
            to the link's directory). Only for V(link) entries.
        type: str
      content:
        description:
          - The file's content, as text (written as UTF-8).
          - For O(files[].template) and O(files[].src) the action plugin fills this in on
            the controller.
        type: str
      template:
        description:
          - A Jinja2 template, found like M(ansible.builtin.template) finds its C(src) (a
            role's C(templates/) first), rendered on the controller with the task's
            variables, C(trim_blocks=true) and the other M(ansible.builtin.template)
            defaults.
        type: str
      template_vars:
        description:
          - Variables for this entry's O(files[].template) only, over the task's, as
            the C(template_vars) of the P(ansible.builtin.template#lookup) lookup. One
            template can so be rendered for several paths, each with its own values.
          - Used on the controller; never sent to the host.
        type: dict
      src:
        description:
          - A file found like M(ansible.builtin.copy) finds its C(src) (a role's C(files/)
            first; vault-encrypted files are decrypted). Text or binary (a key), it is
            written byte for byte.
        type: str
      content_base64:
        description:
          - Filled in by the action plugin for a binary O(files[].src), the file's bytes in
            base64; not to be set in a task.
        type: str
      validate:
        description:
          - Command run on the new content before it replaces the file; C(%s) (required)
            is replaced by the path of the temporary file, which is in the destination
            directory and ends with the file's name. The command is split like a shell
            would split it but not run through a shell (no pipes or redirections).
          - When the command fails the task fails and the file is left as it was.
          - Not run in check mode, which writes nothing.
        type: str
      owner:
        description: Owner of this path, overriding O(owner).
        type: str
      group:
        description: Group of this path, overriding O(group).
        type: str
      mode:
        description:
          - Mode of this path as a string (V("0644") or symbolic, V(u=rw,g=r,o=r)),
            overriding O(mode) for files and O(dir_mode) for directories.
          - An integer (YAML reads an unquoted V(0644) as the number 420) is rejected.
        type: str
  owner:
    description:
      - Owner of every file and directory whose entry names none.
      - When neither is given an existing path keeps its owner and a new one gets the
        connecting (or become) user, as with M(ansible.builtin.copy).
      - An owner or group that does not exist on the host fails the task before any
        entry is applied. In check mode such an entry is reported as changing
        instead (a package of the same run may create the user).
    type: str
  group:
    description: Group of every file and directory whose entry names none; same rules as O(owner).
    type: str
  mode:
    description:
      - Mode of every file (not directory) whose entry names none, as a string.
      - When neither is given an existing file keeps its mode and a new one gets the
        default of the umask (usually C(0644)), as with M(ansible.builtin.copy).
    type: str
  dir_mode:
    description: Mode of every directory whose entry names none, as a string.
    type: str
    default: "0755"
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.flow
  - deepops.cluster.controller_action
attributes:
  diff_mode:
    support: full
    details:
      - A content diff for each changed file (skipped for binary content or content over
        64 KiB), and a state or owner/group/mode diff for each changed path.
notes:
  - With O(files[].content), Ansible templates the text as it templates any task argument;
    use O(files[].template) for Jinja2 files.
  - Contents never appear in RV(results), in the C(invocation) returned or in the line
    the module logs on the host (its journal gets the entries' states and paths only);
    with C(no_log) on the task nothing of the result is shown.
seealso:
  - module: ansible.builtin.file
  - module: ansible.builtin.copy
  - module: ansible.builtin.template
"""

EXAMPLES = r"""
- name: Slurm | Files of slurmd
  deepops.cluster.managed_files:
    owner: root
    group: root
    mode: "0644"
    files:
      - path: /var/log/slurm
        state: directory
        owner: slurm
        mode: "0750"
      - path: /etc/slurm/prolog.d
        state: directory
      - path: /etc/slurm/prolog.d/00-noop.sh
        content: "#!/bin/sh\nexit 0\n"
        mode: "0755"
      - path: /etc/default/slurmd
        template: slurmd.default.j2
      - path: /usr/local/bin/slurm_health.py
        src: slurm_health.py
        mode: "0755"
      - path: /etc/slurm/old.conf
        state: absent
  notify: Restart slurmd

- name: Prometheus | Rules, checked before they replace the running ones
  deepops.cluster.managed_files:
    files:
      - path: /etc/prometheus/rules.yml
        template: rules.yml.j2
        validate: promtool check rules %s
"""

RETURN = r"""
results:
  description: One entry per item of O(files), in order, without contents.
  returned: always
  type: list
  elements: dict
  contains:
    path:
      description: The entry's path.
      type: str
      sample: /etc/default/slurmd
    state:
      description: The entry's state.
      type: str
      sample: file
    changed:
      description: Whether this entry changed (or would change, in check mode).
      type: bool
      sample: true
changed_paths:
  description: The paths of the changed entries, in order.
  returned: always
  type: list
  elements: str
  sample: ["/etc/default/slurmd"]
in_place_at_first_read:
  description: Every entry was as the run's first read found it, and no module call was made.
  returned: when no module call was made
  type: bool
  sample: true
"""

# Ansible modules import after their documentation strings.
import base64
import grp
import os
import pwd
import shlex
import shutil
import tempfile

from ansible.module_utils.basic import AnsibleModule

DEFAULT_DIR_MODE = "0755"
# Content diffs are skipped (with a note) for larger files.
DIFF_MAX_BYTES = 64 * 1024
ENTRY_OPTIONS = {
    "path": {"type": "path", "required": True},
    "state": {"type": "str", "choices": ["file", "directory", "absent", "link"], "default": "file"},
    "target": {"type": "str"},
    "content": {"type": "str"},
    "content_base64": {"type": "str"},
    "template": {"type": "str"},
    "template_vars": {"type": "dict"},
    "src": {"type": "str"},
    "validate": {"type": "str"},
    "owner": {"type": "str"},
    "group": {"type": "str"},
    "mode": {"type": "str"},
}
ARGUMENT_SPEC = {
    "files": {"type": "list", "elements": "dict", "required": True, "options": ENTRY_OPTIONS},
    "owner": {"type": "str"},
    "group": {"type": "str"},
    "mode": {"type": "str"},
    "dir_mode": {"type": "str", "default": DEFAULT_DIR_MODE},
}


class ManagedFilesModule(AnsibleModule):
    """AnsibleModule that logs the entries on the host without their contents."""

    def _log_invocation(self) -> None:
        # AnsibleModule logs every argument to the host's journal; the contents (a
        # rendered slurmdbd.conf holds a password) must not go there, as
        # ansible.builtin.copy keeps its content out with no_log. Marking content no_log
        # would instead mask its text everywhere in the result, diffs included.
        entries = ", ".join(f"{entry['state']} {entry['path']}" for entry in self.params["files"])
        self.log(f"Invoked with files: {entries}")


class EntryFailed(Exception):
    """One entry cannot be converged; the task fails naming its path."""

    def __init__(self, message: str, **details: object) -> None:
        super().__init__(message)
        self.details = details


def _file_args(path: str, owner: str | None, group: str | None, mode: str | None) -> dict:
    # secontext None keeps the current SELinux context (atomic_move already gave new files the default one).
    return {"path": path, "owner": owner, "group": group, "mode": mode, "attributes": None, "secontext": [None, None, None]}


def _wanted(attrs: dict, state: str) -> dict:
    return {"path": attrs["path"], "state": state, **{key: attrs[key] for key in ("owner", "group", "mode") if attrs[key] is not None}}


def _attributes(entry: dict, defaults: dict, directory: bool) -> dict:
    if directory:
        mode = entry["mode"] or defaults["dir_mode"] or DEFAULT_DIR_MODE
    else:
        mode = entry["mode"] or defaults["mode"]
    return {
        "path": entry["path"],
        "owner": entry["owner"] or defaults["owner"],
        "group": entry["group"] or defaults["group"],
        "mode": mode,
    }


def _set_attributes(module: AnsibleModule, real_path: str, attrs: dict, diff: dict | None) -> bool:
    args = _file_args(real_path, attrs["owner"], attrs["group"], attrs["mode"])
    return module.set_fs_attributes_if_different(args, False, diff, expand=False)


def _directory(module: AnsibleModule, entry: dict, defaults: dict) -> tuple[bool, list]:
    path = entry["path"]
    attrs = _attributes(entry, defaults, directory=True)
    if os.path.lexists(path) and not os.path.isdir(path):
        raise EntryFailed("exists and is not a directory (nor a link to one)")
    if not os.path.isdir(path):
        if not module.check_mode:
            os.makedirs(path)
            _set_attributes(module, os.path.realpath(path), attrs, None)
        return True, [{"before": {"path": path, "state": "absent"}, "after": _wanted(attrs, "directory")}]
    diff = {"before": {"path": path}, "after": {"path": path}}
    changed = _set_attributes(module, os.path.realpath(path), attrs, diff)
    return changed, [diff] if changed else []


def _text_or_none(data: bytes) -> str | None:
    if b"\x00" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _content_diff(path: str, before: bytes, after: bytes, source: str) -> dict:
    """A copy-module style diff; the callback prints a note instead for binary or large content."""
    diff: dict = {"before_header": path, "after_header": source}
    for side, data, prefix in (("before", before, "dst"), ("after", after, "src")):
        if len(data) > DIFF_MAX_BYTES:
            diff[f"{prefix}_larger"] = DIFF_MAX_BYTES
            continue
        text = _text_or_none(data)
        if text is None:
            diff[f"{prefix}_binary"] = 1
        else:
            diff[side] = text
    return diff


def _source_label(entry: dict) -> str:
    if entry["template"]:
        return entry["template"]
    if entry["src"]:
        return entry["src"]
    return "dynamically generated"


def _write(module: AnsibleModule, dest: str, data: bytes, validate: str | None) -> None:
    """Write through a temporary file beside dest, validate it, then move it into place."""
    directory, name = os.path.split(dest)
    handle, temporary = tempfile.mkstemp(prefix=".ansible_tmp_", suffix="_" + name, dir=directory)
    module.add_cleanup_file(temporary)
    with os.fdopen(handle, "wb") as stream:
        stream.write(data)
    if validate:
        command = validate.replace("%s", shlex.quote(temporary))
        rc, out, err = module.run_command(command)
        if rc != 0:
            os.unlink(temporary)
            raise EntryFailed(f"validation failed (rc={rc}): {command}", rc=rc, stdout=out, stderr=err)
    module.atomic_move(temporary, dest, unsafe_writes=False)


def _file(module: AnsibleModule, entry: dict, defaults: dict) -> tuple[bool, list]:
    path = entry["path"]
    if entry["content"] is None and entry["content_base64"] is None:
        raise EntryFailed("a file entry needs content (template and src are resolved by the action plugin on the controller)")
    if entry["validate"] and "%s" not in entry["validate"]:
        raise EntryFailed(f"validate must contain %s, got: {entry['validate']}")
    attrs = _attributes(entry, defaults, directory=False)
    real = os.path.realpath(path) if os.path.islink(path) else path
    if os.path.isdir(real):
        raise EntryFailed("is a directory")
    exists = os.path.lexists(real)
    if exists and not os.path.isfile(real):
        raise EntryFailed("exists and is not a regular file")
    parent = os.path.dirname(real)
    # In check mode the directory may be one an earlier entry, an earlier task
    # or a package of this run would create (ansible.builtin.copy assumes so too).
    if not os.path.isdir(parent) and not module.check_mode:
        raise EntryFailed(f"directory {parent} does not exist; list it before this file with state: directory")

    new = base64.b64decode(entry["content_base64"]) if entry["content"] is None else entry["content"].encode("utf-8")
    if exists:
        with open(real, "rb") as stream:
            old = stream.read()
    else:
        old = b""
    content_changed = not exists or old != new
    diffs = []
    if content_changed and module._diff and not module.no_log:
        diffs.append(_content_diff(path, old, new, _source_label(entry)))
    if content_changed and not module.check_mode:
        _write(module, real, new, entry["validate"])

    if not exists:
        if not module.check_mode:
            _set_attributes(module, real, attrs, None)
        diffs.append({"before": {"path": path, "state": "absent"}, "after": _wanted(attrs, "file")})
        return True, diffs
    attr_diff = {"before": {"path": path}, "after": {"path": path}}
    attrs_changed = _set_attributes(module, real, attrs, attr_diff)
    if attrs_changed:
        diffs.append(attr_diff)
    return content_changed or attrs_changed, diffs


def _absent(module: AnsibleModule, entry: dict) -> tuple[bool, list]:
    path = entry["path"]
    if not os.path.lexists(path):
        return False, []
    if os.path.islink(path):
        kind = "link"
    elif os.path.isdir(path):
        kind = "directory"
    else:
        kind = "file"
    if not module.check_mode:
        if kind == "directory":
            shutil.rmtree(path)
        else:
            os.unlink(path)
    return True, [{"before": {"path": path, "state": kind}, "after": {"path": path, "state": "absent"}}]


def _link(module: AnsibleModule, entry: dict) -> tuple[bool, list]:
    path, target = entry["path"], entry["target"]
    if not target:
        raise EntryFailed("a link entry needs a target")
    if os.path.islink(path):
        current = os.readlink(path)
        if current == target:
            return False, []
        before = {"path": path, "state": "link", "target": current}
    elif os.path.isdir(path):
        raise EntryFailed("is a directory")
    else:
        before = {"path": path, "state": "file" if os.path.lexists(path) else "absent"}
    parent = os.path.dirname(path)
    if not os.path.isdir(parent) and not module.check_mode:
        raise EntryFailed(f"directory {parent} does not exist; list it before this link with state: directory")
    if not module.check_mode:
        # A new link beside the old path, then renamed over it: the path is never missing.
        temporary = os.path.join(parent, f".{os.path.basename(path)}.deepops-{os.getpid()}")
        os.symlink(target, temporary)
        try:
            os.replace(temporary, path)
        except OSError:
            os.unlink(temporary)
            raise
    return True, [{"before": before, "after": {"path": path, "state": "link", "target": target}}]


def converge(module: AnsibleModule, entry: dict, defaults: dict) -> tuple[bool, list]:
    """Bring one entry to its state; return whether it changed and its diffs."""
    if entry["state"] == "directory":
        return _directory(module, entry, defaults)
    if entry["state"] == "absent":
        return _absent(module, entry)
    if entry["state"] == "link":
        return _link(module, entry)
    return _file(module, entry, defaults)


def _unknown_names(module: AnsibleModule, defaults: dict) -> list:
    """(path, message) for owners and groups that do not exist on the host, checked before anything is changed."""
    problems = []
    for entry in module.params["files"]:
        if entry["state"] in ("absent", "link"):
            continue
        for kind, lookup in (("owner", pwd.getpwnam), ("group", grp.getgrnam)):
            name = entry[kind] or defaults[kind]
            if name is None or name.isdigit():
                continue
            try:
                lookup(name)
            except KeyError:
                problems.append((entry["path"], f"{entry['path']}: {kind} {name} does not exist on this host"))
    return problems


def main() -> None:
    module = ManagedFilesModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    defaults = {key: module.params[key] for key in ("owner", "group", "mode", "dir_mode")}
    unknown = _unknown_names(module, defaults)
    if unknown and not module.check_mode:
        module.fail_json(msg="; ".join(message for _path, message in unknown), changed=False, results=[], changed_paths=[])
    # In check mode the user or group may be one a package of this run would
    # create: such an entry would change, its attributes cannot be compared yet.
    pending_names = {path for path, _message in unknown}

    results: list = []
    diffs: list = []
    failure = None
    for entry in module.params["files"]:
        if entry["path"] in pending_names:
            results.append({"path": entry["path"], "state": entry["state"], "changed": True})
            continue
        try:
            changed, entry_diffs = converge(module, entry, defaults)
        except EntryFailed as exc:
            failure = (entry["path"], str(exc), exc.details)
            break
        except OSError as exc:
            failure = (entry["path"], exc.strerror or str(exc), {"errno": exc.errno})
            break
        results.append({"path": entry["path"], "state": entry["state"], "changed": changed})
        diffs.extend(entry_diffs)

    changed_paths = [result["path"] for result in results if result["changed"]]
    outcome = {"changed": bool(changed_paths), "results": results, "changed_paths": changed_paths}
    if module._diff:
        outcome["diff"] = diffs
    if failure is not None:
        # Failing outside the except block keeps Ansible from attaching a traceback.
        path, message, details = failure
        module.fail_json(msg=f"{path}: {message}", path=path, **details, **outcome)
    module.exit_json(**outcome)


if __name__ == "__main__":
    main()

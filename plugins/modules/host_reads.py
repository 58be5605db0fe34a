#!/usr/bin/python
"""Ansible module: several read-only commands, files and path checks on a host in one call."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: host_reads
short_description: Run read-only commands, read files and look for paths on a host, in one module call
description:
  - A role that reads a few things before it decides (a command's output, a record file it
    wrote earlier, whether a path exists) would run one M(ansible.builtin.command),
    M(ansible.builtin.slurp) or M(ansible.builtin.stat) task each, and pay a module start on
    the host for every one. This module does them all in one call and returns each result
    under the name it was given.
  - It changes nothing, so it runs the same in check mode and always reports C(changed=false).
  - Commands run without a shell, all at once (they only read; a read that waits on a daemon, such as
    C(sacctmgr), then does not hold up the others).
version_added: "1.0.0"
author:
  - deepops developers (@deepops)
options:
  commands:
    description:
      - Commands to run, side by side; each result is returned under its O(commands[].name).
      - A command whose exit status is not in its O(commands[].ok_rc) fails the task (naming it,
        with its output), unless O(commands[].may_fail) is set.
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: The name its result is returned under.
        type: str
        required: true
      argv:
        description: The command and its arguments, run without a shell.
        type: list
        elements: str
        required: true
      ok_rc:
        description: The exit statuses that count as success.
        type: list
        elements: int
        default: [0]
      may_fail:
        description:
          - Return any exit status (a missing program gives 127) instead of failing the task.
        type: bool
        default: false
  files:
    description:
      - Files to read, by name, as UTF-8 text (bytes that are not UTF-8 are replaced).
      - A file that does not exist is not an error; its result says so.
    type: dict
    default: {}
  paths:
    description:
      - Paths to look for, by name (symlinks followed).
    type: dict
    default: {}
  file_states:
    description:
      - Paths whose state to report as M(deepops.cluster.managed_files) compares it, by path -
        whether it exists, whether it is a link and to what, and, following links, its kind,
        mode, owner and group and a file's HMAC-SHA256 under O(file_states_key).
      - The collection's deploy reads here, once per host and run, the paths managed_files
        wrote on that host in earlier runs; managed_files then skips its module run where
        every entry is in place and nothing in the run has changed since this read.
    type: list
    elements: str
    default: []
  include_remembered:
    description:
      - For the deploy's first read on a host - also make the reads that later C(host_reads) tasks
        asked this host for in earlier runs (remembered on the controller in C(deepops/host-reads)
        under C($XDG_CACHE_HOME) or C(~/.cache)), and return their results under C(remembered).
      - A later task whose every read is there, with an exit status it accepts, is answered from
        the result registered as C(deepops_host_reads), with no module run, while nothing in the run
        has changed (the callback deepops.cluster.run_changes); any other runs as usual. A task with
        C(no_log) or C(delegate_to) is neither remembered nor answered.
      - Handled by the action plugin; the module itself ignores it.
    type: bool
    default: false
  file_states_key:
    description:
      - The key of the files' digests, required with O(file_states). The digests show in the
        result; keyed, they tell nothing about a file that holds a password to anyone without
        the key (the deploy makes one per run and keeps it in memory).
    type: str
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  platform:
    platforms: posix
"""

EXAMPLES = r"""
- name: Cluster users | Read the local users, groups and the record of earlier runs
  deepops.cluster.host_reads:
    commands:
      - {name: passwd, argv: [getent, passwd]}
      - {name: group, argv: [getent, group]}
    files:
      record: /var/lib/deepops/cluster_users.json
  register: __cluster_users_reads

- name: Show whether the record exists and the first local user
  ansible.builtin.debug:
    msg: "{{ __cluster_users_reads.files.record.exists }} {{ __cluster_users_reads.commands.passwd.stdout_lines[0] }}"

- name: Slurm | The version, where slurmctld is installed
  deepops.cluster.host_reads:
    commands:
      - {name: version, argv: [slurmctld, -V], may_fail: true}
    paths:
      zone: /usr/share/zoneinfo/Europe/Berlin
"""

RETURN = r"""
commands:
  description: Each command's result, by the name it was given.
  returned: always
  type: dict
  sample: {"passwd": {"rc": 0, "stdout": "root:x:0:0:root:/root:/bin/bash", "stderr": "",
           "stdout_lines": ["root:x:0:0:root:/root:/bin/bash"]}}
files:
  description: Each file's result, by name - C(exists) and C(content) (the text; absent when the file does not exist).
  returned: always
  type: dict
  sample: {"record": {"exists": true, "content": "{\"users\": [\"alice\"]}\n"}}
paths:
  description: For each path, by name, C(exists) and C(isdir).
  returned: always
  type: dict
  sample: {"zone": {"exists": true, "isdir": false}}
remembered:
  description:
    - With O(include_remembered), the results of the reads remembered from later tasks, by read
      (a JSON key of its kind and argv or path); for the action plugin's use.
  returned: with O(include_remembered)
  type: dict
file_states:
  description:
    - For each path of O(file_states), by path - C(exists) and C(link) (with C(target)); where it
      resolves, C(kind) (C(file), C(directory) or C(other)), C(mode) (four octal digits), C(uid),
      C(gid), C(owner) and C(group) (names, null where unknown) and, for a file, C(hmac) (HMAC-SHA256
      of its content under O(file_states_key), hex).
      C(error) where the path could not be read.
  returned: always
  type: dict
  sample: {"/etc/timezone": {"exists": true, "link": false, "kind": "file", "mode": "0644", "uid": 0,
           "gid": 0, "owner": "root", "group": "root", "hmac": "9f86d0..."}}
"""

# Ansible modules import after their documentation strings.
import grp
import hashlib
import hmac
import os
import pwd
import stat
from concurrent.futures import ThreadPoolExecutor

from ansible.module_utils.basic import AnsibleModule

# What a shell reports for a program it cannot find.
NOT_FOUND_RC = 127
# Commands at once, at most: reads are few per task; this bounds a long list.
MAX_PARALLEL = 8


def run(module: AnsibleModule, spec: dict) -> dict:
    """One command's result, as ansible.builtin.command returns it."""
    try:
        rc, stdout, stderr = module.run_command(spec["argv"], handle_exceptions=False)
    except OSError as error:
        rc, stdout, stderr = NOT_FOUND_RC, "", str(error)
    # As ansible.builtin.command returns them: without the final newline.
    stdout, stderr = stdout.rstrip("\r\n"), stderr.rstrip("\r\n")
    return {"rc": rc, "stdout": stdout, "stderr": stderr, "stdout_lines": stdout.splitlines()}


def run_all(module: AnsibleModule, specs: list[dict]) -> dict:
    """Every command's result by name, run side by side; fails the module (in
    the main thread: fail_json exits) naming the first, in the order given,
    whose status is not allowed."""
    with ThreadPoolExecutor(max_workers=max(1, min(len(specs), MAX_PARALLEL))) as pool:
        results = list(pool.map(lambda spec: run(module, spec), specs))
    for spec, result in zip(specs, results):
        if result["rc"] not in spec["ok_rc"] and not spec["may_fail"]:
            module.fail_json(
                msg=f"{spec['name']}: {' '.join(spec['argv'])} exited with {result['rc']}: "
                    f"{result['stderr'].strip() or result['stdout'].strip()}",
                name=spec["name"], **result)
    return {spec["name"]: result for spec, result in zip(specs, results)}


def read(module: AnsibleModule, name: str, path: str) -> dict:
    try:
        with open(path, "rb") as stream:
            return {"exists": True, "content": stream.read().decode("utf-8", errors="replace")}
    except FileNotFoundError:
        return {"exists": False}
    except OSError as error:
        module.fail_json(msg=f"{name}: cannot read {path}: {error}", name=name)
        raise  # not reached: fail_json exits


def look(path: str) -> dict:
    return {"exists": os.path.exists(path), "isdir": os.path.isdir(path)}


def _name_of(lookup, number: int) -> str | None:
    try:
        return lookup(number)[0]
    except KeyError:
        return None


def file_state(path: str, key: bytes) -> dict:
    """What managed_files compares for one path; links are followed as it follows them."""
    try:
        status = os.lstat(path)
    except FileNotFoundError:
        return {"exists": False}
    except OSError as error:
        return {"exists": True, "error": str(error)}
    state: dict = {"exists": True, "link": stat.S_ISLNK(status.st_mode)}
    try:
        if state["link"]:
            state["target"] = os.readlink(path)
            status = os.stat(path)
    except FileNotFoundError:
        return state  # a link to nothing
    except OSError as error:
        return {**state, "error": str(error)}
    kind = "file" if stat.S_ISREG(status.st_mode) else "directory" if stat.S_ISDIR(status.st_mode) else "other"
    state.update(kind=kind, mode=f"{stat.S_IMODE(status.st_mode):04o}", uid=status.st_uid, gid=status.st_gid,
                 owner=_name_of(pwd.getpwuid, status.st_uid), group=_name_of(grp.getgrgid, status.st_gid))
    if kind == "file":
        digest = hmac.new(key, digestmod=hashlib.sha256)
        try:
            with open(path, "rb") as stream:
                for block in iter(lambda: stream.read(1 << 20), b""):
                    digest.update(block)
        except OSError as error:
            return {**state, "error": str(error)}
        state["hmac"] = digest.hexdigest()
    return state


COMMAND_OPTIONS = {
    "name": {"type": "str", "required": True},
    "argv": {"type": "list", "elements": "str", "required": True},
    "ok_rc": {"type": "list", "elements": "int", "default": [0]},
    "may_fail": {"type": "bool", "default": False},
}


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "commands": {"type": "list", "elements": "dict", "default": [], "options": COMMAND_OPTIONS},
            "files": {"type": "dict", "default": {}},
            "paths": {"type": "dict", "default": {}},
            "file_states": {"type": "list", "elements": "str", "default": []},
            "file_states_key": {"type": "str", "no_log": True},
            # Handled by the action plugin (plugins/action/host_reads.py).
            "include_remembered": {"type": "bool", "default": False},
        },
        supports_check_mode=True,
    )
    problems = _problems(module.params)
    if problems:
        module.fail_json(msg="host_reads: " + "; ".join(problems) + " (nothing was run)")
    commands = run_all(module, module.params["commands"])
    files = {name: read(module, name, path) for name, path in module.params["files"].items()}
    paths = {name: look(path) for name, path in module.params["paths"].items()}
    key = (module.params["file_states_key"] or "").encode()
    file_states = {path: file_state(path, key) for path in module.params["file_states"]}
    module.exit_json(changed=False, commands=commands, files=files, paths=paths, file_states=file_states)


def _problems(params: dict) -> list[str]:
    """Every argument problem AnsibleModule's spec cannot see, before anything runs."""
    problems = []
    names = [spec["name"] for spec in params["commands"]]
    problems += [f"commands: {name} is named twice" for name in sorted({name for name in names if names.count(name) > 1})]
    problems += [f"commands.{spec['name']}.argv is empty" for spec in params["commands"] if not spec["argv"]]
    for option in ("files", "paths"):
        problems += [f"{option}.{name} must be an absolute path, got {path!r}"
                     for name, path in params[option].items() if not isinstance(path, str) or not os.path.isabs(path)]
    problems += [f"file_states: {path!r} is not an absolute path" for path in params["file_states"] if not os.path.isabs(path)]
    if params["file_states"] and not params["file_states_key"]:
        problems.append("file_states needs file_states_key")
    return problems


if __name__ == "__main__":
    main()

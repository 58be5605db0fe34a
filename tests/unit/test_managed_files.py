"""deepops.cluster.managed_files: many files and directories converged in one module call.

The playbook tests run ansible-playbook for real (local connection) with a
small role that writes under tmp_path, and read the task's result from the
json callback. The controller's argument check, a plain function, is also
called directly for the cases that never reach a host.
"""

from __future__ import annotations

import base64
import grp
import json
import os
import pwd
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from ansible.module_utils.testing import patch_module_args
from ansible_collections.deepops.cluster.plugins.action.managed_files import Problems, check_arguments
from ansible_collections.deepops.cluster.plugins.modules import managed_files as module

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
USER = pwd.getpwuid(os.getuid()).pw_name
GROUP = grp.getgrgid(os.getgid()).gr_name
TASK = "Demo | Files"

ROLE_FILES = {
    "defaults/main.yml": "demo_name: alpha\ndemo_port: 6817\n",
    # trim_blocks, an include from the role's templates/, a role variable, a loop
    "templates/main.conf.j2": (
        "# {{ demo_name }} on port {{ demo_port }}\n"
        "{% include 'part.j2' %}\n"
        "{% for item in ['a', 'b'] %}\n"
        "item={{ item }}\n"
        "{% endfor %}\n"
        "end\n"
    ),
    "templates/part.j2": "[part]\nport={{ demo_port }}\n",
    "files/tool.sh": "#!/bin/sh\necho tool\n",
}


def _files() -> list[dict]:
    return [
        {"path": "{{ demo_root }}/etc", "state": "directory", "mode": "0750"},
        {"path": "{{ demo_root }}/etc/main.conf", "template": "main.conf.j2"},
        {"path": "{{ demo_root }}/etc/tool.sh", "src": "tool.sh", "mode": "0755"},
        {"path": "{{ demo_root }}/etc/inline.conf", "content": "name={{ demo_name }}\n", "validate": "grep -q name= %s"},
        {"path": "{{ demo_root }}/linked.conf", "content": "through the link\n"},
        {"path": "{{ demo_root }}/old.conf", "state": "absent"},
        {"path": "{{ demo_root }}/old.d", "state": "absent"},
    ]


def managed_files_task(files: list[dict] | None = None, **defaults: str) -> dict:
    arguments = {"owner": USER, "group": GROUP, "mode": "0640", **defaults, "files": files if files is not None else _files()}
    return {"name": TASK, "deepops.cluster.managed_files": arguments}


@dataclass
class Play:
    process: subprocess.CompletedProcess
    output: dict | None

    def result(self, name: str = TASK) -> dict:
        assert self.output is not None, self.process.stdout[-4000:] + self.process.stderr[-4000:]
        for play in self.output["plays"]:
            for task in play["tasks"]:
                if task["task"]["name"].split(" : ", 1)[-1] == name:  # role tasks are named "role : name"
                    return task["hosts"]["localhost"]
        raise AssertionError(f"no task {name!r} in the run:\n{self.process.stdout[-4000:]}")


@dataclass
class Project:
    directory: Path
    root: Path  # where the role writes (demo_root)

    def paths(self, *relative: str) -> list[str]:
        return [str(self.root / name) for name in relative]

    def run(self, tasks: list[dict] | str, *options: str, callback: str = "ansible.posix.json") -> Play:
        tasks_file = self.directory / "roles" / "demo" / "tasks" / "main.yml"
        tasks_file.write_text(tasks if isinstance(tasks, str) else yaml.safe_dump(tasks, sort_keys=False))
        env = {
            **{key: value for key, value in os.environ.items() if not key.startswith("ANSIBLE_")},
            "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
            "ANSIBLE_STDOUT_CALLBACK": callback,
            "ANSIBLE_LOCAL_TEMP": str(self.directory / "ansible-local"),
            "ANSIBLE_REMOTE_TEMP": str(self.directory / "ansible-remote"),
            "ANSIBLE_NOCOLOR": "1",
        }
        process = subprocess.run(
            [str(BIN / "ansible-playbook"), "-i", "localhost,", str(self.directory / "play.yml"), *options],
            cwd=self.directory, env=env, capture_output=True, text=True, timeout=300, check=False,
        )
        output = None
        if callback == "ansible.posix.json":
            try:
                output = json.loads(process.stdout)
            except json.JSONDecodeError:
                pytest.fail(process.stdout[-4000:] + process.stderr[-4000:])
        return Play(process, output)


@pytest.fixture
def project(tmp_path: Path) -> Project:
    directory = tmp_path / "project"
    role = directory / "roles" / "demo"
    root = tmp_path / "root"
    root.mkdir()
    for relative, text in {**ROLE_FILES, "defaults/main.yml": ROLE_FILES["defaults/main.yml"] + f"demo_root: {root}\n"}.items():
        (role / relative).parent.mkdir(parents=True, exist_ok=True)
        (role / relative).write_text(text)
    (role / "tasks").mkdir()
    play = [{
        "name": "Managed files test",
        "hosts": "localhost",
        "connection": "local",
        "gather_facts": False,
        "vars": {"ansible_python_interpreter": "{{ ansible_playbook_python }}"},
        "roles": ["demo"],
    }]
    (directory / "play.yml").write_text(yaml.safe_dump(play, sort_keys=False))
    return Project(directory, root)


def _old_state(root: Path) -> None:
    """What the first run finds: paths to remove, and a symlink at a file's path."""
    (root / "old.conf").write_text("old\n")
    (root / "old.d" / "sub").mkdir(parents=True)
    (root / "old.d" / "sub" / "file").write_text("old\n")
    (root / "target.conf").write_text("old\n")
    (root / "linked.conf").symlink_to("target.conf")


def _mode(path: Path) -> str:
    return f"0{stat.S_IMODE(path.stat().st_mode):o}"


def _leftovers(directory: Path) -> list[str]:
    return [path.name for path in directory.rglob(".ansible_tmp*")]


ALL = ("etc", "etc/main.conf", "etc/tool.sh", "etc/inline.conf", "linked.conf", "old.conf", "old.d")


def test_first_run_converges_everything_and_a_second_run_changes_nothing(project: Project) -> None:
    root = project.root
    _old_state(root)
    builtin = {"name": "Demo | The same template with ansible.builtin.template",
               "ansible.builtin.template": {"src": "main.conf.j2", "dest": str(root / "builtin.conf"), "mode": "0644"}}

    first = project.run([managed_files_task(), builtin])
    result = first.result()
    assert first.process.returncode == 0, result
    assert result["changed"] is True
    assert result["changed_paths"] == project.paths(*ALL)
    states = ["directory", "file", "file", "file", "file", "absent", "absent"]
    assert result["results"] == [
        {"path": path, "state": state, "changed": True} for path, state in zip(project.paths(*ALL), states)
    ]

    assert (root / "etc").is_dir() and _mode(root / "etc") == "0750"
    assert {name: _mode(root / "etc" / name) for name in ("main.conf", "tool.sh", "inline.conf")} == {
        "main.conf": "0640", "tool.sh": "0755", "inline.conf": "0640"}
    for path in (root / "etc", root / "etc" / "main.conf", root / "etc" / "tool.sh"):
        assert (path.owner(), path.group()) == (USER, GROUP)
    rendered = (root / "etc" / "main.conf").read_text()
    assert rendered.startswith("# alpha on port 6817\n[part]\nport=6817")
    assert "item=a\nitem=b\nend\n" in rendered
    assert rendered == (root / "builtin.conf").read_text()  # rendered exactly as ansible.builtin.template renders
    assert (root / "etc" / "tool.sh").read_bytes() == ROLE_FILES["files/tool.sh"].encode()
    assert (root / "etc" / "inline.conf").read_text() == "name=alpha\n"
    # the link is followed: its target gets the content and the mode, the link stays
    assert (root / "linked.conf").is_symlink() and (root / "target.conf").read_text() == "through the link\n"
    assert _mode(root / "target.conf") == "0640"
    assert not (root / "old.conf").exists() and not (root / "old.d").exists()
    assert _leftovers(root) == []
    # contents never appear in the result, not even in the invocation
    shown = json.dumps(result)
    assert "[part]" not in shown and "through the link" not in shown and "echo tool" not in shown

    second = project.run([managed_files_task()])
    again = second.result()
    assert second.process.returncode == 0, again
    assert again["changed"] is False and again["changed_paths"] == []
    assert [entry["changed"] for entry in again["results"]] == [False] * len(ALL)


def test_drift_is_reported_in_check_mode_and_repaired_with_only_the_drifted_paths(project: Project) -> None:
    root = project.root
    assert project.run([managed_files_task()]).process.returncode == 0
    main, tool = root / "etc" / "main.conf", root / "etc" / "tool.sh"
    main.write_text("tampered\n")
    main.chmod(0o600)
    tool.chmod(0o700)

    checked = project.run([managed_files_task()], "--check").result()
    assert checked["changed"] is True
    assert checked["changed_paths"] == project.paths("etc/main.conf", "etc/tool.sh")
    assert main.read_text() == "tampered\n" and _mode(main) == "0600" and _mode(tool) == "0700"

    repaired = project.run([managed_files_task()]).result()
    assert repaired["changed_paths"] == project.paths("etc/main.conf", "etc/tool.sh")
    assert main.read_text().startswith("# alpha") and _mode(main) == "0640" and _mode(tool) == "0755"


def test_check_mode_reports_every_change_and_writes_nothing(project: Project) -> None:
    root = project.root
    _old_state(root)
    before = sorted(str(path.relative_to(root)) for path in root.rglob("*"))

    play = project.run([managed_files_task()], "--check")
    result = play.result()
    assert play.process.returncode == 0, result
    # the files in etc/ would be written into the directory the first entry would create
    assert result["changed"] is True and result["changed_paths"] == project.paths(*ALL)
    assert sorted(str(path.relative_to(root)) for path in root.rglob("*")) == before
    assert (root / "target.conf").read_text() == "old\n"


def test_diff_shows_content_and_attribute_changes_and_no_log_hides_contents(project: Project) -> None:
    root = project.root
    secret = {"name": "Demo | Secret", "no_log": True,
              "deepops.cluster.managed_files": {"files": [{"path": "{{ demo_root }}/secret.conf", "content": "s3cret-value\n"}]}}
    big = {"path": "{{ demo_root }}/big.txt", "content": "x" * 70_000}
    tasks = [managed_files_task([*_files(), big]), secret]
    assert project.run([managed_files_task()]).process.returncode == 0
    main = root / "etc" / "main.conf"
    main.write_text(main.read_text().replace("[part]", "[tampered]"))
    (root / "etc" / "tool.sh").chmod(0o700)

    result = project.run(tasks, "--check", "--diff").result()
    diffs = {(diff.get("before_header"), "content" if "before_header" in diff else "attributes"): diff
             for diff in result["diff"]}
    main_diff = diffs[(str(main), "content")]
    assert "[tampered]" in main_diff["before"] and "[part]" in main_diff["after"]
    assert main_diff["after_header"] == "main.conf.j2"
    (tool_diff,) = [diff for diff in result["diff"]
                   if isinstance(diff.get("before"), dict) and diff["before"]["path"] == str(root / "etc" / "tool.sh")]
    assert (tool_diff["before"]["mode"], tool_diff["after"]["mode"]) == ("0700", "0755")
    big_diff = diffs[(str(root / "big.txt"), "content")]
    assert big_diff["src_larger"] == 64 * 1024 and "after" not in big_diff  # too large to show
    assert result["changed_paths"] == [str(main), str(root / "etc" / "tool.sh"), str(root / "big.txt")]

    # The default callback prints the list of diffs as unified diffs; the no_log task shows nothing.
    shown = project.run(tasks, "--check", "--diff", callback="ansible.builtin.default").process
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert f"--- before: {main}\n+++ after: main.conf.j2\n" in shown.stdout
    assert "-[tampered]\n" in shown.stdout and "+[part]\n" in shown.stdout
    assert "diff skipped: source file size is greater than 65536" in shown.stdout
    assert "s3cret-value" not in shown.stdout and "s3cret-value" not in shown.stderr


def test_failed_validate_fails_the_task_and_leaves_the_old_file(project: Project) -> None:
    root = project.root

    def task(first: str, checked: str) -> dict:
        return managed_files_task([
            {"path": "{{ demo_root }}/first.conf", "content": first},
            {"path": "{{ demo_root }}/checked.conf", "content": checked, "validate": "grep -qx good %s"},
        ])

    assert project.run([task("v1\n", "good\n")]).process.returncode == 0
    play = project.run([task("v2\n", "bad\n")])
    result = play.result()
    assert play.process.returncode != 0 and result["failed"] is True
    assert result["msg"].startswith(f"{root / 'checked.conf'}: validation failed (rc=1): grep -qx good ")
    assert (root / "checked.conf").read_text() == "good\n"
    assert _leftovers(root) == []
    # entries before the failing one stay applied and are reported
    assert (root / "first.conf").read_text() == "v2\n"
    assert result["changed_paths"] == [str(root / "first.conf")]


BAD_TASKS = """\
- name: Demo | Two sources
  deepops.cluster.managed_files:
    files:
      - path: "{{ demo_root }}/two"
        state: directory
      - path: "{{ demo_root }}/two/x.conf"
        content: "x\\n"
        src: tool.sh
  ignore_errors: true
- name: Demo | Integer mode
  deepops.cluster.managed_files:
    files:
      - path: "{{ demo_root }}/int.conf"
        content: "x\\n"
        mode: 0644
  ignore_errors: true
- name: Demo | Unknown state
  deepops.cluster.managed_files:
    files:
      - path: "{{ demo_root }}/ok.conf"
        content: "x\\n"
      - path: "{{ demo_root }}/fifo"
        state: fifo
  ignore_errors: true
- name: Demo | Owner missing on the host
  deepops.cluster.managed_files:
    files:
      - path: "{{ demo_root }}/owned"
        state: directory
      - path: "{{ demo_root }}/owned/x.conf"
        content: "x\\n"
        owner: deepops-no-such-user
  ignore_errors: true
"""


def test_bad_arguments_fail_naming_the_path_and_change_nothing(project: Project) -> None:
    root = project.root
    play = project.run(BAD_TASKS)
    expected = {
        "Demo | Two sources": (root / "two" / "x.conf", "a file needs exactly one of content, template, src; got content, src"),
        "Demo | Integer mode": (root / "int.conf", 'mode must be a quoted string such as "0644", got the integer 420'),
        "Demo | Unknown state": (root / "fifo", "state must be one of file, directory, absent, link, got 'fifo'"),
        "Demo | Owner missing on the host": (root / "owned" / "x.conf", "owner deepops-no-such-user does not exist on this host"),
    }
    for name, (path, message) in expected.items():
        result = play.result(name)
        assert result["failed"] is True and result["changed"] is False, result
        assert f"{path}: {message}" in result["msg"], result["msg"]
    for name in ("Demo | Two sources", "Demo | Integer mode", "Demo | Unknown state"):
        assert "results" not in play.result(name)  # failed on the controller: the module never ran
    assert play.result("Demo | Owner missing on the host")["results"] == []  # checked on the host before any change
    assert list(root.iterdir()) == []


# --------------------------------------------------------------------------
# the controller's argument check, without a host


def _problems(args: dict) -> list[str]:
    with pytest.raises(Problems) as raised:
        check_arguments(args)
    return raised.value.problems


@pytest.mark.parametrize(("entry", "problem"), [
    ({"path": "etc/x", "content": "x"}, "files[0]: path must be an absolute path, got 'etc/x'"),
    ({"path": "/x", "content": "x", "validate": "visudo -c"}, "/x: validate must be a command with %s"),
    ({"path": "/x", "state": "absent", "mode": "0644"}, "/x: an absent entry takes no mode"),
    ({"path": "/x", "state": "directory", "template": "x.j2"}, "/x: a directory entry takes no template"),
    ({"path": "/x", "content": "x", "owners": "root"}, "/x: unknown key owners — did you mean owner?"),
    ({"path": "/x", "content": "x", "recurse": True}, "/x: unknown key recurse; expected one of path, state, content,"),
    ({"path": "/x"}, "/x: a file needs exactly one of content, template, src; got none"),
    ({"path": "/x", "content": {"a": 1}}, "/x: content must be text, got dict"),
    ({"path": "/x", "content": "x", "mode": "rw"}, "/x: mode 'rw' is neither an octal mode"),
    ({"path": "/x", "content": "x", "mode": True}, '/x: mode must be a string such as "0644", got bool'),
    ({"path": "/x", "content": "x", "template_vars": {"a": 1}}, "/x: template_vars must be a mapping beside a template"),
    ({"path": "/x", "template": "x.j2", "template_vars": ["a"]}, "/x: template_vars must be a mapping beside a template, got ['a']"),
    ({"path": "/x", "state": "link"}, "/x: a link entry needs a target (the path it points to), got None"),
    ({"path": "/x", "state": "link", "target": "/y", "mode": "0644"}, "/x: a link entry takes no mode"),
    ({"path": "/x", "content": "x", "target": "/y"}, "/x: a file entry takes no target (state: link makes a link)"),
    ({"path": "/x", "state": "directory", "target": "/y"}, "/x: a directory entry takes no target"),
])
def test_an_entry_problem_names_the_path(entry: dict, problem: str) -> None:
    (found,) = _problems({"files": [entry]})
    assert found.startswith(problem), found


def test_every_problem_is_reported_at_once() -> None:
    problems = _problems({
        "mode": 420,
        "recurse": True,
        "files": [{"path": "/a/", "content": "x"}, {"path": "/a", "state": "directory"}, {"path": "/b", "state": "fifo"}],
    })
    assert problems == [
        "unknown argument recurse; expected one of files, owner, group, mode, dir_mode",
        'mode must be a quoted string such as "0644", got the integer 420'
        " (YAML reads an unquoted 0644 as the number 420; quote the mode)",
        "/a: listed more than once",
        "/b: state must be one of file, directory, absent, link, got 'fifo'",
    ]


def test_valid_arguments_become_the_module_arguments() -> None:
    args = {"owner": 0, "dir_mode": "u=rwx,go=rx", "files": [
        {"path": "/etc/x/", "state": "directory", "mode": "750"},
        {"path": "/etc/x/a", "template": "a.j2", "group": "adm", "mode": "0644", "validate": "check %s"},
        {"path": "/etc/x/b", "state": "absent"},
    ]}
    assert check_arguments(args) == {"owner": "0", "dir_mode": "u=rwx,go=rx", "files": [
        {"path": "/etc/x", "state": "directory", "mode": "750"},
        {"path": "/etc/x/a", "state": "file", "template": "a.j2", "validate": "check %s", "group": "adm", "mode": "0644"},
        {"path": "/etc/x/b", "state": "absent"},
    ]}


def test_the_module_logs_paths_on_the_host_but_never_contents(monkeypatch: pytest.MonkeyPatch) -> None:
    # AnsibleModule logs its arguments to the host's journal when it starts.
    logged: list[str] = []
    monkeypatch.setattr(module.ManagedFilesModule, "log", lambda self, msg, log_args=None: logged.append(msg))
    files = [{"path": "/etc/x", "state": "directory"}, {"path": "/etc/x/db.conf", "content": "StoragePass=s3cret\n"}]
    with patch_module_args({"files": files, "_ansible_check_mode": True}):
        module.ManagedFilesModule(argument_spec=module.ARGUMENT_SPEC, supports_check_mode=True)
    assert logged == ["Invoked with files: directory /etc/x, file /etc/x/db.conf"]


def test_template_vars_give_one_template_different_values_per_path(project: Project) -> None:
    """One template for several paths (Prometheus' file_sd files), each entry with its own values."""
    root = project.root
    files = [{"path": f"{{{{ demo_root }}}}/{name}.conf", "template": "main.conf.j2", "template_vars": {"demo_name": name}}
             for name in ("first", "second")]
    play = project.run([managed_files_task(files)])
    assert play.process.returncode == 0, play.result()
    assert (root / "first.conf").read_text().startswith("# first on port 6817\n")
    assert (root / "second.conf").read_text().startswith("# second on port 6817\n")
    sent = play.result()["invocation"]["module_args"]["files"]
    assert [sorted(entry) for entry in sent] == [["content", "path", "state", "template"]] * 2  # used on the controller only


def test_check_mode_on_a_fresh_host_reports_instead_of_failing(project: Project) -> None:
    """What an earlier task or a package of the same run would create (a
    directory, a user) is not there in check mode: the entry would change."""
    root = project.root
    files = [{"path": "{{ demo_root }}/made-earlier/app.conf", "content": "x\n"},
             {"path": "{{ demo_root }}/owned.conf", "content": "y\n", "owner": "deepops-user-from-a-package"}]
    planned = project.run([managed_files_task(files)], "--check")
    result = planned.result()
    assert planned.process.returncode == 0, result
    assert result["changed_paths"] == project.paths("made-earlier/app.conf", "owned.conf")
    assert list(root.iterdir()) == []

    applied = project.run([managed_files_task(files[:1])])
    failed = applied.result()
    assert applied.process.returncode != 0 and failed["failed"] is True
    assert "made-earlier does not exist; list it before this file with state: directory" in failed["msg"]


def test_a_binary_src_file_is_written_byte_for_byte_and_never_shown(project: Project) -> None:
    # A key: bytes that are not UTF-8, a NUL among them.
    key = bytes(range(256)) * 4
    (project.directory / "roles" / "demo" / "files" / "demo.key").write_bytes(key)
    task = managed_files_task([{"path": "{{ demo_root }}/demo.key", "src": "demo.key", "mode": "0400"}])
    encoded = base64.b64encode(key).decode("ascii")

    first = project.run([task], "--diff")
    result = first.result()
    assert result["changed"] is True, result
    written = project.root / "demo.key"
    assert written.read_bytes() == key and _mode(written) == "0400"
    # The arguments shown carry neither the bytes nor their base64.
    assert encoded not in json.dumps(first.output) and encoded[:40] not in first.process.stderr
    (content_diff,) = [diff for diff in result["diff"] if "before_header" in diff]
    assert content_diff.get("src_binary") == 1 and "after" not in content_diff

    assert project.run([task]).result()["changed"] is False
    written.write_bytes(key[::-1])
    assert project.run([task], "--check").result()["changed_paths"] == [str(written)]
    assert written.read_bytes() == key[::-1]
    assert project.run([task]).result()["changed"] is True and written.read_bytes() == key


def test_a_link_is_made_repointed_and_replaces_a_file_but_not_a_directory(project: Project) -> None:
    root = project.root
    (root / "zones").mkdir()
    for zone in ("UTC", "Berlin"):
        (root / "zones" / zone).write_text(zone + "\n")
    (root / "localtime").write_text("a copied zone file\n")

    def task(target: str) -> dict:
        return managed_files_task([{"path": "{{ demo_root }}/localtime", "state": "link", "target": target},
                                   {"path": "{{ demo_root }}/relative", "state": "link", "target": "zones/UTC"}])

    # A file at the path: check mode reports the link and leaves the file.
    planned = project.run([task(str(root / "zones" / "UTC"))], "--check", "--diff").result()
    assert planned["changed_paths"] == [str(root / "localtime"), str(root / "relative")]
    assert {"before": {"path": str(root / "localtime"), "state": "file"},
            "after": {"path": str(root / "localtime"), "state": "link", "target": str(root / "zones" / "UTC")}} in planned["diff"]
    assert not (root / "localtime").is_symlink()

    assert project.run([task(str(root / "zones" / "UTC"))]).result()["changed"] is True
    assert os.readlink(root / "localtime") == str(root / "zones" / "UTC") and (root / "localtime").read_text() == "UTC\n"
    assert os.readlink(root / "relative") == "zones/UTC" and (root / "relative").read_text() == "UTC\n"
    assert project.run([task(str(root / "zones" / "UTC"))]).result()["changed"] is False

    repointed = project.run([task(str(root / "zones" / "Berlin"))], "--diff").result()
    assert repointed["changed_paths"] == [str(root / "localtime")]
    assert {"before": {"path": str(root / "localtime"), "state": "link", "target": str(root / "zones" / "UTC")},
            "after": {"path": str(root / "localtime"), "state": "link", "target": str(root / "zones" / "Berlin")}} in repointed["diff"]
    assert (root / "localtime").read_text() == "Berlin\n" and not list(root.glob(".*deepops-*"))

    (root / "relative").unlink()
    (root / "relative").mkdir()
    failed = project.run([task(str(root / "zones" / "Berlin"))]).result()
    assert failed["failed"] is True and failed["msg"] == f"{root / 'relative'}: is a directory"

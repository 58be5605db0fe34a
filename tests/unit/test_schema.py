"""The variable schema: loading role argument specs, type checks, suggestions."""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.deepops.cluster.plugins.plugin_utils import schema, suggest
from ansible_collections.deepops.cluster.plugins.plugin_utils.problems import BrokenContent
from ansible_collections.deepops.cluster.plugins.plugin_utils.schema import VarSpec, check_value
from ansible_collections.deepops.cluster.plugins.plugin_utils.yaml_files import Vaulted
from deepops_py import inventory, paths
from deepops_py.errors import DeepopsError, InputError


def test_specs_of_every_role_and_entry_point_are_loaded(specs_dir: Path) -> None:
    known = schema.known_variables(specs_dir)
    assert known["slurm_partitions"].type == "list"
    assert known["slurm_partitions"].options["name"].required
    assert known["slurm_upgrade_drain_timeout"].type == "int"  # a non-main entry point
    assert known["testbase_packages"].elements == "str"
    assert known["slurm_select_type"].choices == ("cons_tres", "linear")
    assert known["slurm_port"].owner == "slurm"
    assert known["ansible_port"].type == "int" and known["ansible_port"].owner == "ansible"
    assert known["deepops_virtual"].type == "bool"


def test_known_variables_are_cached_per_roles_dir(specs_dir: Path) -> None:
    assert schema.known_variables(specs_dir) is schema.known_variables(specs_dir)


def test_a_missing_roles_dir_leaves_only_the_builtins(tmp_path: Path) -> None:
    known = schema.known_variables(tmp_path / "nothing")
    assert set(known) == set(schema.ANSIBLE_VARIABLES) | set(schema.DEEPOPS_VARIABLES)


def test_broken_role_specs_are_a_deepops_defect(tmp_path: Path, write_inventory) -> None:
    meta = tmp_path / "roles" / "broken" / "meta"
    meta.mkdir(parents=True)
    (meta / "argument_specs.yml").write_text("argument_specs: [\n")
    with pytest.raises(BrokenContent, match="role broken: .*argument_specs.yml.*line 2"):
        schema.load_role_specs(tmp_path / "roles")
    # The CLI reports it as a defect (exit 1), not as the user's input (exit 2).
    with pytest.raises(DeepopsError, match="role broken: .*argument_specs.yml.*line 2") as raised:
        inventory.load_cluster(write_inventory(), roles_dir=tmp_path / "roles")
    assert not isinstance(raised.value, InputError)


def test_the_shipped_roles_specs_load() -> None:
    # Only that they load; their contents belong to the roles' own tests.
    known = schema.known_variables(paths.content_dir() / "roles")
    assert "ansible_host" in known


@pytest.mark.parametrize(
    ("type_", "good", "bad", "message"),
    [
        ("str", "x", 1, "expected str, found int (1)"),
        ("str", "", 1.5, "expected str, found float (1.5)"),
        ("path", "/etc/x", ["a"], "expected path, found list (['a'])"),
        ("int", 3, "3", "expected int, found str ('3')"),
        ("int", -1, True, "expected int, found bool (True)"),
        ("float", 1, "0.5", "expected float, found str ('0.5')"),
        ("float", 0.5, False, "expected float, found bool (False)"),
        ("bool", False, "false", "expected bool, found str ('false')"),
        ("bool", True, 1, "expected bool, found int (1)"),
        ("list", [], {"a": 1}, "expected list, found dict ({'a': 1})"),
        ("dict", {}, [], "expected dict, found list ([])"),
    ],
)
def test_types(type_: str, good: object, bad: object, message: str) -> None:
    spec = VarSpec(name="v", type=type_)
    assert check_value(spec, good) == []
    assert check_value(spec, bad) == [message]


def test_raw_and_unknown_types_accept_anything() -> None:
    for type_ in ("raw", "jsonarg", "bits"):
        assert check_value(VarSpec(name="v", type=type_), {"any": ["thing"]}) == []


def test_list_elements_choices_and_suboptions() -> None:
    spec = VarSpec(
        name="parts",
        type="list",
        elements="dict",
        options={"name": VarSpec(name="name", type="str", required=True), "size": VarSpec(name="size", type="int")},
    )
    assert check_value(spec, [{"name": "gpu", "size": 2}]) == []
    assert check_value(spec, [{"name": "gpu"}, {"size": "x"}, 5]) == [
        "item 2: missing required key 'name'",
        "item 2: size: expected int, found str ('x')",
        "item 3: expected dict, found int (5)",
    ]
    assert check_value(spec, [{"name": "a", "sizee": 1, "site_note": "ok"}]) == ["item 1: unknown key 'sizee' — did you mean size?"]
    choices = VarSpec(name="c", type="str", choices=("a", "b"))
    assert check_value(choices, "b") == []
    assert check_value(choices, "c") == ["expected one of a, b, found 'c'"]


def test_long_values_are_shortened_in_messages() -> None:
    (message,) = check_value(VarSpec(name="v", type="int"), "x" * 200)
    assert len(message) < 100 and message.endswith("...)")


def test_templates_vault_and_null_are_not_type_checked() -> None:
    spec = VarSpec(name="v", type="int")
    for value in ("{{ base_port + 1 }}", "{% if x %}1{% endif %}", Vaulted("$ANSIBLE_VAULT;1.1;AES256\n31"), None):
        assert check_value(spec, value) == []
    assert check_value(VarSpec(name="v", type="list", elements="int"), [1, "{{ x }}"]) == []


def test_check_variables_names_key_and_suggests(specs_dir: Path) -> None:
    known = schema.known_variables(specs_dir)
    found = schema.check_variables(
        {"slurm_prot": 1, "slurm_port": "x", "site_owner": "me", "Slurm_Port": 1, "slurm-port": 1, 3: "x"}, known
    )
    assert found == [
        ("slurm_prot", "unknown variable 'slurm_prot' — did you mean slurm_port?"),
        ("slurm_port", "expected int, found str ('x')"),
        ("Slurm_Port", "unknown variable 'Slurm_Port' — did you mean slurm_port?"),
        ("slurm-port", "'slurm-port' is not a valid variable name — did you mean slurm_port?"),
        ("3", "'3' is not a valid variable name — use letters, digits and underscores"),
    ]


def test_ansible_aliases_are_not_corrected(specs_dir: Path) -> None:
    known = schema.known_variables(specs_dir)
    for name in ("ansible_ssh_user", "ansible_ssh_host", "ansible_ssh_pass", "ansible_become_pass"):
        assert schema.check_variables({name: "x"}, known) == [], name


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("slurm-compute", "slurm_compute"),
        ("SLURM_COMPUTE", "slurm_compute"),
        ("slurm_comptue", "slurm_compute"),
        ("Slurm-Controler", "slurm_controller"),
        ("rack1", None),
        ("gpu_nodes", None),
    ],
)
def test_suggestions(name: str, expected: str | None) -> None:
    assert suggest.closest(name, ["slurm_compute", "slurm_controller", "slurm_login"]) == expected


def test_did_you_mean_is_empty_when_nothing_is_close() -> None:
    assert suggest.did_you_mean("zzz", ["slurm_compute"]) == ""
    assert suggest.did_you_mean("slurm_compte", ["slurm_compute"]) == " — did you mean slurm_compute?"


# --- every text of a roles' variable is one line (no config or command injection)

SHIPPED = schema.known_variables(paths.content_dir() / "roles")


@pytest.mark.parametrize("text", ["a\nb", "a\rb", "a\x00b", "a\tb", "a\x85b", "a\u2028b", "ok\n"])
def test_a_line_break_or_control_character_in_a_roles_text_is_refused(text):
    [(key, message)] = schema.check_variables({"slurm_cluster_name": text}, SHIPPED)
    assert key == "slurm_cluster_name" and message.startswith("must be one line without control characters")


def test_nested_texts_are_checked_and_named_by_their_path():
    partitions = [{"name": "gpu"}, {"name": "cpu", "options": {"AllowAccounts": "a\nPartitionName=evil Nodes=ALL"}}]
    [(key, message)] = schema.check_variables({"slurm_partitions": partitions, "slurm_config": {"X": ["ok", "b\nc"]}}, SHIPPED)[:1]
    assert (key, message.split(" must")[0]) == ("slurm_partitions", "item 2: options: AllowAccounts:")
    found = schema.check_variables({"slurm_config": {"X": ["ok", "b\nc"]}}, SHIPPED)
    assert [(key, message.split(" must")[0]) for key, message in found] == [("slurm_config", "X: item 2:")]


def test_the_message_says_where_never_what():
    """The value may be a password: the message must not carry it."""
    found = schema.check_variables({"slurm_dbd_db_password": "s3cret\nline"}, SHIPPED)
    assert found and all("s3cret" not in message for _, message in found)


def test_single_lines_vault_values_and_the_users_own_variables_pass():
    vaulted = Vaulted("$ANSIBLE_VAULT;1.1;AES256\n6162\n")
    assert schema.check_variables({"slurm_cluster_name": "deepops", "slurm_dbd_db_password": vaulted,
                                   "my_site_motd": "two\nlines"}, SHIPPED) == []

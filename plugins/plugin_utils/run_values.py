"""The roles' variables whose values are only known once a run starts, checked at its start.

The inventory check (inventory.py) reads every variable where it is defined,
but a Jinja template or a vaulted value has no value to check there. deepops'
playbooks import their roles with ``rolespec_validate: false`` (Ansible's
per-role check costs a task per role and host), so the first play of every
run checks these values instead, once, with Ansible's own
``ArgumentSpecValidator`` against the option specs of the roles that declare
them (the same coercions as that per-role check: "5" passes for an int), then
with the project's own rules:

- every inventory host's variable whose value is templated or vaulted,
  resolved for that host, once per (host, variable);
- the run's extra variables (-e): a literal value once, a templated one per host.

A template that names what is only known later (facts, variables set by a
play) cannot be resolved yet: Ansible's undefined-variable error leaves it to
the role that reads it. Any other templating error is a problem. A secret (a
vaulted value, an option with no_log, a name like password, secret, key or
token) is never shown, nor are messages that could quote it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ansible.errors import AnsibleError, AnsibleUndefinedVariable
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.parsing.vault import EncryptedString

from ansible_collections.deepops.cluster.plugins.plugin_utils import schema, value_rules
from ansible_collections.deepops.cluster.plugins.plugin_utils.problems import Problem

# Names whose values are never shown, whatever their type.
SECRET_NAME = re.compile(r"pass|secret|key|token|credential", re.IGNORECASE)
HIDDEN = "the value is not shown: the variable is secret"


def check(
    hostvars: Any, templar: Any, extra_vars: Mapping[str, Any], specs: Mapping[str, Sequence[dict[str, Any]]]
) -> tuple[list[Problem], int]:
    """(problems, how many values were checked) for ``hostvars`` (Ansible's HostVars: the
    inventory hosts, their variables raw through ``raw_get``), ``extra_vars`` (the run's -e)
    and ``specs`` (schema.option_specs(): each declared variable's option specs)."""
    problems: list[Problem] = []
    seen: set[tuple[str, str, str]] = set()

    def report(file: str, scope: str, name: str, messages: list[str]) -> None:
        # A group's templated value fails alike on every host: reported once, at the first.
        for message in messages:
            if (file, name, message) not in seen:
                seen.add((file, name, message))
                problems.append(Problem(file, scope, name, message))

    checked = 0
    for name, value in extra_vars.items():
        if name in specs and not _opaque(value, templar):
            checked += 1
            report(_origin(value, "-e"), "", name, value_problems(name, value, specs[name], secret=_secret(name, value, specs[name])))
    for host in list(hostvars) or ["localhost"]:
        raw = hostvars.raw_get(host)
        if not isinstance(raw, Mapping):
            continue
        host_templar = None
        for name, value in raw.items():
            options = specs.get(name)
            if options is None or not _opaque(value, templar):
                continue
            host_templar = host_templar or templar.copy_with_new_env(available_variables=raw)
            secret = _secret(name, value, options)
            resolved, messages = _resolve(host_templar, value, secret)
            if resolved is _UNKNOWN_YET:
                continue
            checked += 1
            if not messages:
                messages = value_problems(name, resolved, options, secret=secret)
            report(_origin(value, "-e" if name in extra_vars else "inventory"), f"host {host}", name, messages)
    return problems, checked


def value_problems(name: str, value: Any, options: Sequence[dict[str, Any]], *, secret: bool) -> list[str]:
    """Messages for a resolved value: every declaring option spec, as Ansible's role check
    would validate it, then the one-line and value rules on the coerced value."""
    messages: list[str] = []
    coerced = value
    for option in options:
        result = ArgumentSpecValidator({name: option}).validate({name: value})
        if result.error_messages:
            # Ansible's messages quote the value.
            messages.extend([_hidden_spec(option)] if secret else [f"resolved value: {m}" for m in result.error_messages])
        else:
            coerced = result.validated_parameters.get(name, value)
    messages.extend(f"resolved value: {m}" for m in schema.single_line_problems(coerced))
    rules = value_rules.check(name, coerced)
    if rules:
        messages.extend([f"resolved value breaks the variable's rules; {HIDDEN}"] if secret else [f"resolved value: {m}" for m in rules])
    return list(dict.fromkeys(messages))


_UNKNOWN_YET = object()


def _resolve(templar: Any, value: Any, secret: bool) -> tuple[Any, list[str]]:
    try:
        return templar.template(value), []
    except AnsibleUndefinedVariable:
        return _UNKNOWN_YET, []  # names facts or play variables: the role checks it when it runs
    except AnsibleError as error:
        if secret:
            return None, [f"cannot be resolved ({type(error).__name__}); {HIDDEN}"]
        first = (error.message or str(error)).strip().splitlines()
        return None, [f"cannot be resolved: {first[0] if first else type(error).__name__}"]


def _opaque(value: Any, templar: Any) -> bool:
    """A template or a vaulted value, anywhere in ``value``."""
    if isinstance(value, str):
        return templar.is_template(value)
    return _contains(value, lambda item: isinstance(item, str) and templar.is_template(item))


def _vaulted(value: Any) -> bool:
    return _contains(value, lambda item: False)


def _contains(value: Any, leaf: Any) -> bool:
    """A vaulted value, or a leaf for which ``leaf`` is true, anywhere in ``value``."""
    if isinstance(value, EncryptedString):
        return True
    if isinstance(value, Mapping):
        return any(_contains(item, leaf) for item in value.values())
    if isinstance(value, (list, tuple)):
        return any(_contains(item, leaf) for item in value)
    return bool(leaf(value))


def _secret(name: str, value: Any, options: Sequence[dict[str, Any]]) -> bool:
    return bool(SECRET_NAME.search(name)) or any(option.get("no_log") for option in options) or _vaulted(value)


def _hidden_spec(option: dict[str, Any]) -> str:
    expected = f"type {option.get('type', 'str')}"
    if option.get("choices"):
        expected += ", one of " + ", ".join(str(choice) for choice in option["choices"])
    return f"resolved value does not fit the argument spec ({expected}); {HIDDEN}"


def _origin(value: Any, fallback: str) -> str:
    """The file a value was read from (Ansible tags values with their origin), else ``fallback``."""
    try:
        from ansible._internal._datatag._tags import Origin
    except ImportError:
        return fallback
    origin = Origin.get_tag(value)
    return str(origin.path) if origin is not None and origin.path else fallback

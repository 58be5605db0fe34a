"""The Slurm accounting tree (QOS, accounts, users' associations) as sacctmgr
has it, the difference to what the inventory declares, and the sacctmgr
commands that close it.

The logic of the ``slurm_accounting`` module, with no Ansible imports, so unit
tests drive it against recorded ``sacctmgr`` output; it ships to hosts as
module_utils and must run on the hosts' Python (3.8 and later).

State read (three ``sacctmgr --noheader --parsable2`` calls at once, fields separated by ``|``;
each spends about a third of a second waiting on slurmdbd and almost no CPU)
    ``show qos format=name,priority,preempt,preemptmode``;
    ``show association where cluster=C format=account,user,partition,parentname,share,qos,defaultqos``:
    one row per association; an account's own has no user, a user's names
    its account; partition associations are left alone;
    ``show user where cluster=C format=user,defaultaccount`` (the default
    account is per cluster: without ``cluster=`` Slurm shows the local one's).

What is compared
    QOS: priority, preempt (as a set), preempt mode. An account: its parent,
    fair-share, and, when declared, its allowed QOS (as a set) and default
    QOS. A user: membership of its accounts, its default account, and per
    association the fair-share and, when declared, the QOS and default QOS.
    Undeclared QOS lists are inherited from the parent and left alone.

What is changed
    Missing QOS added, then QOS that differ modified; accounts added parents
    first, then accounts that differ modified in the same order (so a moved
    account's new parent is already where it belongs); users' associations
    added, default accounts set, associations that differ modified. What is in
    slurmdbd but not declared is only reported, unless ``prune``: then users'
    associations are removed, then accounts, children first.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

ROOT = "root"

QOS_FORMAT = "format=name,priority,preempt,preemptmode"
ASSOC_FORMAT = "format=account,user,partition,parentname,share,qos,defaultqos"
USER_FORMAT = "format=user,defaultaccount"


class AccountingError(ValueError):
    """The declared tree cannot be applied (inconsistent input, or sacctmgr failed);
    ``applied`` names the changes made before the failure."""

    def __init__(self, message: str, applied: Sequence[str] = ()):
        super().__init__(message)
        self.applied = list(applied)
        self.problems = [message]


def read_commands(cluster: str) -> List[List[str]]:
    """The three read-only sacctmgr argument lists (after ``sacctmgr``)."""
    parsable = ["--noheader", "--parsable2"]
    return [
        parsable + ["show", "qos", QOS_FORMAT],
        parsable + ["show", "association", "where", f"cluster={cluster}", ASSOC_FORMAT],
        parsable + ["show", "user", "where", f"cluster={cluster}", USER_FORMAT],
    ]


# --------------------------------------------------------------------------
# parsing


def _names(text: str) -> Tuple[str, ...]:
    return tuple(sorted({item for item in (text or "").split(",") if item}))


def parse_qos(shown: str) -> Dict[str, Dict[str, Any]]:
    """``show qos format=name,priority,preempt,preemptmode`` -> {name: fields}."""
    found = {}
    for row in (shown or "").splitlines():
        fields = row.split("|")
        if len(fields) >= 4 and fields[0]:
            found[fields[0]] = {
                "priority": int(fields[1] or 0),
                "preempt": _names(fields[2]),
                "preempt_mode": (fields[3] or "cluster").lower(),
            }
    return found


def parse_associations(shown: str) -> Tuple[Dict[str, Dict[str, Any]], Dict[Tuple[str, str], Dict[str, Any]]]:
    """``show association ... format=account,user,partition,parentname,share,qos,defaultqos`` ->
    ({account: fields}, {(user, account): fields}); partition associations are skipped."""
    accounts: Dict[str, Dict[str, Any]] = {}
    users: Dict[Tuple[str, str], Dict[str, Any]] = {}
    for row in (shown or "").splitlines():
        fields = row.split("|")
        if len(fields) < 7 or not fields[0] or fields[2]:
            continue
        account, user, _partition, parent, share, qos, default_qos = fields[:7]
        record = {"fairshare": _share(share), "qos": _names(qos), "default_qos": default_qos}
        if user:
            users[(user, account)] = record
        else:
            accounts[account] = dict(record, parent=parent)
    return accounts, users


def _share(text: str) -> Any:
    text = (text or "").strip()
    if text.isdigit():
        return int(text)
    return text.lower() or 1


def parse_default_accounts(shown: str) -> Dict[str, str]:
    """``show user format=user,defaultaccount`` -> {user: default account}."""
    found = {}
    for row in (shown or "").splitlines():
        user, _sep, account = row.partition("|")
        if user:
            found[user] = account
    return found


# --------------------------------------------------------------------------
# the declared tree, normalised


def _list(value: Any) -> Optional[Tuple[str, ...]]:
    if value is None:
        return None
    if isinstance(value, str):
        value = value.split(",")
    return tuple(sorted({str(item) for item in value if str(item)}))


def _fairshare(value: Any, where: str, problems: List[str]) -> Any:
    if value is None:
        return 1
    if isinstance(value, str) and value.strip().lower() == "parent":
        return "parent"
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    problems.append(f"{where}: fairshare must be a whole number of at least 0 or 'parent', found {value!r}")
    return 1


def wanted_tree(
    qos: Iterable[Mapping[str, Any]],
    accounts: Iterable[Mapping[str, Any]],
    users: Iterable[Mapping[str, Any]],
    default_account: str,
    default_qos: str,
) -> Dict[str, Any]:
    """The declared tree with every default filled in, checked for consistency.

    ``default_account`` is added under root (every QOS allowed, ``default_qos``
    its default) unless ``accounts`` declares it; users that name no account
    belong to it. Root's own user association is allowed every QOS.
    """
    wanted_qos = {}
    for item in qos:
        name = str(item["name"])
        preempt = item.get("preempt") or []
        wanted_qos[name] = {
            "priority": int(item.get("priority") or 0),
            "preempt": _list(preempt) or (),
            "preempt_mode": str(item.get("preempt_mode") or "cluster").lower(),
        }
    qos_names = tuple(sorted(wanted_qos))
    problems = []

    wanted_accounts: Dict[str, Dict[str, Any]] = {}
    for item in accounts:
        name = str(item["name"])
        if name == ROOT or name in wanted_accounts:
            problems.append(f"account {name}: " + ("is Slurm's own root" if name == ROOT else "declared twice"))
            continue
        wanted_accounts[name] = {
            "parent": str(item.get("parent") or ROOT),
            "fairshare": _fairshare(item.get("fairshare"), f"account {name}", problems),
            "qos": _list(item.get("qos")),
            "default_qos": item.get("default_qos") or None,
        }
    if default_account not in wanted_accounts:
        wanted_accounts[default_account] = {"parent": ROOT, "fairshare": 1, "qos": qos_names, "default_qos": default_qos}

    wanted_users: Dict[str, Dict[str, Any]] = {
        ROOT: {"accounts": (ROOT,), "default_account": ROOT, "fairshare": None, "qos": qos_names, "default_qos": default_qos}
    }
    for item in users:
        name = str(item["name"])
        if name in wanted_users:
            problems.append(f"user {name}: " + ("is managed by deepops" if name == ROOT else "declared twice"))
            continue
        member_of = _list(item.get("accounts")) or (default_account,)
        wanted_users[name] = {
            "accounts": member_of,
            "default_account": str(item.get("default_account") or (item.get("accounts") or [default_account])[0]),
            "fairshare": _fairshare(item.get("fairshare"), f"user {name}", problems),
            "qos": _list(item.get("qos")),
            "default_qos": item.get("default_qos") or None,
        }
    problems += tree_problems(qos_names, wanted_accounts, wanted_users)
    if problems:
        error = AccountingError("; ".join(problems))
        error.problems = problems
        raise error
    return {"qos": wanted_qos, "accounts": wanted_accounts, "users": wanted_users}


def tree_problems(
    qos_names: Sequence[str], accounts: Mapping[str, Mapping[str, Any]], users: Mapping[str, Mapping[str, Any]]
) -> List[str]:
    """What makes a declared tree impossible: unknown parents, accounts or QOS,
    cycles, a default outside its list. Shared with the inventory check."""
    problems = []
    known_qos = set(qos_names)
    for name, account in accounts.items():
        parent = account.get("parent") or ROOT
        if parent != ROOT and parent not in accounts:
            problems.append(f"account {name}: parent {parent!r} is not a declared account (nor root)")
        problems += _qos_problems(f"account {name}", account, known_qos)
    for name in cycles(accounts):
        problems.append(f"account {name}: its parents lead back to it (a cycle), not to root")
    for name, user in users.items():
        member_of = list(user.get("accounts") or ())
        for account in member_of:
            if account != ROOT and account not in accounts:
                problems.append(f"user {name}: account {account!r} is not declared")
        default = user.get("default_account")
        if default and default not in member_of:
            problems.append(f"user {name}: default_account {default!r} is not one of its accounts ({', '.join(member_of)})")
        problems += _qos_problems(f"user {name}", user, known_qos)
    return problems


def _qos_problems(where: str, item: Mapping[str, Any], known_qos: set) -> List[str]:
    problems = []
    allowed = item.get("qos")
    for qos in allowed or ():
        if qos not in known_qos:
            problems.append(f"{where}: QOS {qos!r} is not one of slurm_qos ({', '.join(sorted(known_qos)) or 'none'})")
    default = item.get("default_qos")
    if default and default not in known_qos:
        problems.append(f"{where}: default_qos {default!r} is not one of slurm_qos ({', '.join(sorted(known_qos)) or 'none'})")
    elif default and allowed is not None and default not in allowed:
        problems.append(f"{where}: default_qos {default!r} is not one of its qos ({', '.join(allowed)})")
    return problems


def cycles(accounts: Mapping[str, Mapping[str, Any]]) -> List[str]:
    """Accounts whose chain of parents never reaches root (sorted)."""
    found = []
    for start in accounts:
        seen, name = set(), start
        while name in accounts and name not in seen:
            seen.add(name)
            name = accounts[name].get("parent") or ROOT
        if name in seen:
            found.append(start)
    return sorted(found)


def _top_down(accounts: Mapping[str, Mapping[str, Any]]) -> List[str]:
    """Account names, every parent before its children (siblings by name)."""
    ordered: List[str] = []
    placed = {ROOT}

    def place(name: str) -> None:
        if name in placed:
            return
        placed.add(name)
        parent = accounts[name].get("parent") or ROOT
        if parent in accounts:
            place(parent)
        ordered.append(name)

    for name in sorted(accounts):
        place(name)
    return ordered


def _depth(name: str, parents: Mapping[str, str]) -> int:
    depth, seen = 0, set()
    while name in parents and name not in seen:
        seen.add(name)
        name = parents[name]
        depth += 1
    return depth


# --------------------------------------------------------------------------
# the difference


def _qos_text(names: Sequence[str]) -> str:
    # sacctmgr reads an empty value (``qos=``) as "none".
    return ",".join(names)


def changes(wanted: Mapping[str, Any], cluster: str, qos_shown: str, assoc_shown: str, users_shown: str,
            prune: bool = False) -> Dict[str, Any]:
    """What sacctmgr must do so slurmdbd holds ``wanted`` (from :func:`wanted_tree`).

    Returns ``{'actions': [{'change': text, 'argv': [...]}], 'undeclared':
    {'accounts': [...], 'users': ['user@account', ...]}}``; ``argv`` follows
    ``sacctmgr --immediate``. Undeclared entries get remove actions only with ``prune``.
    """
    current_qos = parse_qos(qos_shown)
    current_accounts, current_users = parse_associations(assoc_shown)
    defaults = parse_default_accounts(users_shown)
    where_cluster = f"cluster={cluster}"
    actions: List[Dict[str, Any]] = []

    def act(change: str, argv: List[str]) -> None:
        actions.append({"change": change, "argv": argv})

    # QOS: names first (preempt may name a QOS added in this run), then fields.
    for name in sorted(wanted["qos"]):
        if name not in current_qos:
            act(f"add QOS {name}", ["add", "qos", name])
    for name, fields in sorted(wanted["qos"].items()):
        found = current_qos.get(name)
        if found != fields:
            act(
                f"set QOS {name}: " + _described(found, fields),
                ["modify", "qos", "where", f"name={name}", "set", f"priority={fields['priority']}",
                 f"preempt={_qos_text(fields['preempt'])}", f"preemptmode={fields['preempt_mode']}"],
            )

    # Accounts, parents first.
    accounts = wanted["accounts"]
    order = _top_down(accounts)
    # Slurm copies an account's new QOS (and a moved account's inherited ones)
    # down to the associations under it: declared QOS below such an account
    # are set again after it, or the next run would find them changed.
    reset_below = set()
    for name in order:
        if name in current_accounts:
            continue
        account = accounts[name]
        argv = ["add", "account", name, where_cluster, f"parent={account['parent']}", f"fairshare={account['fairshare']}"]
        if account["qos"] is not None:
            argv.append(f"qos={_qos_text(account['qos'])}")
        if account["default_qos"]:
            argv.append(f"defaultqos={account['default_qos']}")
        act(f"add account {name} under {account['parent']}", argv)
    for name in order:
        found = current_accounts.get(name)
        if found is None:
            continue
        account = accounts[name]
        settings = _settings(found, account, ("parent", "fairshare", "qos", "default_qos"),
                             force=_under(name, reset_below, accounts))
        if any(key in ("parent", "qos", "default_qos") for key, _value in settings):
            reset_below.add(name)
        if settings:
            act(f"set account {name}: " + _described(found, account, [key for key, _value in settings]),
                ["modify", "account", "where", f"name={name}", where_cluster, "set"] + _set_args(settings))

    # Users: associations, default accounts, per-association settings.
    for name, user in sorted(wanted["users"].items()):
        member_of = [user["default_account"]] + [a for a in user["accounts"] if a != user["default_account"]]
        new_user = not any(key[0] == name for key in current_users)
        for account in member_of:
            if (name, account) in current_users:
                continue
            argv = ["add", "user", name, f"account={account}", where_cluster]
            if new_user:
                argv.append(f"defaultaccount={user['default_account']}")
                new_user = False
            if user["fairshare"] is not None:
                argv.append(f"fairshare={user['fairshare']}")
            if user["qos"] is not None:
                argv.append(f"qos={_qos_text(user['qos'])}")
            if user["default_qos"]:
                argv.append(f"defaultqos={user['default_qos']}")
            act(f"add user {name} to account {account}", argv)
        if any(key[0] == name for key in current_users) and defaults.get(name) != user["default_account"]:
            act(f"set user {name}: default account {defaults.get(name) or '(none)'} -> {user['default_account']}",
                ["modify", "user", "where", f"name={name}", where_cluster, "set", f"defaultaccount={user['default_account']}"])
        for account in member_of:
            found = current_users.get((name, account))
            if found is None:
                continue
            settings = _settings(found, user, ("fairshare", "qos", "default_qos"),
                                 force=account in reset_below or _under(account, reset_below, accounts))
            if settings:
                act(f"set user {name} in account {account}: " + _described(found, user, [key for key, _value in settings]),
                    ["modify", "user", "where", f"name={name}", f"account={account}", where_cluster, "set"]
                    + _set_args(settings))

    # What slurmdbd has and the inventory does not declare.
    undeclared_users = sorted(
        key for key in current_users
        if key[0] not in wanted["users"] or key[1] not in wanted["users"][key[0]]["accounts"]
    )
    parents = {name: found["parent"] for name, found in current_accounts.items()}
    undeclared_accounts = sorted(
        (name for name in current_accounts if name != ROOT and name not in accounts),
        key=lambda name: (-_depth(name, parents), name),
    )
    if prune:
        # One association at a time, a user's default last: Slurm refuses to
        # remove a default account while others remain, even all in one command.
        for user, account in sorted(undeclared_users, key=lambda key: (key[0], key[1] == defaults.get(key[0]), key[1])):
            act(f"remove user {user} from account {account}",
                ["remove", "user", "where", f"name={user}", f"account={account}", where_cluster])
        for name in undeclared_accounts:
            act(f"remove account {name}", ["remove", "account", "where", f"name={name}", where_cluster])
    return {
        "actions": actions,
        "undeclared": {"accounts": undeclared_accounts, "users": [f"{u}@{a}" for u, a in undeclared_users]},
    }


def _comparable(key: str, value: Any) -> Any:
    if key == "default_qos":
        return value or ""
    return value


def _settings(found: Mapping[str, Any], wanted: Mapping[str, Any], keys: Sequence[str],
              force: bool = False) -> List[Tuple[str, Any]]:
    """(key, wanted value) for each key that is managed (not None) and differs;
    with ``force``, the declared QOS and default QOS even where they match."""
    differing = []
    for key in keys:
        value = wanted.get(key)
        if value is None:
            continue
        if _comparable(key, found.get(key)) != _comparable(key, value) or (force and key in ("qos", "default_qos")):
            differing.append((key, value))
    return differing


def _under(name: str, ancestors: set, accounts: Mapping[str, Mapping[str, Any]]) -> bool:
    """Whether one of ``ancestors`` is above account ``name`` in the declared tree."""
    seen = set()
    parent = (accounts.get(name) or {}).get("parent")
    while parent in accounts and parent not in seen:
        if parent in ancestors:
            return True
        seen.add(parent)
        parent = accounts[parent].get("parent")
    return False


_SACCTMGR_KEYS = {"parent": "parent", "fairshare": "fairshare", "qos": "qos", "default_qos": "defaultqos"}


def _set_args(settings: Sequence[Tuple[str, Any]]) -> List[str]:
    args = []
    for key, value in settings:
        text = _qos_text(value) if key == "qos" else str(value)
        args.append(f"{_SACCTMGR_KEYS[key]}={text}")
    return args


def _show(value: Any) -> str:
    if isinstance(value, tuple):
        return ",".join(value) or "(none)"
    return str(value) if value not in (None, "") else "(none)"


def _described(found: Optional[Mapping[str, Any]], wanted: Mapping[str, Any], keys: Optional[Sequence[str]] = None) -> str:
    """``priority 10 -> 20, preempt (none) -> low`` for the keys that differ."""
    keys = list(keys) if keys is not None else list(wanted)
    parts = []
    for key in keys:
        before = (found or {}).get(key)
        if found is None or _comparable(key, before) != _comparable(key, wanted.get(key)):
            parts.append(f"{key.replace('_', ' ')} {_show(before) if found else '(new)'} -> {_show(wanted.get(key))}")
    return ", ".join(parts) or "QOS set again (Slurm copied an account's above it down)"


# --------------------------------------------------------------------------
# read, compare, apply


def apply(run: Callable[[List[str]], Tuple[int, str, str]], sacctmgr: str, cluster: str, wanted: Mapping[str, Any],
          prune: bool = False, check_mode: bool = False) -> Dict[str, Any]:
    """Read the tree once, apply what differs (nothing in check mode).

    ``run(argv) -> (rc, stdout, stderr)``. Returns the module's result:
    ``changed``, ``changes`` (what was, or would be, done), ``commands``,
    ``undeclared`` and ``warnings``.
    """
    def read() -> Dict[str, Any]:
        commands = read_commands(cluster)
        with ThreadPoolExecutor(max_workers=len(commands)) as pool:
            results = list(pool.map(lambda argv: run([sacctmgr] + argv), commands))
        outputs = []
        for argv, (rc, out, err) in zip(commands, results):
            if rc != 0:
                raise AccountingError(f"sacctmgr {' '.join(argv)} failed (rc={rc}): {(err or out).strip()}", applied=done)
            outputs.append(out)
        return changes(wanted, cluster, outputs[0], outputs[1], outputs[2], prune=prune)

    done: List[str] = []
    found = read()
    if not check_mode:
        for action in found["actions"]:
            argv = [sacctmgr, "--immediate"] + action["argv"]
            rc, out, err = run(argv)
            if rc != 0:
                raise AccountingError(
                    f"{action['change']}: sacctmgr {' '.join(action['argv'])} failed (rc={rc}): {(err or out).strip()}"
                    + (f"; already applied: {'; '.join(done)}" if done else "; nothing was changed"),
                    applied=done,
                )
            done.append(action["change"])
        # sacctmgr exits 0 on some refusals (a default QOS outside the new list):
        # read again, so a change that did not hold fails here, not silently.
        left = read()["actions"] if done else []
        if left:
            raise AccountingError(
                "sacctmgr accepted but slurmdbd does not show: " + "; ".join(action["change"] for action in left)
                + " (sacctmgr refuses some changes with exit 0, such as a default QOS outside a new QOS list: declare default_qos)",
                applied=done,
            )
    warnings = []
    undeclared = found["undeclared"]
    if not prune and (undeclared["accounts"] or undeclared["users"]):
        parts = []
        if undeclared["accounts"]:
            parts.append("accounts " + ", ".join(undeclared["accounts"]))
        if undeclared["users"]:
            parts.append("user associations " + ", ".join(undeclared["users"]))
        warnings.append(
            f"slurmdbd (cluster {cluster}) has {' and '.join(parts)} that the inventory does not declare; "
            "kept (slurm_accounts_prune: true removes them)"
        )
    return {
        "changed": bool(found["actions"]),
        "changes": [action["change"] for action in found["actions"]],
        "commands": [["sacctmgr", "--immediate"] + action["argv"] for action in found["actions"]],
        "undeclared": undeclared,
        "warnings": warnings,
    }

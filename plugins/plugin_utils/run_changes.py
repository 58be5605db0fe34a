"""Whether anything in this run has changed a host yet, as the workers can know it.

Ansible runs each task in a worker process forked from the controller's
process, after the results of the tasks before it were processed there. The
callback deepops.cluster.run_changes (plugins/callback/run_changes.py) updates
this module in the controller's process as results arrive, so each worker
inherits, at its fork, what the tasks before it did.

Read by managed_files (plugins/action/managed_files.py): a host's state read
at the start of the run stands for its state now only while no task in the run
has changed anything, on any host (a change on one host may reach another
through a shared file system).
"""

from __future__ import annotations

import secrets

# Set when the callback saw the playbook start: without it (the callback not
# enabled) nothing is known about the run, and nothing may be assumed.
_tracking = False
_changed = False
# A key for the run's digests of file contents (host_reads file_states): they
# show in the run's results, and a plain hash of a file that holds a password
# could be guessed back. Made per run, kept in the controller's memory only.
_key = ""


def start() -> None:
    global _tracking, _changed, _key  # the process's one record of its run
    _tracking, _changed, _key = True, False, secrets.token_hex(32)


def run_key() -> str:
    """The run's digest key; empty where the callback does not track the run."""
    return _key if _tracking else ""


def note(changed: bool) -> None:
    """One task result on one host: whether it (or any item of its loop) changed something."""
    global _changed
    if changed:
        _changed = True


def unchanged_so_far() -> bool:
    """True only where the callback tracks this run and no result so far reported a change."""
    return _tracking and not _changed

"""Action plugin deepops.cluster.local_secret: a password or key made once beside the inventory.

Runs on the controller only, in the plugin's own process (no module is sent
anywhere): plugins/plugin_utils/local_secrets.py makes the file when missing
and keeps it and its directory private. A password comes back in the result,
so such a task must be ``no_log``; a key's bytes never do. Check mode makes
the file too: a plan must render what a deploy would, and the file changes no
host.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.deepops.cluster.plugins.plugin_utils import local_secrets
from ansible_collections.deepops.cluster.plugins.plugin_utils.controller_action import ControllerAction


class ActionModule(ControllerAction):
    ARGS = ("path", "kind", "size")

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        args = self._task.args
        unknown = self.unknown_arguments()
        path, kind, size = args.get("path"), args.get("kind", "password"), args.get("size", 32)
        if unknown or not isinstance(path, str) or not path.startswith("/") or isinstance(size, bool):
            result.update(failed=True, msg=f"local_secret takes path (absolute), kind and size; got {sorted(args)}")
            return result
        try:
            secret = local_secrets.ensure(path, str(kind), int(size))
        except (OSError, ValueError, TypeError) as error:
            result.update(failed=True, msg=f"secret {path}: {error}")
            return result
        result.update(changed=secret.changed, path=str(secret.path))
        if secret.password is not None:
            result["password"] = secret.password
        return result

"""Action plugin deepops.cluster.monitoring_credentials: the monitoring endpoints' account and TLS material.

Runs on the controller only (plugins/plugin_utils/monitoring_credentials.py
makes and reads the files in ``secrets/`` beside the inventory); the task's
result carries the password, its bcrypt hash and the PEM texts, so the task
must be ``no_log``. Check mode makes the files too: a plan must render the
same configuration a deploy would, and the files change no host.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.deepops.cluster.plugins.plugin_utils import monitoring_credentials
from ansible_collections.deepops.cluster.plugins.plugin_utils.controller_action import ControllerAction


class ActionModule(ControllerAction):
    ARGS = ("directory", "names", "password")

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        args = self._task.args
        unknown = self.unknown_arguments()
        names = args.get("names") or []
        if unknown or not args.get("directory") or not isinstance(names, list) or not names:
            result.update(failed=True, msg="monitoring_credentials takes directory, names (a non-empty list) and "
                                           f"an optional password; got {sorted(args)}")
            return result
        try:
            found = monitoring_credentials.ensure(str(args["directory"]), [str(name) for name in names],
                                                  str(args.get("password") or ""))
        except (OSError, ValueError) as error:
            result.update(failed=True, msg=f"monitoring credentials in {args['directory']}: {error}")
            return result
        result.update(
            changed=bool(found.created), created=list(found.created), password=found.password,
            password_bcrypt=found.password_bcrypt, ca_cert=found.ca_cert, server_cert=found.server_cert,
            server_key=found.server_key,
        )
        return result

"""The Slurm REST API exercised as a client would: shared by the integration
suite (Debian 12, Slurm 22.05) and molecule/cluster (Debian 13, 24.11).

Requests go from a cluster node (``run`` runs a shell command there and
returns its standard output) to slurmrestd on the controller, with the
host's python3 as the HTTP client: the node image has no curl.
"""

from __future__ import annotations

import base64
import json
import re
import shlex
import time
from collections.abc import Callable

PORT = 6820  # the slurm role's default slurm_restd_listen

_CLIENT = r"""
import json, sys, urllib.error, urllib.request
url, headers, body = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
request = urllib.request.Request(url, data=body.encode() or None, headers=headers)
try:
    with urllib.request.urlopen(request, timeout=30) as answer:
        print(answer.status)
        print(answer.read().decode())
except urllib.error.HTTPError as error:
    print(error.code)
    print(error.read().decode())
except OSError as error:  # not answered at all: status 0 and why
    print(0)
    print(error)
"""


def request(run: Callable[[str], str], url: str, user: str | None = None, token: str | None = None,
            body: dict | None = None) -> tuple[int, str]:
    """(HTTP status, body) of a GET (or a POST of BODY as JSON) to URL; status 0 when nothing answered."""
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers.update({"X-SLURM-USER-NAME": user or "root", "X-SLURM-USER-TOKEN": token})
    # One line without quotes of its own: it passes ssh and testinfra's backends unchanged.
    program = f"import base64; exec(base64.b64decode('{base64.b64encode(_CLIENT.encode()).decode()}'))"
    argv = ["python3", "-c", program, url, json.dumps(headers), json.dumps(body) if body else ""]
    status, _newline, text = run(shlex.join(argv)).partition("\n")
    return int(status), text


def newest_version(openapi: str) -> str:
    """The newest slurmctld API version among an OpenAPI document's paths (22.05: v0.0.38)."""
    paths = json.loads(openapi).get("paths") or {}
    versions = {match.group(1) for path in paths if (match := re.fullmatch(r"/slurm/(v0\.0\.[0-9]+)/nodes/?", path))}
    if not versions:
        raise AssertionError("the OpenAPI document lists no /slurm/<version>/nodes: " + openapi[:500])
    return max(versions, key=lambda name: int(name.rsplit(".", 1)[1]))


def submission(version: str, name: str, script: str) -> dict:
    """A job submission in the form VERSION takes: before v0.0.39 the script
    sits beside the job and the environment is a mapping."""
    job = {"name": name, "current_working_directory": "/tmp"}
    if int(version.rsplit(".", 1)[1]) < 39:
        return {"script": script, "job": {**job, "environment": {"PATH": "/usr/bin:/bin"}}}
    return {"job": {**job, "script": script, "environment": ["PATH=/usr/bin:/bin"]}}


def exercise(run_client: Callable[[str], str], run_controller: Callable[[str], str], controller: str,
             computes: list[str]) -> None:
    """No token or a forged one is refused; a token from `scontrol token` lists
    the nodes and submits a job that completes (sacct has it).

    slurmrestd passes the token on and slurmctld checks it: without one every
    request is refused (401); a forged one gets the OpenAPI document (which
    asks nothing of slurmctld) but no answer from Slurm (22.05: 500)."""
    base = f"http://{controller}:{PORT}"
    assert request(run_client, f"{base}/openapi/v3")[0] == 401
    token = run_controller("scontrol token lifespan=600").strip().removeprefix("SLURM_JWT=")
    status, spec = request(run_client, f"{base}/openapi/v3", token=token)
    assert status == 200, spec[:2000]
    version = newest_version(spec)
    assert request(run_client, f"{base}/slurm/{version}/nodes")[0] == 401
    forged = request(run_client, f"{base}/slurm/{version}/nodes", token="eyJhbGciOiJIUzI1NiJ9.e30.forged")
    assert forged[0] >= 400 and not json.loads(forged[1]).get("nodes"), forged
    status, body = request(run_client, f"{base}/slurm/{version}/nodes", token=token)
    assert status == 200, body[:2000]
    assert {node["name"] for node in json.loads(body)["nodes"]} >= set(computes)
    status, body = request(run_client, f"{base}/slurm/{version}/job/submit", token=token,
                           body=submission(version, "rest-api", "#!/bin/sh\nhostname\n"))
    assert status == 200, body[:2000]
    job_id = json.loads(body)["job_id"]
    record = ""
    for _ in range(30):  # slurmdbd stores the record shortly after the job ends (22.05 showed "allocation" as its name first)
        record = run_controller(f"sacct --noheader --parsable2 -X -j {job_id} --format=State,JobName").strip()
        if record == "COMPLETED|rest-api":
            break
        time.sleep(2)
    assert record == "COMPLETED|rest-api", record

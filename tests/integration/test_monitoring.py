"""Monitoring on the virtual cluster: real Prometheus, Alertmanager, node_exporter
and the Slurm exporter; the DCGM exporter is the virtual cluster's stand-in.

Deploys with short for:/scrape intervals and a webhook receiver that runs inside
the controller (tests/support/webhook_receiver.py), then checks: every target up,
every dashboard query returns data, a stopped compute node fires NodeDown at the
receiver and resolves when it comes back, a running GPU job matches squeue, and
no secret appears in the run artifacts.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import tempfile
import time
import urllib.parse
from pathlib import Path

import pytest
from aptrepo import FakePackage, build_repo, signing_key
from polling import wait_for

REPO = Path(__file__).resolve().parents[2]

REMOTE_REPO = "/srv/deepops-grafana-standin"
DASHBOARDS = sorted((REPO / "roles" / "grafana" / "files" / "dashboards").glob("*.json"))
RECEIVER_PORT = 9099
RECEIVER_LOG = "/tmp/deepops-webhook-alerts.jsonl"
SCRAPE_S, NODE_DOWN_FOR_S = 5, 15
SHORT = [
    "-e", f"prometheus_scrape_interval={SCRAPE_S}s", "-e", f"prometheus_evaluation_interval={SCRAPE_S}s",
    "-e", f"prometheus_alert_node_down_for={NODE_DOWN_FOR_S}s",
    "-e", "alertmanager_group_wait=5s", "-e", "alertmanager_group_interval=10s",
    "-e", json.dumps({"alertmanager_webhook_urls": [f"http://127.0.0.1:{RECEIVER_PORT}/alerts"]}),
    "-e", "grafana_enabled=true",
    "-e", f"grafana_apt_repository_url=file://{REMOTE_REPO}",
    "-e", "grafana_apt_repository_components=/",
    "-e", f"grafana_apt_repository_key_url=file://{REMOTE_REPO}/gpg.key",
]

# The monitoring account (roles/monitoring_auth) as root on the controller reads it.
AUTH_DIR = "/etc/deepops/monitoring"
AUTH = f'--cacert {AUTH_DIR}/ca.crt -u "deepops:$(cat {AUTH_DIR}/password)"'
# Where they listen: the controller's cluster address, which its name maps to (not localhost).
PROMETHEUS, ALERTMANAGER = "https://ctl01:9090", "https://ctl01:9093"

GRAFANA_VERSION = "12.3.0"

GRAFANA = r'''#!/usr/bin/python3
"""STAND-IN grafana server from deepops' test repository (not Grafana)."""
import base64, configparser, glob, json, os, re, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

def option(name, default):
    for arg in sys.argv:
        if arg.startswith(f"--{name}="):
            return arg.split("=", 1)[1]
    return default

def expand(value):
    # Grafana's $__file{path} expansion; an unreadable file is a start-up error.
    return re.sub(r"\$__file\{([^}]*)\}", lambda m: open(m.group(1)).read().strip(), value)

ini = configparser.ConfigParser(interpolation=None, comment_prefixes=(";", "#"))
ini.read(option("config", "/etc/grafana/grafana.ini"))
port = ini.getint("server", "http_port", fallback=3000)
user = ini.get("security", "admin_user", fallback="admin")
password = expand(ini.get("security", "admin_password", fallback="admin"))
anonymous = ini.getboolean("auth.anonymous", "enabled", fallback=False)
provisioning = ini.get("paths", "provisioning", fallback="/etc/grafana/provisioning")

datasources = {}
for path in glob.glob(f"{provisioning}/datasources/*.yml"):
    text = open(path).read()
    for uid, url in zip(re.findall(r"^\s*uid:\s*(\S+)", text, re.M), re.findall(r"^\s*url:\s*(\S+)", text, re.M)):
        datasources[uid] = {"uid": uid, "url": url}
dashboards, problems = [], []
for path in glob.glob(f"{provisioning}/dashboards/*.yml"):
    for folder in re.findall(r"^\s*path:\s*(\S+)", open(path).read(), re.M):
        for board in sorted(glob.glob(f"{folder}/*.json")):
            try:
                data = json.load(open(board))
            except ValueError as error:
                problems.append(f"{board}: {error}")
                continue
            dashboards.append({"uid": data["uid"], "title": data["title"], "type": "dash-db"})
            for panel in data.get("panels", []):
                for ref in [panel.get("datasource") or {}] + [t.get("datasource") or {} for t in panel.get("targets", [])]:
                    if ref.get("uid") not in datasources:
                        problems.append(f"{board}: panel {panel.get('id')} uses unknown datasource {ref.get('uid')}")
for problem in problems:
    print(problem, file=sys.stderr, flush=True)

class Handler(BaseHTTPRequestHandler):
    def reply(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        path = self.path.split("?")[0]
        if path == "/api/health":
            return self.reply(200, {"database": "ok", "version": "stand-in"})
        expected = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
        if not anonymous and self.headers.get("Authorization") != expected:
            return self.reply(401, {"message": "Unauthorized"})
        if path == "/api/search":
            return self.reply(200, dashboards)
        if path == "/api/deepops-standin/problems":
            return self.reply(200, problems)
        if path.startswith("/api/datasources/uid/") and path.rsplit("/", 1)[1] in datasources:
            return self.reply(200, datasources[path.rsplit("/", 1)[1]])
        return self.reply(404, {"message": "Not found"})

    def log_message(self, *_args):
        pass

ThreadingHTTPServer(("0.0.0.0", port), Handler).serve_forever()
'''

UNIT = """[Unit]
Description=Grafana instance (deepops test stand-in)
Wants=network-online.target
After=network-online.target

[Service]
User=grafana
Group=grafana
ExecStart=/usr/share/grafana/bin/grafana server --config=/etc/grafana/grafana.ini --homepath=/usr/share/grafana
Restart=on-failure
RestartSec=2

[Install]
WantedBy=multi-user.target
"""

POSTINST = """#!/bin/sh
set -e
getent group grafana >/dev/null || groupadd --system grafana
getent passwd grafana >/dev/null || useradd --system --gid grafana --home-dir /usr/share/grafana --no-create-home --shell /usr/sbin/nologin grafana
mkdir -p /var/lib/grafana /var/log/grafana /etc/grafana
chown grafana:grafana /var/lib/grafana /var/log/grafana
systemctl daemon-reload >/dev/null 2>&1 || true
"""


def grafana_package() -> FakePackage:
    return FakePackage("grafana", GRAFANA_VERSION, depends=("python3",), postinst=POSTINST, files={
        "/usr/share/grafana/bin/grafana": GRAFANA,
        "/lib/systemd/system/grafana-server.service": UNIT,
    })


def _grafana_repo_into_controller(cluster) -> None:
    with tempfile.TemporaryDirectory(prefix="deepops-grafana-repo-") as work, signing_key() as (home, _):
        repo = Path(work) / "repo"
        build_repo(repo, [grafana_package()], signing_home=home)
        armored = subprocess.run(["gpg", "--homedir", str(home), "--armor", "--export"], check=True,
                                 capture_output=True).stdout
        (repo / "gpg.key").write_bytes(armored)
        cluster.ssh("ctl01", f"rm -rf {REMOTE_REPO} && mkdir -p /srv")
        subprocess.run(["docker", "cp", str(repo), f"{cluster.container('ctl01')}:{REMOTE_REPO}"],
                       check=True, capture_output=True)
    cluster.ssh("ctl01", f"chmod -R a+rX {REMOTE_REPO}")


@pytest.fixture(scope="module")
def monitored(cluster):
    _grafana_repo_into_controller(cluster)
    result = cluster.deepops("deploy", *SHORT, "--json", timeout=2400)
    assert result.rc == 0, result.stdout[-4000:] + result.stderr[-4000:]
    cluster.grafana_deploy = result
    script = (REPO / "tests" / "support" / "webhook_receiver.py").read_text()
    cluster.ssh("ctl01", f"cat > /usr/local/bin/deepops-test-webhook <<'EOF'\n{script}\nEOF\n"
                         "chmod 755 /usr/local/bin/deepops-test-webhook")
    cluster.ssh("ctl01", f"rm -f {RECEIVER_LOG}; systemd-run --unit=deepops-test-webhook --collect "
                         f"/usr/local/bin/deepops-test-webhook {RECEIVER_PORT} {RECEIVER_LOG} || "
                         "systemctl restart deepops-test-webhook")
    yield cluster
    cluster.ssh("ctl01", "systemctl stop deepops-test-webhook", check=False)
    # Later modules deploy without Grafana: leave no source pointing at the stand-in repository.
    cluster.ssh("ctl01", "systemctl disable --now grafana-server.service; apt-get purge -y -q grafana; "
                         "rm -f /etc/apt/sources.list.d/deepops-grafana.list /etc/apt/keyrings/deepops-grafana.asc; "
                         f"rm -rf {REMOTE_REPO} /etc/grafana /var/lib/grafana", check=False)


# What a MIG instance's series carry (dcgm-exporter's label), and no other series do.
MIG_LABEL = "GPU_I_PROFILE"


def dashboard_queries_without_data(cluster, mig: bool) -> list[str]:
    """Every dashboard query (MIG-only ones, asking for MIG_LABEL, when MIG, else the others) that
    returns nothing from the live Prometheus, as "dashboard: panel: query"."""
    empty = []
    for path in DASHBOARDS:
        for panel in json.loads(path.read_text())["panels"]:
            for target in panel["targets"]:
                if (MIG_LABEL in target["expr"]) != mig:
                    continue
                expr = target["expr"].replace("$node", ".*").replace("$__rate_interval", "1m")
                if not promql(cluster, expr):
                    empty.append(f"{path.name}: {panel['title']}: {expr}")
    return empty


def promql(cluster, query: str) -> list[dict]:
    url = f"{PROMETHEUS}/api/v1/query?query=" + urllib.parse.quote(query)
    out = cluster.ssh("ctl01", f"curl -sf --max-time 10 {AUTH} '{url}'").stdout
    data = json.loads(out)
    assert data["status"] == "success", data
    return data["data"]["result"]


def test_every_target_is_up(monitored):
    def all_up():
        out = monitored.ssh("ctl01", f"curl -sf {AUTH} {PROMETHEUS}/api/v1/targets").stdout
        targets = json.loads(out)["data"]["activeTargets"]
        return targets if targets and all(t["health"] == "up" for t in targets) else None

    targets = wait_for(all_up, 60)
    assert targets, "not every Prometheus target is up"
    jobs = {(t["labels"]["job"], t["labels"]["node"]) for t in targets}
    for host in monitored.hosts:
        assert ("node", host) in jobs
    assert {("dcgm", "gpu01"), ("dcgm", "gpu02"), ("slurm", "ctl01"), ("prometheus", "ctl01"),
            ("alertmanager", "ctl01")} <= jobs


def test_gpu_job_in_slurm_exporter_matches_squeue_and_dashboards_have_data(monitored):
    job = monitored.ssh("ctl01", "sbatch --parsable --gpus=2 --nodelist=gpu01 --job-name=mon-test "
                                 "--time=5 --wrap='sleep 300'").stdout.strip().split(";")[0]
    try:
        squeue = wait_for(lambda: (monitored.ssh("ctl01", f"squeue -h -j {job} -o '%T|%u|%N|%a'").stdout.strip()
                                   .startswith("RUNNING") and monitored.ssh("ctl01", f"squeue -h -j {job} -o '%T|%u|%N|%a'")
                                   .stdout.strip()), 60)
        assert squeue, f"job {job} did not start"
        _, user, node, account = squeue.split("|")

        def exported():
            rows = promql(monitored, f'slurm_job_gpus{{job_id="{job}"}}')
            return rows[0] if rows else None

        row = wait_for(exported, 60)
        assert row, "running job not in slurm_job_gpus"
        assert row["metric"]["user"] == user and row["metric"]["nodes"] == node and row["metric"]["account"] == account
        assert float(row["value"][1]) == 2
        # node numbers against Slurm's own view (the exporter caches, so allow it a scrape or two)
        def node_gpus_match() -> bool:
            for host in monitored.hosts:
                if not host.startswith("gpu"):
                    continue
                total = promql(monitored, f'slurm_node_gpus_total{{node="{host}"}}')
                allocated = promql(monitored, f'slurm_node_gpus_allocated{{node="{host}"}}')
                gres = monitored.ssh("ctl01", f"sinfo -h -N -n {host} -o %G").stdout.strip()  # gpu:h100:8
                alloc_tres = monitored.ssh("ctl01", f"scontrol show node {host}").stdout
                used = re.search(r"AllocTRES=\S*gres/gpu=(\d+)", alloc_tres)
                if not total or not allocated:
                    return False
                if float(total[0]["value"][1]) != int(gres.split(":")[-1].split("(")[0]):
                    return False
                if float(allocated[0]["value"][1]) != (int(used.group(1)) if used else 0):
                    return False
            running = monitored.ssh("ctl01", "squeue -h -t RUNNING -o %i").stdout.split()
            exported = promql(monitored, 'sum(slurm_queue_jobs{state="running"})')
            return bool(exported) and float(exported[0]["value"][1]) == len(running)

        assert wait_for(node_gpus_match, 60), "exporter's GPU and queue numbers differ from sinfo/scontrol/squeue"
        # the job id reaches the GPU metrics through the prolog's job mapping
        mapped = wait_for(lambda: promql(monitored, f'DCGM_FI_DEV_GPU_UTIL{{hpc_job="{job}"}}'), 60)
        assert mapped and len(mapped) == 2, "prolog job mapping did not reach the DCGM metrics"

        time.sleep(2 * SCRAPE_S)
        # MIG panels have data only with a MIG layout applied: test_mig.py checks them then
        assert dashboard_queries_without_data(monitored, mig=False) == [], "dashboard queries without data"
    finally:
        monitored.ssh("ctl01", f"scancel {job}", check=False)


def _alerts(cluster) -> list[dict]:
    out = cluster.ssh("ctl01", f"cat {RECEIVER_LOG} 2>/dev/null || true").stdout
    return [alert for line in out.splitlines() if line.strip() for alert in json.loads(line)["alerts"]]


def test_node_down_fires_at_the_receiver_and_resolves(monitored):
    container = monitored.container("gpu02")
    subprocess.run(["docker", "stop", container], check=True, capture_output=True, timeout=120)
    stopped = time.monotonic()
    try:
        # firing within for: + two scrape intervals (+ Alertmanager's group_wait and evaluation)
        firing = wait_for(lambda: [a for a in _alerts(monitored) if a["labels"]["alertname"] == "NodeDown"
                                   and a["labels"]["node"] == "gpu02" and a["status"] == "firing"], 90, 1)
        assert firing, "NodeDown for gpu02 never reached the webhook receiver"
        fired_after = time.monotonic() - stopped
        # for: + two scrape intervals, + Alertmanager's group_wait (5 s) and one rule
        # evaluation, + 15 s for a loaded machine and this loop's polling over ssh
        assert fired_after <= NODE_DOWN_FOR_S + 2 * SCRAPE_S + 5 + SCRAPE_S + 15, f"NodeDown took {fired_after:.0f} s"
        rule_fired = promql(monitored, 'ALERTS{alertname="NodeDown", node="gpu02", alertstate="firing"}')
        assert rule_fired
        alert = firing[0]
        assert alert["labels"]["gpu"] == "all" and alert["annotations"]["runbook"]
        # inhibition: gpu02's other alerts (its DCGM target) are not delivered
        assert not [a for a in _alerts(monitored) if a["labels"]["node"] == "gpu02" and a["labels"]["alertname"] != "NodeDown"]
        print(f"NodeDown reached the receiver {fired_after:.0f} s after the stop")
    finally:
        subprocess.run(["docker", "start", container], check=True, capture_output=True, timeout=120)
        # A restarted container gets a new SSH port: refresh the inventory.
        monitored.deepops("virtual", "up", check=True, timeout=600)
        # It may get a new address too (docker usually hands back the old one on
        # this private network): then the cluster's /etc/hosts is stale and only a
        # redeploy makes gpu02 reachable again. Otherwise no redeploy is needed:
        # its units are enabled and come back with it, and every later module
        # deploys before it starts (a whole deploy here costs minutes of CI time).
        address = subprocess.run(["docker", "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}",
                                  container], check=True, capture_output=True, text=True).stdout.strip()
        known = monitored.ssh("ctl01", "getent hosts gpu02").stdout.split()
        if not known or known[0] != address:
            print(f"gpu02 moved from {known[:1]} to {address}: redeploying")
            redeploy = monitored.deepops("deploy", *SHORT, "--json", timeout=1200)
            assert redeploy.rc == 0, redeploy.stdout[-4000:] + redeploy.stderr[-4000:]
    resolved = wait_for(lambda: [a for a in _alerts(monitored) if a["labels"]["alertname"] == "NodeDown"
                                 and a["labels"]["node"] == "gpu02" and a["status"] == "resolved"], 120, 2)
    assert resolved, "NodeDown for gpu02 was not resolved after the node came back"
    idle = wait_for(lambda: monitored.ssh("ctl01", "sinfo -h -n gpu02 -o %t").stdout.strip() in ("idle", "mix", "alloc"), 120)
    assert idle, "gpu02 did not return to service in Slurm"


def test_prometheus_rules_and_config_are_clean_on_the_controller(monitored):
    out = monitored.ssh("ctl01", "promtool check config /etc/prometheus/prometheus.yml && "
                                 f"promtool check web-config {AUTH_DIR}/web.yml && "
                                 "amtool check-config /etc/prometheus/alertmanager.yml")
    assert "SUCCESS" in out.stdout


def _status(cluster, host: str, curl: str, user: str | None = None) -> str:
    """HTTP status of curl ARGS on HOST (as USER, else root); 000 when nothing answered."""
    command = f"curl -s -o /dev/null -w '%{{http_code}}' --max-time 10 {curl}"
    if user:
        command = f"runuser -u {user} -- {command}"
    return cluster.ssh(host, command, check=False).stdout.strip()


def test_monitoring_endpoints_refuse_users_without_the_account(monitored):
    cluster = monitored
    cluster.ssh("gpu01", "id deepops-visitor >/dev/null 2>&1 || useradd --create-home deepops-visitor")
    silence = ("-X POST -H 'Content-Type: application/json' -d "
               "'{\"matchers\": [{\"name\": \"alertname\", \"value\": \"NodeDown\", \"isRegex\": false}], "
               "\"startsAt\": \"2026-01-01T00:00:00Z\", \"endsAt\": \"2036-01-01T00:00:00Z\", "
               "\"createdBy\": \"visitor\", \"comment\": \"x\"}'")
    # an ordinary user on a compute node: Prometheus and Alertmanager ask for the account (HTTPS
    # even without checking the certificate), plain HTTP gets no answer, and no silence is made
    for url in ("https://ctl01:9090/api/v1/query?query=up", f"{silence} https://ctl01:9093/api/v2/silences"):
        assert _status(cluster, "gpu01", f"-k {url}", user="deepops-visitor") == "401", url
        assert _status(cluster, "gpu01", "-k -u deepops:guess " + url, user="deepops-visitor") == "401", url
    assert _status(cluster, "gpu01", "http://ctl01:9090/api/v1/query?query=up", user="deepops-visitor") != "200"
    # the exporters answer only with the account
    for url in ("http://gpu01:9100/metrics", "http://gpu01:9400/metrics", "http://ctl01:9341/metrics"):
        assert _status(cluster, "gpu01", url, user="deepops-visitor") == "401", url
    # on the monitoring host with the account (and the CA it trusts): they answer
    assert _status(cluster, "ctl01", f"{AUTH} {PROMETHEUS}/api/v1/query?query=up") == "200"
    assert _status(cluster, "ctl01", f"{AUTH} {ALERTMANAGER}/api/v2/status") == "200"
    assert _status(cluster, "ctl01", f'-u "deepops:$(cat {AUTH_DIR}/password)" http://gpu01:9100/metrics') == "200"
    silences = cluster.ssh("ctl01", f"curl -sf {AUTH} {ALERTMANAGER}/api/v2/silences").stdout
    assert "visitor" not in silences
    # the key and the password stay with root and Prometheus's group
    modes = cluster.ssh("ctl01", f"stat -c '%n %a %G' {AUTH_DIR}/server.key {AUTH_DIR}/password").stdout.split("\n")
    assert [line.split()[1:] for line in modes if line] == [["640", "prometheus"], ["640", "prometheus"]]
    assert cluster.ssh("gpu01", f"ls {AUTH_DIR}").stdout.split() == ["exporter-web.yml"]


def test_no_secret_in_run_artifacts(monitored):
    secrets_dir = monitored.inventory_path.parent / "secrets"
    # secrets/ holds the munge key too (binary): only the generated passwords are searched for.
    secrets = [path.read_bytes().decode(errors="replace").strip() for path in secrets_dir.glob("*") if path.is_file()]
    secrets = [secret for secret in secrets if len(secret) >= 12 and re.fullmatch(r"[A-Za-z0-9]+", secret)]
    assert {"slurmdbd_db_password", "grafana_admin_password", "monitoring_password"} <= {
        path.name for path in secrets_dir.glob("*")}
    assert len(secrets) >= 3, "expected the generated passwords (slurmdbd, Grafana, monitoring) in secrets/"
    runs = monitored.state_dir / "runs"
    leaks = []
    for path in runs.rglob("*"):
        if path.is_file():
            text = path.read_text(errors="replace")
            leaks += [f"{path}" for secret in secrets if secret in text]
    assert leaks == []


def test_grafana_installed_from_the_stand_in_repository(monitored):
    cluster = monitored
    installed = cluster.ssh("ctl01", "dpkg-query -W -f '${Version} ${db:Status-Status}' grafana").stdout
    assert installed == f"{GRAFANA_VERSION} installed"
    sources = cluster.ssh("ctl01", "cat /etc/apt/sources.list.d/deepops-grafana.list").stdout
    assert f"[signed-by=/etc/apt/keyrings/deepops-grafana.asc] file://{REMOTE_REPO} /" in sources
    assert cluster.ssh("ctl01", "systemctl is-active grafana-server.service").stdout.strip() == "active"
    assert cluster.ssh("ctl01", "systemctl is-enabled grafana-server.service").stdout.strip() == "enabled"


def test_grafana_provisioning_files_and_dashboards(monitored):
    cluster = monitored
    datasource = cluster.ssh("ctl01", "cat /etc/grafana/provisioning/datasources/deepops.yml").stdout
    assert "uid: deepops-prometheus" in datasource and "url: https://ctl01:9090" in datasource
    assert "basicAuth: true" in datasource and "tlsAuthWithCACert: true" in datasource
    provider = cluster.ssh("ctl01", "cat /etc/grafana/provisioning/dashboards/deepops.yml").stdout
    assert "path: /var/lib/grafana/dashboards/deepops" in provider
    remote = cluster.ssh("ctl01", "cd /var/lib/grafana/dashboards/deepops && sha256sum *.json").stdout
    assert dict(reversed(line.split()) for line in remote.splitlines()) == {
        path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in DASHBOARDS
    }


def test_grafana_password_file_private_and_anonymous_access_off(monitored):
    cluster = monitored
    local = cluster.inventory_path.parent / "secrets" / "grafana_admin_password"
    assert local.stat().st_mode & 0o777 == 0o600
    password = local.read_text().strip()
    assert len(password) == 32
    # On the host: readable by the grafana service (group), by no one else.
    stat = cluster.ssh("ctl01", "stat -c '%a %U %G' /etc/grafana/deepops-admin-password").stdout.split()
    assert stat == ["640", "root", "grafana"]
    assert cluster.ssh("ctl01", "cat /etc/grafana/deepops-admin-password").stdout == password
    ini = cluster.ssh("ctl01", "cat /etc/grafana/grafana.ini").stdout
    assert password not in ini
    assert "[auth.anonymous]\nenabled = false" in ini
    assert "admin_password = $__file{/etc/grafana/deepops-admin-password}" in ini
    # The running server agrees: anonymous is refused, the generated password logs in.
    anonymous = cluster.ssh("ctl01", "curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:3000/api/search").stdout
    assert anonymous == "401"
    found = cluster.ssh("ctl01", f"curl -sf -u admin:{password} http://127.0.0.1:3000/api/search").stdout
    assert sorted(board["uid"] for board in json.loads(found)) == sorted(
        json.loads(path.read_text())["uid"] for path in DASHBOARDS)
    problems = cluster.ssh("ctl01", f"curl -sf -u admin:{password} http://127.0.0.1:3000/api/deepops-standin/problems").stdout
    assert json.loads(problems) == []
    cluster.ssh("ctl01", f"curl -sf -u admin:{password} http://127.0.0.1:3000/api/datasources/uid/deepops-prometheus")


def test_no_grafana_password_in_run_artifacts(monitored):
    cluster, result = monitored, monitored.grafana_deploy
    password = (cluster.inventory_path.parent / "secrets" / "grafana_admin_password").read_text().strip()
    run_id = result.json()["run_id"]
    run_files = [path for path in (cluster.state_dir / "runs" / run_id).rglob("*") if path.is_file()]
    assert run_files, "the grafana deploy left no artifacts to search"
    leaks = [str(path) for path in (cluster.state_dir / "runs").rglob("*")
             if path.is_file() and password in path.read_text(errors="replace")]
    assert leaks == []

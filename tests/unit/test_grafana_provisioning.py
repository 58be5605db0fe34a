"""Grafana provisioning of roles/grafana, without Grafana: the datasource and
dashboard provider files rendered from the role's templates and vars, and the
dashboards it ships.

Checks: every panel, target and template variable uses the provisioned
datasource's UID; dashboards are well-formed JSON with unique UIDs, titles and
panel ids; every variable a query uses is defined; and every PromQL expression
parses, with promtool (`promtool check rules` on a generated rules file). A
missing promtool fails, it does not skip (scripts/setup.sh installs it).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import jinja2
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
ROLE = REPO / "roles" / "grafana"
DASHBOARDS = sorted((ROLE / "files" / "dashboards").glob("*.json"))
# Grafana's built-in variables, replaced the way the live check in
# tests/integration/test_monitoring.py replaces them.
BUILTINS = {"$__rate_interval": "1m", "$__interval": "1m", "$__range": "1h"}


def role_vars() -> dict:
    return {**yaml.safe_load((ROLE / "defaults" / "main.yml").read_text()),
            **yaml.safe_load((ROLE / "vars" / "main.yml").read_text())}


def render(template: str, **context) -> dict:
    """TEMPLATE with the role's variables; without the monitoring account unless CONTEXT says so."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(ROLE / "templates")), undefined=jinja2.StrictUndefined)
    env.filters["to_json"] = json.dumps
    context = {**role_vars(), "ansible_managed": "Ansible managed", "_grafana_prometheus": "http://ctl01:9090\n",
               "_grafana_auth": False, **context}
    return yaml.safe_load(env.get_template(template).render(context))


def test_with_the_monitoring_account_the_datasource_uses_https_basic_auth_and_the_ca():
    account = {"password": "pw'\"x", "ca_cert": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"}
    [source] = render("datasource.yml.j2", _grafana_auth=True, _grafana_prometheus="https://ctl01:9090\n",
                      monitoring_auth_user="deepops", __monitoring_auth=account)["datasources"]
    assert source["url"] == "https://ctl01:9090" and source["basicAuth"] is True and source["basicAuthUser"] == "deepops"
    assert source["jsonData"] == {"tlsAuthWithCACert": True}
    assert source["secureJsonData"] == {"basicAuthPassword": account["password"], "tlsCACert": account["ca_cert"]}


def datasource_uids() -> set[str]:
    return {source["uid"] for source in render("datasource.yml.j2")["datasources"]}


def dashboards() -> dict[str, dict]:
    return {path.name: json.loads(path.read_text()) for path in DASHBOARDS}


def panels(dashboard: dict) -> list[dict]:
    """Every panel, rows' nested panels included."""
    found = []
    for panel in dashboard.get("panels", []):
        found.append(panel)
        found.extend(panel.get("panels", []))
    return found


def test_there_are_dashboards_and_they_are_well_formed_json():
    assert len(DASHBOARDS) >= 4
    for name, dashboard in dashboards().items():
        assert isinstance(dashboard, dict), name
        assert dashboard.get("uid") and dashboard.get("title"), name
        assert panels(dashboard), f"{name}: no panels"


def test_dashboard_uids_and_titles_are_unique():
    boards = list(dashboards().values())
    assert len({board["uid"] for board in boards}) == len(boards)
    assert len({board["title"] for board in boards}) == len(boards)
    # Grafana's limit on dashboard UIDs
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{1,40}", board["uid"]) for board in boards)


def test_panel_ids_are_unique_integers_within_each_dashboard():
    for name, dashboard in dashboards().items():
        ids = [panel.get("id") for panel in panels(dashboard)]
        assert all(isinstance(panel_id, int) for panel_id in ids), f"{name}: panel without an integer id"
        assert len(ids) == len(set(ids)), f"{name}: duplicate panel ids {sorted(ids)}"


def test_provisioned_datasource_is_the_one_every_dashboard_references():
    uids = datasource_uids()
    assert uids == {role_vars()["_grafana_datasource_uid"]}
    source = render("datasource.yml.j2")["datasources"][0]
    assert source["type"] == "prometheus" and source["url"] == "http://ctl01:9090"
    for name, dashboard in dashboards().items():
        for panel in panels(dashboard):
            if panel.get("type") == "row":
                continue
            assert panel["datasource"]["uid"] in uids, f"{name}: panel {panel['title']!r}"
            assert panel["targets"], f"{name}: panel {panel['title']!r} has no query"
            for target in panel["targets"]:
                assert target["datasource"]["uid"] in uids, f"{name}: {panel['title']!r} target {target['refId']}"
            ref_ids = [target["refId"] for target in panel["targets"]]
            assert len(ref_ids) == len(set(ref_ids)), f"{name}: {panel['title']!r} repeats a refId"
        for variable in dashboard.get("templating", {}).get("list", []):
            if variable.get("type") == "query":
                assert variable["datasource"]["uid"] in uids, f"{name}: variable {variable['name']}"


def test_dashboard_provider_points_where_the_role_copies_the_dashboards():
    provider = render("dashboards.yml.j2")["providers"][0]
    assert provider["type"] == "file"
    assert provider["options"]["path"] == role_vars()["_grafana_dashboards_dir"]
    configure = (ROLE / "tasks" / "configure.yml").read_text()
    assert 'dest: "{{ _grafana_dashboards_dir }}/"' in configure


def test_every_variable_a_query_uses_is_defined():
    for name, dashboard in dashboards().items():
        defined = {variable["name"] for variable in dashboard.get("templating", {}).get("list", [])}
        for panel in panels(dashboard):
            for target in panel.get("targets", []):
                used = set(re.findall(r"\$\{?(\w+)", target["expr"]))
                unknown = {var for var in used if not var.startswith("__") and var not in defined}
                assert not unknown, f"{name}: {panel['title']!r} uses undefined {unknown}"


def expressions() -> list[tuple[str, str]]:
    """(where, PromQL) for every panel query and query variable, Grafana's variables substituted."""
    found = []
    for name, dashboard in dashboards().items():
        for panel in panels(dashboard):
            for target in panel.get("targets", []):
                found.append((f"{name}: {panel['title']} [{target['refId']}]", target["expr"]))
        for variable in dashboard.get("templating", {}).get("list", []):
            query = variable.get("query")
            query = query.get("query") if isinstance(query, dict) else query
            match = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", query or "")
            if match:  # Grafana's label_values(metric, label): the metric part is PromQL
                found.append((f"{name}: variable {variable['name']}", match.group(1)))
    return found


def substitute(expr: str) -> str:
    for builtin, value in BUILTINS.items():
        expr = expr.replace(builtin, value)
    return re.sub(r"\$\{?\w+\}?", ".*", expr)  # dashboard variables are regex matchers (=~"$node")


def test_every_dashboard_query_parses_with_promtool(tmp_path):
    promtool = shutil.which("promtool")
    assert promtool, "promtool not found: install Debian's prometheus package (scripts/setup.sh does)"
    queries = expressions()
    assert len(queries) >= 20
    rules = {"groups": [{"name": "dashboards", "rules": [
        {"record": f"deepops:dashboard_query_{index}", "expr": substitute(expr)} for index, (_, expr) in enumerate(queries)
    ]}]}
    path = tmp_path / "dashboards.rules.yml"
    path.write_text(yaml.safe_dump(rules, sort_keys=False))
    result = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{len(queries)} rules found" in result.stdout


@pytest.mark.parametrize("broken", ['sum(rate(node_cpu_seconds_total[5m])', "DCGM_FI_DEV_GPU_UTIL{node=~}"])
def test_promtool_check_rejects_a_broken_query(tmp_path, broken):
    """The check above can fail: promtool refuses a query that does not parse."""
    path = tmp_path / "broken.rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "x", "rules": [{"record": "deepops:x", "expr": broken}]}]}))
    result = subprocess.run([shutil.which("promtool") or "promtool", "check", "rules", str(path)], capture_output=True, text=True)
    assert result.returncode != 0


def test_grafana_ini_keeps_the_password_out_and_anonymous_access_off():
    text = (ROLE / "templates" / "grafana.ini.j2").read_text()
    section = text.split("[auth.anonymous]", 1)[1].split("[", 1)[0]
    assert re.search(r"^enabled = false$", section, re.MULTILINE)
    assert "admin_password = $__file{" in text
    assert "grafana_admin_password" not in text and "__grafana_admin_password" not in text

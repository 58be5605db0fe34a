"""The monitoring account (roles/monitoring_auth): the credentials made beside the inventory,
the web configuration files and Prometheus's configuration that use them, checked by promtool,
and the virtual cluster's stand-in DCGM exporter asking for the account."""

from __future__ import annotations

import base64
import importlib.machinery
import json
import shutil
import stat
import subprocess
import types
from pathlib import Path

import bcrypt
import pytest
import yaml
from ansible_collections.deepops.cluster.plugins.plugin_utils import monitoring_credentials as credentials
from cryptography import x509

from deepops_py.virtual import payload

REPO = Path(__file__).resolve().parents[2]
NAMES = ["ctl01", "localhost", "127.0.0.1"]


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_made_once_private_and_then_only_read(tmp_path):
    first = credentials.ensure(tmp_path / "secrets", NAMES)
    assert set(first.created) == {"monitoring_password", "monitoring-ca.crt", "monitoring-ca.key",
                                  "monitoring-server.crt", "monitoring-server.key"}
    secrets_dir = tmp_path / "secrets"
    assert mode(secrets_dir) == 0o700
    for name in ("monitoring_password", "monitoring-ca.key", "monitoring-server.key"):
        assert mode(secrets_dir / name) == 0o600, name
    assert len(first.password) == 32 and first.password.isalnum()
    again = credentials.ensure(secrets_dir, NAMES)
    assert again.created == () and again == credentials.Credentials(**{**first.__dict__, "created": ()})


def test_the_hash_is_bcrypt_of_the_password_and_the_same_every_run():
    hashed = credentials.bcrypt_hash("s3cret")
    assert hashed.startswith("$2b$") and hashed == credentials.bcrypt_hash("s3cret")
    assert bcrypt.checkpw(b"s3cret", hashed.encode()) and not bcrypt.checkpw(b"other", hashed.encode())
    assert credentials.bcrypt_hash("other") != hashed


def test_the_server_certificate_names_the_monitoring_hosts_and_comes_from_the_ca(tmp_path):
    made = credentials.ensure(tmp_path, NAMES)
    ca = x509.load_pem_x509_certificate(made.ca_cert.encode())
    server = x509.load_pem_x509_certificate(made.server_cert.encode())
    server.verify_directly_issued_by(ca)
    names = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert set(map(str, names.get_values_for_type(x509.DNSName))) == {"ctl01", "localhost"}
    assert list(map(str, names.get_values_for_type(x509.IPAddress))) == ["127.0.0.1"]
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    # a monitoring host more: a new server certificate from the same CA, the password kept
    grown = credentials.ensure(tmp_path, [*NAMES, "mon02"])
    assert grown.created == ("monitoring-server.key", "monitoring-server.crt")
    assert grown.ca_cert == made.ca_cert and grown.password == made.password
    x509.load_pem_x509_certificate(grown.server_cert.encode()).verify_directly_issued_by(ca)


def test_a_given_password_is_used_and_never_written(tmp_path):
    made = credentials.ensure(tmp_path, NAMES, password="from-vault")
    assert made.password == "from-vault" and not (tmp_path / "monitoring_password").exists()
    assert bcrypt.checkpw(b"from-vault", made.password_bcrypt.encode())


# --------------------------------------------------------------------------
# the files on the hosts: promtool accepts them


def promtool() -> str:
    path = shutil.which("promtool")
    assert path, "promtool not found: install Debian's prometheus package (scripts/setup.sh does)"
    return path


def role_vars(role: str) -> dict:
    return yaml.safe_load((REPO / "roles" / role / "vars" / "main.yml").read_text())


def test_server_web_config_and_prometheus_config_pass_promtool(tmp_path):
    made = credentials.ensure(tmp_path / "secrets", NAMES)
    for name, text in (("server.crt", made.server_cert), ("server.key", made.server_key), ("ca.crt", made.ca_cert),
                       ("password", made.password)):
        (tmp_path / name).write_text(text)
    web = {"tls_server_config": {"cert_file": str(tmp_path / "server.crt"), "key_file": str(tmp_path / "server.key")},
           "basic_auth_users": {"deepops": made.password_bcrypt}}
    (tmp_path / "web.yml").write_text(json.dumps(web, indent=2))
    checked = subprocess.run([promtool(), "check", "web-config", str(tmp_path / "web.yml")],
                             capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    (tmp_path / "file_sd").mkdir()
    config = render_prometheus_config(tmp_path)
    assert config["alerting"]["alertmanagers"][0]["scheme"] == "https"
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    assert {name for name, job in jobs.items() if job.get("scheme") == "https"} == {"prometheus", "alertmanager"}
    assert all(job["basic_auth"] == {"username": "deepops", "password_file": str(tmp_path / "password")}
               for job in jobs.values())
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    for job in ("prometheus", "alertmanager", "node", "dcgm", "slurm"):
        (tmp_path / "file_sd" / f"{job}.yml").write_text("[]\n")
    checked = subprocess.run([promtool(), "check", "config", "--syntax-only", str(tmp_path / "prometheus.yml")],
                             capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def render_prometheus_config(directory: Path) -> dict:
    """prometheus.yml.j2 with the account on, its files in DIRECTORY, plain Jinja with Ansible's to_json."""
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(REPO / "roles" / "prometheus" / "templates")),
                             undefined=jinja2.StrictUndefined, trim_blocks=True)
    env.filters["to_json"] = json.dumps
    env.filters["to_nice_yaml"] = yaml.safe_dump
    defaults = yaml.safe_load((REPO / "roles" / "prometheus" / "defaults" / "main.yml").read_text())
    context = {
        **defaults, "ansible_managed": "Ansible managed", "_prometheus_auth": True,
        "_prometheus_tls_jobs": role_vars("prometheus")["_prometheus_tls_jobs"],
        "_prometheus_rules_dir": str(directory / "rules"), "_prometheus_file_sd_dir": str(directory / "file_sd"),
        "_prometheus_file_sd": {job: [] for job in ("prometheus", "alertmanager", "node", "dcgm", "slurm")},
        "monitoring_auth_user": "deepops", "_monitoring_auth_ca_file": str(directory / "ca.crt"),
        "_monitoring_auth_password_file": str(directory / "password"),
    }
    return yaml.safe_load(env.get_template("prometheus.yml.j2").render(context))


# --------------------------------------------------------------------------
# the virtual cluster's stand-in DCGM exporter


def test_the_dcgm_stand_in_asks_for_the_account_checked_by_libcrypt(tmp_path):
    loader = importlib.machinery.SourceFileLoader("dcgm_stand_in_auth", str(payload.DATA_DIR / "dcgm-exporter"))
    module = types.ModuleType(loader.name)
    loader.exec_module(module)
    config = tmp_path / "exporter-web.yml"
    config.write_text(json.dumps({"basic_auth_users": {"deepops": credentials.bcrypt_hash("right")}}))
    check, passed = module.password_checker(), {}

    def header(user: str, password: str) -> str:
        return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()

    assert not module.authorized("", str(config), check, passed)
    assert not module.authorized(header("deepops", "wrong"), str(config), check, passed)
    assert not module.authorized("Basic !!!", str(config), check, passed)
    assert module.authorized(header("deepops", "right"), str(config), check, passed)
    config.write_text(json.dumps({"basic_auth_users": {"deepops": credentials.bcrypt_hash("new")}}))
    assert not module.authorized(header("deepops", "right"), str(config), check, passed)  # read again


@pytest.mark.parametrize("role", ["node_exporter", "dcgm_exporter", "slurm_exporter", "prometheus", "alertmanager"])
def test_every_monitoring_endpoint_reads_the_account(role):
    files = "\n".join(path.read_text() for path in (REPO / "roles" / role).rglob("*") if path.is_file())
    assert "monitoring_auth_enabled" in files and "_monitoring_auth_" in files, role


def test_a_strict_tls_client_accepts_the_server_certificate(tmp_path):
    """Python 3.13's default context (Debian 13) verifies strictly: the chain needs key identifiers."""
    import socket
    import ssl
    import threading

    made = credentials.ensure(tmp_path, NAMES)
    (tmp_path / "server.crt").write_text(made.server_cert)
    (tmp_path / "server.key").write_text(made.server_key)
    (tmp_path / "ca.crt").write_text(made.ca_cert)
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(tmp_path / "server.crt", tmp_path / "server.key")
    client_context = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
    client_context.verify_flags |= ssl.VERIFY_X509_STRICT
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]

        def serve_one():
            connection, _address = listener.accept()
            with server_context.wrap_socket(connection, server_side=True) as tls:
                tls.recv(1)

        thread = threading.Thread(target=serve_one, daemon=True)
        thread.start()
        with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
            with client_context.wrap_socket(raw, server_hostname="localhost") as tls:
                assert tls.version()
                tls.send(b"x")
        thread.join(5)


def test_credentials_without_key_identifiers_are_made_again(tmp_path):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    first = credentials.ensure(tmp_path, NAMES)
    # an older CA of this role: no key identifiers
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(x509.oid.NameOID.COMMON_NAME, "deepops monitoring CA")])
    import datetime

    now = datetime.datetime.now(datetime.timezone.utc)
    old = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
           .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=30))
           .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
           .sign(key, credentials.hashes.SHA256()))
    (tmp_path / "monitoring-ca.crt").write_bytes(old.public_bytes(serialization.Encoding.PEM))
    again = credentials.ensure(tmp_path, NAMES)
    assert set(again.created) >= {"monitoring-ca.crt", "monitoring-server.crt"} and again.password == first.password
    ca = x509.load_pem_x509_certificate(again.ca_cert.encode())
    x509.load_pem_x509_certificate(again.server_cert.encode()).verify_directly_issued_by(ca)

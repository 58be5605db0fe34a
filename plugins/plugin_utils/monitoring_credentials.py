"""The monitoring endpoints' credentials, made and kept on the controller.

One account (user and password) for Prometheus, Alertmanager and the
exporters, and a small certificate authority whose server certificate the
monitoring hosts serve Prometheus and Alertmanager with. Everything lives in
one directory beside the inventory (``secrets/``, 0700; keys and the password
0600), is made on the first deploy and then only read:

- ``monitoring_password``: 32 random letters and digits (unless the inventory
  gives one, e.g. from Ansible Vault);
- ``monitoring-ca.crt`` / ``.key``: the authority (10 years), which clients trust;
- ``monitoring-server.crt`` / ``.key``: a server certificate for every name the
  monitoring hosts are reached by (2 years), made again when a name is missing
  from it or it expires within 30 days.

Hosts get the bcrypt hash of the password for their web configuration files
(never the password, except the monitoring hosts, which scrape with it). The
hash is made with a salt derived from the password, so the same password
gives the same file on every run: a re-run changes nothing.

Controller-side only (bcrypt and cryptography come with the deepops
environment, as paramiko's and ansible-core's dependencies).
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ansible_collections.deepops.cluster.plugins.plugin_utils import local_secrets

try:
    import bcrypt
    from cryptography import x509
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
except ImportError as error:  # ansible-test's import check runs without them; deepops' environment has both
    MISSING_LIBRARY: ImportError | None = error
else:
    MISSING_LIBRARY = None

__all__ = ["Credentials", "bcrypt_hash", "ensure"]

PASSWORD_FILE = "monitoring_password"
CA_CERT, CA_KEY = "monitoring-ca.crt", "monitoring-ca.key"
SERVER_CERT, SERVER_KEY = "monitoring-server.crt", "monitoring-server.key"
CA_DAYS, SERVER_DAYS, RENEW_DAYS = 3650, 730, 30
BCRYPT_COST = 10
# bcrypt's own base64 alphabet, in which its 16-byte salt is written.
_BCRYPT_B64 = bytes.maketrans(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
                              b"./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")


@dataclass(frozen=True)
class Credentials:
    password: str
    password_bcrypt: str
    ca_cert: str
    server_cert: str
    server_key: str
    created: tuple[str, ...]  # the files this call wrote


def bcrypt_hash(password: str) -> str:
    """bcrypt of PASSWORD with a salt derived from it: the same password, the same hash."""
    digest = hashlib.sha256(b"deepops monitoring web config\0" + password.encode()).digest()[:16]
    salt = base64.b64encode(digest).translate(_BCRYPT_B64)[:22]
    return bcrypt.hashpw(password.encode(), b"$2b$%02d$" % BCRYPT_COST + salt).decode()


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _certificate(subject: str, key, issuer_name: x509.Name, issuer_key, days: int, ca: bool,
                 names: Sequence[str] = ()) -> x509.Certificate:
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=0 if ca else None), critical=True)
        # Key identifiers: strict verifiers (Python 3.13's default context, OpenSSL's X509_STRICT)
        # refuse a chain without them ("Missing Authority Key Identifier").
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()), critical=False)
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                          key_encipherment=False, data_encipherment=False, key_agreement=False,
                          encipher_only=False, decipher_only=False), critical=True)
    else:
        builder = builder.add_extension(x509.SubjectAlternativeName([_general_name(name) for name in names]),
                                        critical=False)
        builder = builder.add_extension(x509.ExtendedKeyUsage([x509.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _general_name(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def _has_key_identifiers(cert: x509.Certificate) -> bool:
    try:
        cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier)
        cert.extensions.get_extension_for_class(x509.AuthorityKeyIdentifier)
    except x509.ExtensionNotFound:
        return False
    return True


def _issued_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    """CA signed CERT (a CA made again keeps its name, not its key)."""
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def _covers(cert: x509.Certificate, names: Sequence[str]) -> bool:
    """CERT names every one of NAMES, carries the key identifiers and is good for RENEW_DAYS more."""
    try:
        listed = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return False
    if not _has_key_identifiers(cert):
        return False
    have = {str(value) for value in listed.get_values_for_type(x509.DNSName)}
    have |= {str(value) for value in listed.get_values_for_type(x509.IPAddress)}
    left = cert.not_valid_after_utc - datetime.datetime.now(datetime.timezone.utc)
    return set(names) <= have and left > datetime.timedelta(days=RENEW_DAYS)


def ensure(directory: str | Path, names: Sequence[str], password: str = "") -> Credentials:
    """The credentials in DIRECTORY, made where missing; NAMES are the server certificate's names.

    A given PASSWORD (the inventory's) is used as it is and never written."""
    if MISSING_LIBRARY is not None:
        raise ValueError(f"the monitoring credentials need bcrypt and cryptography: {MISSING_LIBRARY}")
    directory = Path(directory)
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    created = []
    if not password:
        secret = local_secrets.ensure(directory / PASSWORD_FILE, "password", 32)
        password = secret.password
        created += [PASSWORD_FILE] if secret.created else []
    ca_cert_path, ca_key_path = directory / CA_CERT, directory / CA_KEY
    ca = (x509.load_pem_x509_certificate(ca_cert_path.read_bytes())
          if ca_cert_path.exists() and ca_key_path.exists() else None)
    if ca is None or not _has_key_identifiers(ca):
        ca_key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "deepops monitoring CA")])
        ca = _certificate("deepops monitoring CA", ca_key, name, ca_key, CA_DAYS, ca=True)
        local_secrets.write_private(ca_key_path, _key_pem(ca_key))
        ca_cert_path.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
        created += [CA_KEY, CA_CERT]
    else:
        ca_key = serialization.load_pem_private_key(ca_key_path.read_bytes(), password=None)
    cert_path, key_path = directory / SERVER_CERT, directory / SERVER_KEY
    current = x509.load_pem_x509_certificate(cert_path.read_bytes()) if cert_path.exists() else None
    if current is None or not key_path.exists() or not _issued_by(current, ca) or not _covers(current, names):
        key = ec.generate_private_key(ec.SECP256R1())
        cert = _certificate(names[0] if names else "deepops monitoring", key, ca.subject, ca_key, SERVER_DAYS,
                            ca=False, names=names)
        local_secrets.write_private(key_path, _key_pem(key))
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        created += [SERVER_KEY, SERVER_CERT]
    return Credentials(
        password=password,
        password_bcrypt=bcrypt_hash(password),
        ca_cert=ca_cert_path.read_text(),
        server_cert=cert_path.read_text(),
        server_key=key_path.read_text(),
        created=tuple(created),
    )

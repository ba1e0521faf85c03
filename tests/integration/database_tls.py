"""TLS material for the bed's database, made by openssl in the test: a certificate authority standing in for
RDS's, and a server certificate it signs for the database node's address.

Aurora presents a server certificate signed by an RDS certificate authority, whose certificates AWS
publishes as a bundle (https://docs.aws.amazon.com/AmazonRDS/latest/AuroraUserGuide/UsingWithRDS.SSL.html);
the bed's MariaDB presents one signed by :func:`make_ca`'s authority, and the controller gets that
authority's certificate where it would get the bundle (``TC_RDS_CA_BUNDLE_URL``, a ``file://`` URL).
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

#: Certificates of the bed live two days: long enough for any run, short enough to mean nothing after.
DAYS = "2"


@dataclass(frozen=True)
class Authority:
    """A test certificate authority: its certificate (PEM) and private key."""

    name: str
    cert: Path
    key: Path


@dataclass(frozen=True)
class ServerCertificate:
    cert: Path
    key: Path


def _openssl(*args: str) -> None:
    result = subprocess.run(["openssl", *args], capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args)} exited {result.returncode}: {result.stderr}")


def make_ca(folder: Path, name: str) -> Authority:
    """A self-signed CA certificate (basicConstraints CA:TRUE, keyCertSign), as RDS's root CAs are."""
    folder.mkdir(parents=True, exist_ok=True)
    cert, key = folder / f"{name}.pem", folder / f"{name}.key"
    _openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", DAYS, "-subj", f"/CN={name}",
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        "-keyout", str(key), "-out", str(cert),
    )  # fmt: skip
    return Authority(name, cert, key)


def server_certificate(authority: Authority, folder: Path, name: str, *, ip: str) -> ServerCertificate:
    """A server certificate for the address IP (its subjectAltName), signed by AUTHORITY."""
    folder.mkdir(parents=True, exist_ok=True)
    cert, key, request = folder / f"{name}.pem", folder / f"{name}.key", folder / f"{name}.csr"
    extensions = folder / f"{name}.ext"
    extensions.write_text(f"subjectAltName=IP:{ip}\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n")
    _openssl(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        f"/CN={ip}",
        "-keyout",
        str(key),
        "-out",
        str(request),
    )
    _openssl(
        "x509", "-req", "-in", str(request), "-CA", str(authority.cert), "-CAkey", str(authority.key),
        "-CAcreateserial", "-days", DAYS, "-extfile", str(extensions), "-out", str(cert),
    )  # fmt: skip
    return ServerCertificate(cert, key)

"""TLS to the external accounting database (issue 28): the RDS certificate bundle fetched over HTTPS, checked
to be PEM certificates with openssl, named in slurmdbd.conf's StorageParameters and used by the mysql client;
a fetch or a bundle that fails stops the step with one line. Sandbox: curl is the stub (it serves
tests/lifecycle/stubs/rds-ca-bundle.pem for AWS's truststore and copies file:// URLs), openssl is real.
The same path against real MariaDB requiring TLS: tests/integration/test_accounting_real.py."""

from __future__ import annotations

import json
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.lifecycle.sandbox import RDS_CA_BUNDLE, Run, Sandbox

SECRET_ARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:slurmdbd-AbCdEf"
DB_HOST = "accounting.cluster-abc123.us-east-1.rds.amazonaws.com"
SECRET = {"username": "slurmdbd", "password": "Pa55-word", "host": DB_HOST, "port": 3306}
EXTERNAL: dict[str, Any] = {"mode": "external", "host": DB_HOST, "port": 3306, "secret_arn": SECRET_ARN}
SLURMDBD_CONF = "opt/slurm/etc/slurmdbd.conf"
BUNDLE = "etc/training-clusters/rds-ca-bundle.pem"
#: AWS's bundle of every commercial Region's RDS certificate authorities
#: (https://docs.aws.amazon.com/AmazonRDS/latest/AuroraUserGuide/UsingWithRDS.SSL.html).
GLOBAL_BUNDLE_URL = "https://truststore.pki.rds.amazonaws.com/global/global-bundle.pem"


def secret_env(**overrides: str) -> dict[str, str]:
    return {"STUB_SECRET_STRING": json.dumps(SECRET), "STUB_SECRET_ARN": SECRET_ARN, **overrides}


def errors(run: Run) -> list[str]:
    return [line.split(" ERROR [accounting] ", 1)[1] for line in run.log.splitlines() if " ERROR [" in line]


def external_controller(sandbox: Sandbox) -> Sandbox:
    sandbox.write_params(accounting=EXTERNAL)
    return sandbox.as_role("controller")


def self_signed(folder: Path, name: str) -> Path:
    """A CA certificate made by openssl for this test."""
    cert, key = folder / f"{name}.pem", folder / f"{name}.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN={name}",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert


def assert_stopped_before_the_database(sandbox: Sandbox, run: Run) -> None:
    assert run.returncode != 0, run.output
    assert run.output.rstrip().splitlines()[-1].endswith("FAILED step 'accounting' (exit 1)")
    assert run.calls_to("mysql") == []
    assert not sandbox.path(SLURMDBD_CONF).exists()
    assert not sandbox.path(BUNDLE).exists()
    assert "slurmdbd" not in run.started()


def test_slurmdbd_verifies_the_database_with_the_rds_bundle_fetched_over_https(sandbox: Sandbox) -> None:
    run = external_controller(sandbox).run(**secret_env())

    assert run.returncode == 0, run.output
    [fetch] = [call for call in run.calls_to("curl") if call[-1] == GLOBAL_BUNDLE_URL]
    assert fetch[:6] == ["--fail", "--silent", "--show-error", "--location", "--proto", "=https,file"]
    assert fetch[6:8] == ["--proto-redir", "=https"]  # a redirect never leaves HTTPS
    assert sandbox.path(BUNDLE).read_bytes() == RDS_CA_BUNDLE.read_bytes()
    assert stat.S_IMODE(sandbox.path(BUNDLE).stat().st_mode) == 0o644  # slurmdbd reads it as SlurmUser
    conf = sandbox.path(SLURMDBD_CONF).read_text().splitlines()
    assert conf.count("StorageParameters=SSL_CA=/etc/training-clusters/rds-ca-bundle.pem") == 1
    assert [line for line in conf if line.startswith("Storage")] == [
        "StorageType=accounting_storage/mysql",
        f"StorageHost={DB_HOST}",
        "StoragePort=3306",
        "StorageUser=slurmdbd",
        "StoragePass=Pa55-word",
        "StorageLoc=slurm_acct_db",
        "StorageParameters=SSL_CA=/etc/training-clusters/rds-ca-bundle.pem",
    ]
    # the fetch comes before the first connection
    order = [call[0] for call in run.calls if call[0] == "mysql" or call[-1] == GLOBAL_BUNDLE_URL]
    assert order[0] == "curl" and set(order[1:]) == {"mysql"}


def test_the_bundle_url_can_be_replaced_by_a_file_for_tests(sandbox: Sandbox, tmp_path: Path) -> None:
    ca = self_signed(tmp_path, "bed-ca")

    run = external_controller(sandbox).run(**secret_env(TC_RDS_CA_BUNDLE_URL=f"file://{ca}"))

    assert run.returncode == 0, run.output
    assert sandbox.path(BUNDLE).read_bytes() == ca.read_bytes()
    assert [call[-1] for call in run.calls_to("curl") if "rds" in call[-1] or "bed-ca" in call[-1]] == [
        f"file://{ca}"
    ]
    assert f"fetching the RDS certificate bundle from file://{ca}" in run.log


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("<html><body>Access denied</body></html>\n", "it holds no PEM certificate (40 bytes)"),
        (
            RDS_CA_BUNDLE.read_text()[:700],  # cut short in the first certificate
            "openssl cannot read every certificate in it (1 PEM objects)",
        ),
        (
            RDS_CA_BUNDLE.read_text()
            + "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n",
            "openssl cannot read every certificate in it (3 PEM objects)",
        ),
    ],
    ids=["an error page", "a truncated download", "a corrupt certificate"],
)
def test_anything_but_pem_certificates_fails_the_step_with_one_line(
    sandbox: Sandbox, tmp_path: Path, content: str, problem: str
) -> None:
    served = tmp_path / "served.pem"
    served.write_text(content)

    run = external_controller(sandbox).run(**secret_env(TC_RDS_CA_BUNDLE_URL=f"file://{served}"))

    assert errors(run) == [
        f"file://{served} is no certificate bundle: {problem}",
        "FAILED step 'accounting' (exit 1)",
    ]
    assert_stopped_before_the_database(sandbox, run)


def test_a_private_key_among_the_certificates_is_refused(sandbox: Sandbox, tmp_path: Path) -> None:
    ca = self_signed(tmp_path, "bed-ca")
    served = tmp_path / "with-key.pem"
    served.write_text(ca.read_text() + (tmp_path / "bed-ca.key").read_text())

    run = external_controller(sandbox).run(**secret_env(TC_RDS_CA_BUNDLE_URL=f"file://{served}"))

    assert (
        errors(run)[0]
        == f"file://{served} is no certificate bundle: openssl cannot read every certificate in it (2 PEM objects)"
    )
    assert_stopped_before_the_database(sandbox, run)


def test_a_bundle_that_cannot_be_fetched_fails_the_step_with_curls_error(sandbox: Sandbox) -> None:
    run = external_controller(sandbox).run(**secret_env(STUB_CURL_FAILS_FOR=GLOBAL_BUNDLE_URL))

    assert errors(run) == [
        f"could not fetch the RDS certificate bundle from {GLOBAL_BUNDLE_URL}: curl: (6) Could not resolve host:"
        " truststore.pki.rds.amazonaws.com",
        "FAILED step 'accounting' (exit 1)",
    ]
    assert_stopped_before_the_database(sandbox, run)
    assert list(sandbox.path("etc/training-clusters").glob("*.rds-ca")) == []  # no partial download left


def test_a_new_bundle_restarts_slurmdbd_and_the_same_one_does_not(sandbox: Sandbox, tmp_path: Path) -> None:
    external_controller(sandbox)
    first = sandbox.run(**secret_env())
    same = sandbox.run(**secret_env())
    rotated = self_signed(tmp_path, "next-ca")  # AWS adds a CA to the bundle
    served = tmp_path / "bundle.pem"
    served.write_text(RDS_CA_BUNDLE.read_text() + rotated.read_text())
    new = sandbox.run(**secret_env(TC_RDS_CA_BUNDLE_URL=f"file://{served}"))

    assert [run.returncode for run in (first, same, new)] == [0, 0, 0], new.output
    assert ["restart", "slurmdbd"] in first.calls_to("systemctl")
    assert ["restart", "slurmdbd"] not in same.calls_to("systemctl")
    assert ["restart", "slurmdbd"] in new.calls_to("systemctl")
    assert sandbox.path(BUNDLE).read_bytes() == served.read_bytes()


def test_local_accounting_fetches_no_bundle_and_sets_no_storage_parameters(sandbox: Sandbox) -> None:
    sandbox.write_params(accounting={"mode": "local"})

    run = sandbox.as_role("controller").run()

    assert run.returncode == 0, run.output
    assert [call for call in run.calls_to("curl") if "truststore" in call[-1]] == []
    conf = sandbox.path(SLURMDBD_CONF).read_text().splitlines()
    assert [line for line in conf if line.startswith("StorageParameters")] == []
    assert not sandbox.path(BUNDLE).exists()

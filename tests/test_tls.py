"""The FIX acceptor over TLS (issue 12 item 1), with Python's ``ssl`` as the client: a valid
(mutual) handshake logs on; plaintext, a missing or foreign client certificate, and TLS 1.0/1.1
are refused. Certificates are made here with ``openssl`` (no key is ever committed)."""

from __future__ import annotations

import ssl
import subprocess
from pathlib import Path

import pytest

from datastore.embedded import ValkeyProcess, free_port
from fixgw.fixat import Connection, frame
from tests.gateway_helpers import GatewayProc, parse

pytestmark = pytest.mark.slow  # starts servers or processes: not in `make unit`


def logon_message() -> bytes:
    """Made when sent: its SendingTime must be fresh (QuickFIX drops a Logon older than MaxLatency)."""
    return frame("35=A\x0198=0\x01108=30", 1, "CLIENT1", "FIXGW")


def openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def make_ca(d: Path, name: str) -> tuple[Path, Path]:
    key, cert = d / f"{name}-ca.key", d / f"{name}-ca.pem"
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "2",
            "-subj", f"/CN={name} test CA")
    return cert, key


def make_cert(d: Path, name: str, ca: tuple[Path, Path], san: str = "") -> tuple[Path, Path]:
    key, csr, cert, ext = d / f"{name}.key", d / f"{name}.csr", d / f"{name}.pem", d / f"{name}.ext"
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr), "-subj", f"/CN={name}")
    ext.write_text(f"subjectAltName={san}\n" if san else "basicConstraints=CA:FALSE\n")
    openssl("x509", "-req", "-in", str(csr), "-CA", str(ca[0]), "-CAkey", str(ca[1]), "-CAcreateserial",
            "-out", str(cert), "-days", "2", "-extfile", str(ext))
    return cert, key


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    d = tmp_path_factory.mktemp("certs")
    ca, rogue = make_ca(d, "venue"), make_ca(d, "rogue")
    return {"ca": ca, "server": make_cert(d, "server", ca, "DNS:localhost,IP:127.0.0.1"),
            "client": make_cert(d, "client", ca), "stranger": make_cert(d, "stranger", rogue)}


def tls_connect(port: int, certs: dict, client: str | None = "client", old_tls: bool = False) -> Connection:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(str(certs["ca"][0]))
    if client is not None:
        ctx.load_cert_chain(str(certs[client][0]), str(certs[client][1]))
    if old_tls:  # offer only TLS 1.0/1.1 (the client's own security level allows them here)
        ctx.set_ciphers("DEFAULT:@SECLEVEL=0")
        ctx.minimum_version, ctx.maximum_version = ssl.TLSVersion.TLSv1, ssl.TLSVersion.TLSv1_1
    conn = Connection("127.0.0.1", port)
    conn.sock = ctx.wrap_socket(conn.sock, server_hostname="localhost")
    return conn


def logon(connect) -> str:  # type: ignore[no-untyped-def]
    """'logged on', or how the attempt ended (the server's TLS alert, a closed connection)."""
    try:
        conn = connect()
        conn.send(logon_message())
        raw = conn.read_message(5)
    except (ssl.SSLError, OSError, TimeoutError) as exc:
        return f"{type(exc).__name__}: {exc}"
    if raw is None:
        return "closed"
    return "logged on" if parse(raw)[35] == b"A" else f"answered {parse(raw)[35]!r}"


def refused(result: str, alert: str) -> bool:
    """Refused in the handshake: the server's alert, or (when the server closes before its
    alert is read) the connection ending mid-handshake; never a Logon."""
    return result != "logged on" and (alert in result or "EOF occurred" in result or "reset" in result.lower()
                                      or result == "closed")


@pytest.mark.filterwarnings("ignore:ssl.TLSVersion:DeprecationWarning")
def test_the_fix_port_speaks_mutual_tls_only(tmp_path: Path, valkey: ValkeyProcess, certs: dict) -> None:
    port = free_port()
    tls = (f'[gateway.tls]\ncertificate = "{certs["server"][0]}"\nkey = "{certs["server"][1]}"\n'
           f'client_ca = "{certs["ca"][0]}"\n')
    gw = GatewayProc(tmp_path, valkey.url, fix_port=port, extra=tls).start().wait_active(30)
    try:
        assert logon(lambda: Connection("127.0.0.1", port)) != "logged on", "plaintext is refused"
        assert refused(logon(lambda: tls_connect(port, certs, client=None)), "certificate required")
        assert refused(logon(lambda: tls_connect(port, certs, client="stranger")), "unknown ca"), "a foreign CA's client"
        assert refused(logon(lambda: tls_connect(port, certs, old_tls=True)), "protocol version"), "TLS 1.0/1.1"
        assert logon(lambda: tls_connect(port, certs)) == "logged on", "a valid mutual handshake logs on"
        assert gw.alive
    finally:
        gw.stop()

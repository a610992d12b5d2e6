r"""TLS and SASL settings in the Java client's names, translated once for both engines and both Kafka clients.

Real jobs carry their Kafka security in Java client names: ``security.protocol``, ``sasl.mechanism``,
``sasl.jaas.config``, ``ssl.truststore.*``, ``ssl.keystore.*``... The legacy ``kafkaParams``
(:mod:`legacy._params`), the modern ``kafka.``-prefixed source and sink options (:mod:`modern._options`) and
every ``dmk`` command (``--kafka-config FILE``, ``--kafka-option key=value``) all hand them to
:func:`translate_security`, which returns kafka-python settings; :mod:`kit._rdkafka` maps those on to
librdkafka. What has no equivalent in the Python clients (JKS/PKCS12 stores, Kerberos, OAUTHBEARER, custom JVM
classes) is refused with the reason and the fix, never dropped: dropping it would connect in plaintext, or not
at all, where the job expects a secured connection.

Secrets (``sasl.jaas.config``'s password, ``ssl.key.password``, an inline ``ssl.keystore.key``) become
:class:`Secret` values: ``repr``/``str`` show ``***``, the clients get the value through :func:`reveal`.
:func:`redact_settings` and :func:`redact_text` are what logs, reports and files written by the kit use.

Example:
    >>> settings, ignored = translate_security({
    ...     "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
    ...     "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
    ...                         'username="alice" password="s3cr\\"et";'})
    >>> settings["sasl_mechanism"], settings["sasl_plain_username"], settings["sasl_plain_password"]
    ('SCRAM-SHA-256', 'alice', ***)
    >>> reveal(settings["sasl_plain_password"])
    's3cr"et'
"""

from __future__ import annotations

import atexit
import difflib
import hashlib
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from kit.errors import ConfigError

__all__ = [
    "JAVA_SECURITY_SETTINGS",
    "KAFKA_SECURITY_ENV",
    "REDACTED",
    "SECRET_NAMES",
    "Secret",
    "SecretUnavailable",
    "SecuritySettingError",
    "Withheld",
    "materialize_pem",
    "parse_jaas",
    "parse_kafka_option",
    "read_properties",
    "redact_settings",
    "redact_text",
    "restore_secrets",
    "reveal",
    "secret_values",
    "translate_security",
    "withhold_secrets",
]

KAFKA_SECURITY_ENV = "DMK_KAFKA_SECURITY"
"""Environment variable carrying a run's Kafka client settings (Java names, a JSON object, secrets included) into
the processes the kit starts: compare drivers and ``dmk compare-jobs`` job scripts. Never written to a file."""

REDACTED = "***"
"""What a secret is shown as everywhere the kit shows settings (the DSN passwords' redaction too)."""

SECRET_NAMES = frozenset({
    # Java client names
    "sasl.jaas.config", "ssl.key.password", "ssl.keystore.key", "ssl.keystore.password", "ssl.truststore.password",
    # kafka-python names, and the kit's inline-PEM extension
    "sasl_plain_password", "ssl_password", "ssl_keydata",
    # librdkafka names
    "sasl.password", "ssl.key.pem",
})
"""Setting names whose values are secrets, in the Java, kafka-python and librdkafka vocabularies."""

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
_LOGIN_MODULES = {
    "org.apache.kafka.common.security.plain.PlainLoginModule": ("PLAIN",),
    "org.apache.kafka.common.security.scram.ScramLoginModule": ("SCRAM-SHA-256", "SCRAM-SHA-512"),
}
_JAAS_EXAMPLE = (
    'org.apache.kafka.common.security.scram.ScramLoginModule required username="USER" password="PASSWORD";'
)

_EXPORT_PEM = (
    "export the store to PEM and point the PEM settings at it, e.g. "
    "`keytool -importkeystore -srckeystore STORE.jks -destkeystore STORE.p12 -deststoretype PKCS12`, then "
    "`openssl pkcs12 -in STORE.p12 -nokeys -out ca.pem` (truststore: ssl.truststore.type=PEM, "
    "ssl.truststore.location=ca.pem) or `openssl pkcs12 -in STORE.p12 -out client.pem` "
    "(keystore: ssl.keystore.type=PEM, ssl.keystore.location=client.pem, with ssl.key.password if the key is "
    "encrypted)"
)
_NO_JVM_CLASSES = "a JVM class cannot run in the Python Kafka clients; this kit supports PLAIN and SCRAM with a JAAS " \
    "config, or TLS with PEM files"
_REFUSED: dict[str, str] = {
    "sasl.kerberos.service.name": "GSSAPI/Kerberos is not supported here (" + _NO_JVM_CLASSES + ")",
    "sasl.kerberos.kinit.cmd": "GSSAPI/Kerberos is not supported here",
    "sasl.kerberos.min.time.before.relogin": "GSSAPI/Kerberos is not supported here",
    "sasl.kerberos.ticket.renew.jitter": "GSSAPI/Kerberos is not supported here",
    "sasl.kerberos.ticket.renew.window.factor": "GSSAPI/Kerberos is not supported here",
    "sasl.client.callback.handler.class": _NO_JVM_CLASSES,
    "sasl.login.callback.handler.class": _NO_JVM_CLASSES,
    "sasl.login.class": _NO_JVM_CLASSES,
    "ssl.engine.factory.class": _NO_JVM_CLASSES,
    "ssl.cipher.suites": "Java names cipher suites by their IANA names and the Python clients by OpenSSL's; "
    "a wrong translation would widen or break the connection. Leave it out (TLS 1.2+ defaults apply)",
}
_IGNORED: dict[str, str] = {
    "ssl.protocol": "the Python clients negotiate the highest TLS version both sides support (1.2 or 1.3)",
    "ssl.enabled.protocols": "the Python clients negotiate TLS 1.2 or 1.3, as Java's defaults do",
    "ssl.keymanager.algorithm": "a JVM key manager setting",
    "ssl.trustmanager.algorithm": "a JVM trust manager setting",
    "ssl.secure.random.implementation": "a JVM setting",
    "ssl.provider": "a JVM security provider setting",
    "sasl.login.refresh.window.factor": "used by OAUTHBEARER and Kerberos logins only",
    "sasl.login.refresh.window.jitter": "used by OAUTHBEARER and Kerberos logins only",
    "sasl.login.refresh.min.period.seconds": "used by OAUTHBEARER and Kerberos logins only",
    "sasl.login.refresh.buffer.seconds": "used by OAUTHBEARER and Kerberos logins only",
    "sasl.login.connect.timeout.ms": "used by OAUTHBEARER logins only",
    "sasl.login.read.timeout.ms": "used by OAUTHBEARER logins only",
    "sasl.login.retry.backoff.ms": "used by OAUTHBEARER logins only",
    "sasl.login.retry.backoff.max.ms": "used by OAUTHBEARER logins only",
}
JAVA_SECURITY_SETTINGS = frozenset({
    "security.protocol", "sasl.mechanism", "sasl.jaas.config",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.certificates", "ssl.truststore.password",
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.certificate.chain", "ssl.keystore.key",
    "ssl.keystore.password", "ssl.key.password", "ssl.endpoint.identification.algorithm",
    *_REFUSED, *_IGNORED,
})
"""Every Java ``security.``/``ssl.``/``sasl.`` client setting :func:`translate_security` knows (translated,
ignored with a reason, or refused with a reason)."""
_PREFIXES = ("security.", "ssl.", "sasl.")


class Secret:
    """A setting's value that must never be shown: ``repr``/``str`` are ``***``; :func:`reveal` gives the value.

    Equal (and hashed) by value, so settings holding one still compare and key caches. It pickles with its value:
    Spark tasks need it in the executors, as Spark's own connector ships ``kafkaParams`` to them; what the kit
    writes to disk (checkpoints, run directories) goes through :func:`redact_settings` instead.
    """

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = str(value)

    def __repr__(self) -> str:
        return REDACTED

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(("kit.security.Secret", self._value))

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (Secret, (self._value,))


def reveal(value: Any) -> Any:
    """The value inside a :class:`Secret` (or a :class:`Withheld` one known to this process); else ``value``.

    Raises:
        SecretUnavailable: a :class:`Withheld` secret this process was never given.
    """
    if isinstance(value, Withheld):
        value = value.resolve()
    return value._value if isinstance(value, Secret) else value


# -- secrets kept out of checkpoints ----------------------------------------------------------------------------

_KNOWN: dict[str, Secret] = {}
_KNOWN_LOCK = threading.Lock()


class SecretUnavailable(ConfigError):
    """A secret withheld from a checkpoint that this process was never given."""

    def __init__(self, ref: str) -> None:
        self.ref = ref
        super().__init__(
            f"the Kafka secret {ref} is not in the checkpoint (the kit never writes secrets there) and this process "
            "was not given it. Fix: give this process the same security settings before restoring, e.g. run dmk with "
            "the same --kafka-config/--kafka-option, or call kit.security.translate_security(kafkaParams) (any "
            "translation of them does) before legacy.kafka.get_or_create",
            field=ref, expected="the secret, given to this process", actual=None,
        )


class Withheld:
    """A secret left out of a pickle that goes to disk: only its reference (which setting, whose) is written.

    :func:`reveal` (or :func:`restore_secrets`) finds the value among the secrets this process translated.
    """

    __slots__ = ("ref",)

    def __init__(self, ref: str) -> None:
        self.ref = ref

    def __repr__(self) -> str:
        return f"{REDACTED}(withheld: {self.ref})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Withheld) and other.ref == self.ref

    def __hash__(self) -> int:
        return hash(("kit.security.Withheld", self.ref))

    def resolve(self) -> Secret:
        """The secret, if this process translated it.

        Raises:
            SecretUnavailable: it did not.
        """
        with _KNOWN_LOCK:
            found = _KNOWN.get(self.ref)
        if found is None:
            raise SecretUnavailable(self.ref)
        return found


def _ref(key: str, settings: Mapping[str, Any]) -> str:
    # Names who the secret belongs to without revealing it: the SASL user, or the certificate it unlocks.
    if key == "sasl_plain_password":
        return f"{key}[user={reveal(settings.get('sasl_plain_username'))}]"
    holder = str(reveal(settings.get("ssl_certfile") or settings.get("ssl_certdata") or ""))
    return f"{key}[certificate={hashlib.sha256(holder.encode()).hexdigest()[:12]}]"


def _remember(settings: Mapping[str, Any]) -> None:
    with _KNOWN_LOCK:
        for key, value in settings.items():
            if isinstance(value, Secret):
                _KNOWN[_ref(key, settings)] = value


def withhold_secrets(settings: Mapping[str, Any]) -> dict[str, Any]:
    """kafka-python ``settings`` with each :class:`Secret` replaced by a :class:`Withheld` reference.

    For what is pickled to disk (a legacy checkpoint's stream state): the value stays in this process only.
    """
    _remember(settings)
    return {k: Withheld(_ref(k, settings)) if isinstance(v, Secret) else v for k, v in settings.items()}


def restore_secrets(settings: Mapping[str, Any]) -> dict[str, Any]:
    """``settings`` with each :class:`Withheld` reference this process knows replaced by its :class:`Secret`.

    Unknown ones stay withheld: using them (:func:`reveal`) raises :class:`SecretUnavailable` with the fix.
    """
    out: dict[str, Any] = {}
    for key, value in settings.items():
        if isinstance(value, Withheld):
            with _KNOWN_LOCK:
                value = _KNOWN.get(value.ref, value)
        out[key] = value
    return out


def secret_values(settings: Mapping[str, Any]) -> list[str]:
    """The secret strings in ``settings`` (any vocabulary), for :func:`redact_text`: passwords, keys, JAAS."""
    found = []
    for raw_key, value in settings.items():
        key = _unprefixed(raw_key)
        if isinstance(value, Withheld):
            continue
        if isinstance(value, Secret) or key in SECRET_NAMES:
            text = str(reveal(value))
            if text:
                found.append(text)
            if key == "sasl.jaas.config":
                try:
                    _, _, password = parse_jaas(text)
                except SecuritySettingError:
                    continue
                found.append(password)
    return found


def redact_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """``settings`` with every secret value replaced by ``***`` (Java, kafka-python and librdkafka names).

    A ``sasl.jaas.config`` keeps its login module and username, so a reader still sees who logs in how.
    """
    out: dict[str, Any] = {}
    for key, value in settings.items():
        name = _unprefixed(key)
        if name == "sasl.jaas.config" and not isinstance(value, Withheld):
            out[key] = _redacted_jaas(str(reveal(value)))
        elif isinstance(value, (Secret, Withheld)) or name in SECRET_NAMES:
            out[key] = REDACTED
        else:
            out[key] = value
    return out


def _unprefixed(key: object) -> str:
    # Spark's source and sink options carry the Java names behind "kafka." (any case).
    text = str(key)
    return text[len("kafka."):] if text.lower().startswith("kafka.") else text


def redacted_repr(obj: Any) -> str:
    """``repr`` of a dataclass with every mapping field passed through :func:`redact_settings`."""
    import dataclasses

    shown = []
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if isinstance(value, Mapping):
            value = redact_settings(value)
        shown.append(f"{f.name}={value!r}")
    return f"{type(obj).__name__}({', '.join(shown)})"


def _redacted_jaas(text: str) -> str:
    try:
        module, username, _ = parse_jaas(text)
    except SecuritySettingError:
        return REDACTED
    return f'{module} required username="{username}" password="{REDACTED}";'


def redact_text(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every occurrence of each secret replaced by ``***`` (longest first)."""
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return text


class SecuritySettingError(ConfigError):
    """A TLS/SASL setting that cannot be translated: malformed, contradictory, or with no equivalent here.

    The message and attributes never hold a secret's value.

    Attributes:
        field: the setting, in the Java client's name (with the caller's prefix, e.g. ``kafka.``).
        expected: what it must be.
        actual: what it was (``***`` for a secret).
        fix: what to do.
    """

    def __init__(self, option: str, problem: str, *, expected: object, actual: object, fix: str) -> None:
        self.fix = fix
        super().__init__(f"{option}: {problem}. Fix: {fix}", field=option, expected=expected, actual=actual)


# -- sasl.jaas.config --------------------------------------------------------------------------------------------

_FLAGS = ("required", "requisite", "sufficient", "optional")
_JAAS_TOKEN = re.compile(r'\s*(?:(?P<word>[A-Za-z_$][\w$.\-]*)|(?P<eq>=)|(?P<semi>;)|(?P<quoted>"))')


def _jaas_error(option: str, problem: str) -> SecuritySettingError:
    return SecuritySettingError(
        option, problem, expected=f"'{_JAAS_EXAMPLE}'", actual=REDACTED,
        fix=f"give it as {_JAAS_EXAMPLE} (PlainLoginModule for PLAIN), with backslash before a \" or \\ inside "
            "a quoted value",
    )


def parse_jaas(text: str, *, option: str = "sasl.jaas.config") -> tuple[str, str, str]:
    """``(login module, username, password)`` of a PLAIN or SCRAM ``sasl.jaas.config`` string.

    The grammar is JAAS's, as Kafka's ``JaasConfig`` parses it: ``<module> <flag> key=value ... [;]`` with any
    whitespace, values quoted (``"..."``, backslash escapes) or bare words. Only Kafka's
    ``PlainLoginModule`` and ``ScramLoginModule`` are accepted.

    Raises:
        SecuritySettingError: malformed, another login module (Kerberos, OAUTHBEARER...), or no
            username/password. The message never holds the string (it holds the password).
    """
    pos, words = 0, list[str]()
    pairs: dict[str, str] = {}
    pending_key: str | None = None
    expect_value = False
    ended = False
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        if ended:
            raise _jaas_error(option, f"text after the closing ';' at character {pos}: one login module only")
        match = _JAAS_TOKEN.match(text, pos)
        if match is None:
            at = len(text) - len(text[pos:].lstrip())
            raise _jaas_error(option, f"unexpected character at position {at}")
        pos = match.end()
        if match.group("quoted"):
            value, pos = _quoted(text, pos, option)
            if not expect_value:
                raise _jaas_error(option, f"a quoted value without 'key=' before it, at character {match.start()}")
            assert pending_key is not None
            pairs[pending_key] = value
            pending_key, expect_value = None, False
        elif match.group("eq"):
            if pending_key is None and len(words) == 2 and words[1].lower() not in _FLAGS:
                raise _jaas_error(option, f"the control flag must be required, requisite, sufficient or optional, "
                                          f"got {words[1]!r} followed by '='")
            if pending_key is None or expect_value:
                raise _jaas_error(option, f"'=' without a key before it, at character {match.start()}")
            expect_value = True
        elif match.group("semi"):
            if expect_value or pending_key is not None:
                raise _jaas_error(option, f"option {pending_key!r} has no value")
            ended = True
        else:
            word = match.group("word")
            if expect_value:
                assert pending_key is not None
                pairs[pending_key] = word
                pending_key, expect_value = None, False
            elif len(words) < 2:
                words.append(word)
            elif pending_key is not None:
                raise _jaas_error(option, f"option {pending_key!r} has no '=value'")
            else:
                pending_key = word
    if expect_value or pending_key is not None:
        raise _jaas_error(option, f"option {pending_key!r} has no value")
    if len(words) < 2:
        raise _jaas_error(option, "expected a login module class and a control flag (required)")
    module, flag = words
    if flag.lower() not in _FLAGS:
        raise _jaas_error(option, f"the control flag must be required, requisite, sufficient or optional, got {flag!r}")
    if module not in _LOGIN_MODULES:
        if "krb5" in module.lower() or "kerberos" in module.lower():
            why = "Kerberos (GSSAPI) logins are not supported by this kit"
        elif "oauth" in module.lower():
            why = "OAUTHBEARER logins are not supported by this kit"
        else:
            why = f"login module {module!r} is not one this kit can run"
        raise SecuritySettingError(
            option, why, expected=sorted(_LOGIN_MODULES), actual=module,
            fix="use SASL PLAIN or SCRAM-SHA-256/512 with org.apache.kafka.common.security.plain.PlainLoginModule "
                "or org.apache.kafka.common.security.scram.ScramLoginModule (ask the cluster's admins for such a "
                "user), or run the job with Spark's JVM connector",
        )
    missing = [k for k in ("username", "password") if k not in pairs]
    if missing:
        raise _jaas_error(option, f"no {' or '.join(missing)} in the login module's options")
    return module, pairs["username"], pairs["password"]


def _quoted(text: str, pos: int, option: str) -> tuple[str, int]:
    out = []
    while pos < len(text):
        char = text[pos]
        if char == "\\":
            if pos + 1 >= len(text):
                break
            out.append(text[pos + 1])
            pos += 2
            continue
        if char == '"':
            return "".join(out), pos + 1
        out.append(char)
        pos += 1
    raise _jaas_error(option, "a quoted value is not closed (a '\"' is missing)")


# -- translation ------------------------------------------------------------------------------------------------


def _readable(option: str, path: str, what: str) -> str:
    if not os.path.isfile(path) or not os.access(path, os.R_OK):
        raise SecuritySettingError(
            option, f"{what} {path!r} is not a readable file here", expected="a readable PEM file", actual=path,
            fix="give the path of the PEM file on this machine (every Spark executor host needs it at the same path)",
        )
    return path


def translate_security(settings: Mapping[str, Any], *, prefix: str = "") -> tuple[dict[str, Any], dict[str, str]]:
    """kafka-python settings for the Java TLS/SASL settings in ``settings``, and ``{key: why}`` for ignored ones.

    Keys outside ``security.``/``ssl.``/``sasl.`` are left out (the caller handles them). ``prefix`` is how the
    caller's user wrote the keys (``"kafka."`` for Spark options), for messages only. Inline PEM (a
    ``ssl.truststore.certificates`` or ``ssl.keystore.key``) becomes the kit's ``ssl_cadata``,
    ``ssl_certdata``, ``ssl_keydata`` settings, written to private 0600 files by :func:`materialize_pem` where
    a client needs a path.

    Raises:
        SecuritySettingError: a setting with no equivalent (JKS/PKCS12, Kerberos, OAUTHBEARER, JVM classes), a
            malformed ``sasl.jaas.config``, contradictory or incomplete settings. Never echoes a secret.
    """
    java = {str(k): reveal(v) for k, v in settings.items() if str(k).startswith(_PREFIXES)}
    ignored: dict[str, str] = {}
    out: dict[str, Any] = {}

    def name(key: str) -> str:
        return prefix + key

    def shown(key: str) -> str:
        return REDACTED if key in SECRET_NAMES else str(java[key])

    for key in java:
        if key in _REFUSED:
            raise SecuritySettingError(name(key), "has no equivalent in the Python Kafka clients: " + _REFUSED[key],
                                       expected="not set", actual=shown(key), fix=f"remove {name(key)}")
        if key in _IGNORED:
            ignored[key] = _IGNORED[key]
        elif key not in JAVA_SECURITY_SETTINGS:
            close = difflib.get_close_matches(key, sorted(JAVA_SECURITY_SETTINGS), n=1)
            raise SecuritySettingError(
                name(key), "is not a TLS/SASL setting this kit knows, and dropping it could change the connection",
                expected=sorted(JAVA_SECURITY_SETTINGS), actual=shown(key),
                fix=(f"did you mean {name(close[0])!r}? " if close else "") + f"remove or correct {name(key)}",
            )

    protocol = str(java.get("security.protocol", "PLAINTEXT")).strip().upper()
    if protocol not in PROTOCOLS:
        raise SecuritySettingError(name("security.protocol"), f"unknown protocol {protocol!r}", expected=PROTOCOLS,
                                   actual=protocol, fix=f"use one of {', '.join(PROTOCOLS)}")
    if "security.protocol" in java:
        out["security_protocol"] = protocol
    sasl = protocol.startswith("SASL_")
    tls = protocol.endswith("SSL")

    if sasl:
        out.update(_sasl(java, name))
    else:
        for key in ("sasl.mechanism", "sasl.jaas.config"):
            if key in java:
                ignored[key] = f"security.protocol is {protocol}, which does not use SASL (as in Java's client)"
    ssl_keys = sorted(k for k in java if k.startswith("ssl.") and k not in _IGNORED)
    if tls:
        out.update(_tls(java, name))
    else:
        for key in ssl_keys:
            ignored[key] = f"security.protocol is {protocol}, which does not use TLS (as in Java's client)"
    _remember(out)
    return out, ignored


def _sasl(java: Mapping[str, Any], name: Any) -> dict[str, Any]:
    mechanism = str(java.get("sasl.mechanism", "GSSAPI")).strip().upper()
    if mechanism not in MECHANISMS:
        default = "" if "sasl.mechanism" in java else " (Java's default when sasl.mechanism is not set)"
        raise SecuritySettingError(
            name("sasl.mechanism"), f"mechanism {mechanism}{default} is not supported here",
            expected=MECHANISMS, actual=mechanism,
            fix=f"set {name('sasl.mechanism')} to PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (GSSAPI/Kerberos and "
                "OAUTHBEARER have no equivalent in this kit)",
        )
    if "sasl.jaas.config" not in java:
        raise SecuritySettingError(
            name("sasl.jaas.config"), f"is required with {name('security.protocol')}={java['security.protocol']}",
            expected=f"'{_JAAS_EXAMPLE}'", actual=None,
            fix=f"set {name('sasl.jaas.config')} to the user's login, e.g. {_JAAS_EXAMPLE}",
        )
    module, username, password = parse_jaas(str(java["sasl.jaas.config"]), option=name("sasl.jaas.config"))
    if mechanism not in _LOGIN_MODULES[module]:
        raise SecuritySettingError(
            name("sasl.jaas.config"), f"{module.rsplit('.', 1)[-1]} does not log in with {mechanism}",
            expected=[m for m, ms in _LOGIN_MODULES.items() if mechanism in ms], actual=module,
            fix="use ScramLoginModule with SCRAM-SHA-256/512 and PlainLoginModule with PLAIN",
        )
    return {"sasl_mechanism": mechanism, "sasl_plain_username": username, "sasl_plain_password": Secret(password)}


def _tls(java: Mapping[str, Any], name: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for store in ("truststore", "keystore"):
        kind = str(java.get(f"ssl.{store}.type", "JKS")).strip().upper()
        given = [k for k in java if k.startswith(f"ssl.{store}.") and k != f"ssl.{store}.type"]
        if given and kind != "PEM":
            raise SecuritySettingError(
                name(f"ssl.{store}.type"), f"{kind} {store}s cannot be read by the Python Kafka clients"
                + ("" if f"ssl.{store}.type" in java else " (JKS is Java's default type)"),
                expected="PEM", actual=kind, fix=_EXPORT_PEM,
            )
    if "ssl.truststore.password" in java:
        raise SecuritySettingError(
            name("ssl.truststore.password"), "a PEM truststore has no password (Java's client refuses it too)",
            expected="not set", actual=REDACTED, fix=f"remove {name('ssl.truststore.password')}",
        )
    if "ssl.keystore.password" in java:
        raise SecuritySettingError(
            name("ssl.keystore.password"), "a PEM keystore takes ssl.key.password for an encrypted key, not a store "
            "password (Java's client refuses it too)", expected="not set", actual=REDACTED,
            fix=f"give the key's password as {name('ssl.key.password')}",
        )
    if "ssl.truststore.location" in java and "ssl.truststore.certificates" in java:
        raise SecuritySettingError(
            name("ssl.truststore.certificates"), f"given together with {name('ssl.truststore.location')}",
            expected="one of them", actual="both", fix="keep the file or the inline certificates, not both",
        )
    if "ssl.truststore.location" in java:
        out["ssl_cafile"] = _readable(name("ssl.truststore.location"), str(java["ssl.truststore.location"]),
                                      "the truststore")
    if "ssl.truststore.certificates" in java:
        out["ssl_cadata"] = _pem(java, "ssl.truststore.certificates", "CERTIFICATE", name)
    inline = [k for k in ("ssl.keystore.certificate.chain", "ssl.keystore.key") if k in java]
    if "ssl.keystore.location" in java and inline:
        raise SecuritySettingError(
            name(inline[0]), f"given together with {name('ssl.keystore.location')}", expected="one of them",
            actual="both", fix="keep the keystore file or the inline certificate chain and key, not both",
        )
    if "ssl.keystore.location" in java:
        path = _readable(name("ssl.keystore.location"), str(java["ssl.keystore.location"]), "the keystore")
        out["ssl_certfile"] = out["ssl_keyfile"] = path  # one PEM file with the chain and the key
    elif inline:
        if len(inline) == 1:
            other = ({"ssl.keystore.certificate.chain", "ssl.keystore.key"} - set(inline)).pop()
            raise SecuritySettingError(
                name(other), f"is required with {name(inline[0])}", expected="set", actual=None,
                fix=f"give both {name('ssl.keystore.certificate.chain')} and {name('ssl.keystore.key')}",
            )
        out["ssl_certdata"] = _pem(java, "ssl.keystore.certificate.chain", "CERTIFICATE", name)
        out["ssl_keydata"] = Secret(_pem(java, "ssl.keystore.key", "PRIVATE KEY", name))
    if "ssl.key.password" in java:
        out["ssl_password"] = Secret(str(java["ssl.key.password"]))
    if "ssl_certfile" in out or "ssl_certdata" in out:
        _check_key(out, name)
    if "ssl.endpoint.identification.algorithm" in java:
        algorithm = str(java["ssl.endpoint.identification.algorithm"]).strip().lower()
        if algorithm not in ("", "https"):
            raise SecuritySettingError(
                name("ssl.endpoint.identification.algorithm"), f"unknown algorithm {algorithm!r}",
                expected=["https", ""], actual=algorithm,
                fix="use https (check the broker's host name, the default) or an empty value (no check)",
            )
        out["ssl_check_hostname"] = algorithm == "https"
    return out


def _check_key(out: Mapping[str, Any], name: Any) -> None:
    """Load the client certificate and key now, so a wrong ``ssl.key.password`` fails here, clearly."""
    import ssl

    files = materialize_pem({k: v for k, v in out.items() if k in ("ssl_certdata", "ssl_keydata")})
    certfile = str(files.get("ssl_certfile", out.get("ssl_certfile")))
    keyfile = str(files.get("ssl_keyfile", out.get("ssl_keyfile")))
    password = reveal(out.get("ssl_password"))
    try:
        # Without a password OpenSSL would prompt on the terminal for an encrypted key: answer with nothing.
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_cert_chain(
            certfile, keyfile, password=password if password is not None else (lambda: b""))
    except ssl.SSLError as err:
        encrypted = "ENCRYPTED" in Path(str(keyfile)).read_text(encoding="utf-8", errors="replace")
        if encrypted:
            problem = ("does not decrypt the client key" if password is not None
                       else "is missing: the client key is encrypted")
            raise SecuritySettingError(
                name("ssl.key.password"), problem, expected="the key's password", actual=REDACTED,
                fix=f"give the password the key was encrypted with as {name('ssl.key.password')}",
            ) from None
        raise SecuritySettingError(
            name("ssl.keystore.key") if "ssl_keydata" in out else name("ssl.keystore.location"),
            f"the client certificate and key do not load ({err.reason or err})", expected="a PEM certificate "
            "chain and its private key", actual=REDACTED,
            fix="give the certificate chain and the private key that belongs to it, both PEM",
        ) from None


def _pem(java: Mapping[str, Any], key: str, kind: str, name: Any) -> str:
    text = str(java[key]).strip()
    if "-----BEGIN " not in text or kind not in text.split("-----BEGIN ", 1)[1].split("-----", 1)[0]:
        raise SecuritySettingError(
            name(key), f"is not inline PEM ({kind})", expected=f"-----BEGIN ...{kind}----- ... -----END ...-----",
            actual=REDACTED if key in SECRET_NAMES else text[:30], fix=f"give the PEM text itself in {name(key)}",
        )
    return text + "\n"


# -- inline PEM for clients that need a path ------------------------------------------------------------------------

_PEM_DIR: Path | None = None
_PEM_LOCK = threading.Lock()
_PEM_FILES = {"ssl_cadata": "ssl_cafile", "ssl_certdata": "ssl_certfile", "ssl_keydata": "ssl_keyfile"}
_PEM_IN_MEMORY: dict[str, tuple[int, tuple[int, int]]] = {}
"""SHA-256 of a PEM text → its in-memory file (Linux): descriptor and (device, inode), here and in forked children."""


def _pem_dir() -> Path:
    global _PEM_DIR  # one private directory per process, removed at exit
    if _PEM_DIR is None:
        _PEM_DIR = Path(tempfile.mkdtemp(prefix="dmk-kafka-pem-"))  # mode 0700
        atexit.register(shutil.rmtree, _PEM_DIR, True)
    return _PEM_DIR


def _pem_path(text: str) -> str:
    """A path that reads as ``text``, private to this process; on Linux a file in memory, never on a disk.

    A PySpark worker ends with ``os._exit`` and a killed driver ends at once: neither runs ``atexit``, so files
    in a temporary directory outlived them (a client's private key among them). An in-memory file
    (``memfd_create``) goes with the last process that holds it; its path, ``/proc/self/fd/N``, opens it in this
    process and in the children it forks (they inherit the descriptor), and in no other user's process. Where
    there is no ``memfd_create``, a 0600 file in a 0700 temporary directory, removed at exit.
    """
    digest = hashlib.sha256(text.encode()).hexdigest()
    if hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd"):  # a path needs /proc mounted
        fd, identity = _PEM_IN_MEMORY.get(digest, (-1, (-1, -1)))
        try:
            held = fd >= 0 and _identity(os.fstat(fd)) == identity
        except OSError:
            held = False
        if not held:  # first use, or a child that closed (or reused) the descriptor: a file of its own
            fd = os.memfd_create(f"dmk-kafka-pem-{digest[:12]}")  # close-on-exec: not passed to programs run
            os.fchmod(fd, 0o600)
            os.write(fd, text.encode())
            _PEM_IN_MEMORY[digest] = (fd, _identity(os.fstat(fd)))
        return f"/proc/self/fd/{fd}"
    path = _pem_dir() / (digest[:24] + ".pem")
    if not path.exists():
        fd = os.open(path.with_suffix(".tmp"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(path.with_suffix(".tmp"), path)
    return str(path)


def _identity(status: os.stat_result) -> tuple[int, int]:
    return status.st_dev, status.st_ino


def materialize_pem(settings: Mapping[str, Any]) -> dict[str, Any]:
    """``settings`` with the kit's inline PEM settings as private files, for kafka-python.

    ``ssl_cadata``/``ssl_certdata``/``ssl_keydata`` become ``ssl_cafile``/``ssl_certfile``/``ssl_keyfile``. On
    Linux the files are in memory (:func:`_pem_path`): nothing is written to a disk, and nothing is left behind
    however the process ends. Elsewhere they are 0600 files in a 0700 directory of the temporary directory,
    removed when the process exits normally. Equal content shares one file within a process.
    """
    if not any(k in settings for k in _PEM_FILES):
        return dict(settings)
    out = {k: v for k, v in settings.items() if k not in _PEM_FILES}
    with _PEM_LOCK:
        for key, path_key in _PEM_FILES.items():
            if key in settings:
                out[path_key] = _pem_path(str(reveal(settings[key])))
    return out


# -- Java .properties files and key=value options -------------------------------------------------------------------

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    out, pos = [], 0
    while pos < len(text):
        char = text[pos]
        if char != "\\" or pos + 1 >= len(text):
            out.append(char)
            pos += 1
            continue
        nxt = text[pos + 1]
        if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[pos + 2:pos + 6]):
            out.append(chr(int(text[pos + 2:pos + 6], 16)))
            pos += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        pos += 2
    return "".join(out)


def _logical_lines(text: str) -> Iterable[str]:
    pending = ""
    for raw in text.splitlines():
        line = raw.lstrip() if pending else raw
        if not pending and line.lstrip()[:1] in ("#", "!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:  # an odd number of backslashes: the line continues
            pending += line[:-1]
            continue
        yield pending + line
        pending = ""
    if pending:
        yield pending


def read_properties(path: str | os.PathLike[str]) -> dict[str, str]:
    r"""A Java ``.properties`` file (a Kafka ``--command-config`` file) as ``{key: value}``.

    Java's format: ``key=value``, ``key: value`` or ``key value``; ``#``/``!`` comment lines; a line ending in a
    backslash continues on the next (leading whitespace there dropped), so a JAAS value can span lines; escapes
    ``\t \n \\ \uXXXX``. A later key wins over an earlier one.

    Raises:
        ConfigError: the file cannot be read.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as err:
        msg = f"cannot read the Kafka client config {os.fspath(path)!r}: {err.strerror}. Fix: give a readable file"
        raise ConfigError(msg, field="kafka-config", expected="a readable .properties file", actual=str(path)) from None
    out: dict[str, str] = {}
    for line in _logical_lines(text):
        stripped = line.lstrip()
        if not stripped:
            continue
        match = re.match(r"((?:[^\s=:\\]|\\.)*)\s*[=:]?\s*(.*)$", stripped, re.S)
        assert match is not None  # the pattern matches any text
        out[_unescape(match.group(1))] = _unescape(match.group(2))
    return out


def parse_kafka_option(text: str) -> tuple[str, str]:
    """``key=value`` (a ``--kafka-option``) as ``(key, value)``; the value may itself hold ``=``.

    Raises:
        ConfigError: no ``=``, or an empty key. The message never shows the value.
    """
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        msg = (f"--kafka-option must be key=value in the Java client's names (e.g. security.protocol=SASL_SSL), "
               f"got {'a value without a key' if sep else 'text without ='} (not shown: it may be a secret)")
        raise ConfigError(msg, field="kafka-option", expected="key=value", actual=None)
    return key.strip(), value

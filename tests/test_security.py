"""TLS/SASL settings: translation (both engines, both clients), redaction, and real TLS runs.

The unit tests need no broker. The TLS tests run both Kafka clients and both engines' sources through a real TLS
handshake with a client certificate (tests/_tls.py: a TLS proxy in front of Tansu, which has no TLS listener of its
own), then grep every file the runs wrote for the secrets. SASL cannot be run against a broker here
(docs/security.md says why); its translation is tested exactly.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import ssl
import stat
import subprocess
import sys
import tempfile
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from _sasl import SaslProxy
from _streaming import await_condition
from _tls import AdvertisedBroker, Pki, TlsProxy, make_pki

from compare.cli.common import _redacted_argv
from compare.settings import CompareSettings
from kit._rdkafka import translate
from kit.broker import free_port
from kit.engine import DriverConfig
from kit.errors import ConfigError, KafkaConnectionRefused
from kit.kafka import Kafka, TopicPartition, java_client_settings
from kit.security import (
    REDACTED,
    Secret,
    SecretUnavailable,
    SecuritySettingError,
    Withheld,
    materialize_pem,
    parse_jaas,
    read_properties,
    redact_settings,
    restore_secrets,
    reveal,
    translate_security,
    withhold_secrets,
)
from legacy._direct import KafkaParams
from legacy.errors import UnsupportedKafkaParams
from modern._options import SinkSettings, SourceSettings
from modern.errors import KafkaOptionError

PASSWORD = "pa55-" + uuid.uuid4().hex  # unique, so a grep for it finds only leaks
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
JAAS = f'{SCRAM} required username="alice" password="{PASSWORD}";'
SASL = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": JAAS}


# -- sasl.jaas.config ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), [
    (f'{PLAIN} required username="u" password="p";', (PLAIN, "u", "p")),
    (f'{SCRAM} required username="u" password="p"', (SCRAM, "u", "p")),  # no trailing ;
    (f'\n  {SCRAM}\trequired\n   username = "u"\n   password = "p" ;  \n', (SCRAM, "u", "p")),
    (f'{SCRAM} required username="a\\"b" password="c\\\\d;e"', (SCRAM, 'a"b', "c\\d;e")),
    (f"{PLAIN} required username=bare password=also_bare;", (PLAIN, "bare", "also_bare")),
    (f'{SCRAM} optional tokenauth="false" username="u" password="p";', (SCRAM, "u", "p")),
])
def test_jaas_strings_parse_as_kafkas_jaas_config(text: str, expected: tuple[str, str, str]) -> None:
    assert parse_jaas(text) == expected


@pytest.mark.parametrize(("text", "problem"), [
    (f'{SCRAM} required username="u" password="{PASSWORD}', "a quoted value is not closed"),
    (f'{SCRAM} required username="u";', "no password in the login module's options"),
    (f'{SCRAM} username="u" password="{PASSWORD}";', "the control flag must be required"),
    (f'{SCRAM} required username="u" password="{PASSWORD}"; {PLAIN} required;', "text after the closing ';'"),
    (f'{SCRAM} required username "u" password="{PASSWORD}";', "a quoted value without 'key=' before it"),
    ("", "expected a login module class and a control flag"),
])
def test_malformed_jaas_names_the_option_and_the_fix_without_the_password(text: str, problem: str) -> None:
    with pytest.raises(SecuritySettingError) as err:
        parse_jaas(text, option="kafka.sasl.jaas.config")
    message = str(err.value)
    assert message.startswith(f"kafka.sasl.jaas.config: {problem}")
    assert "Fix: give it as org.apache.kafka.common.security.scram.ScramLoginModule required" in message
    assert PASSWORD not in message and PASSWORD not in repr(err.value.__dict__)
    assert err.value.field == "kafka.sasl.jaas.config" and err.value.actual == REDACTED


@pytest.mark.parametrize(("module", "why"), [
    ("com.sun.security.auth.module.Krb5LoginModule", "Kerberos (GSSAPI) logins are not supported by this kit"),
    ("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule",
     "OAUTHBEARER logins are not supported by this kit"),
])
def test_other_login_modules_are_refused_with_the_reason(module: str, why: str) -> None:
    with pytest.raises(SecuritySettingError) as err:
        parse_jaas(f'{module} required useKeyTab=true password="{PASSWORD}";')
    assert str(err.value).startswith(f"sasl.jaas.config: {why}. Fix: use SASL PLAIN or SCRAM-SHA-256/512")
    assert PASSWORD not in str(err.value)


# -- translation ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_sasl_translates_to_both_clients(mechanism: str) -> None:
    module = PLAIN if mechanism == "PLAIN" else SCRAM
    settings, ignored = translate_security({
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
        "sasl.jaas.config": f'{module} required username="alice" password="{PASSWORD}";'})
    assert ignored == {}
    assert settings == {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": mechanism,
                        "sasl_plain_username": "alice", "sasl_plain_password": Secret(PASSWORD)}
    assert PASSWORD not in repr(settings)
    assert translate(settings) == ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
                                    "sasl.username": "alice", "sasl.password": PASSWORD}, [])


def test_tls_pem_files_and_inline_pem_translate(tmp_path: Path) -> None:
    pki = make_pki(tmp_path, PASSWORD)
    files, _ = translate_security({
        "security.protocol": "SSL", "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca_file),
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.client_file), "ssl.key.password": PASSWORD,
        "ssl.endpoint.identification.algorithm": ""})
    assert files == {"security_protocol": "SSL", "ssl_cafile": str(pki.ca_file), "ssl_certfile": str(pki.client_file),
                     "ssl_keyfile": str(pki.client_file), "ssl_password": Secret(PASSWORD), "ssl_check_hostname": False}
    inline, _ = translate_security({
        "security.protocol": "SSL", "ssl.truststore.type": "PEM", "ssl.truststore.certificates": pki.ca_pem,
        "ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": pki.client_chain_pem,
        "ssl.keystore.key": pki.client_key_pem, "ssl.key.password": PASSWORD,
        "ssl.endpoint.identification.algorithm": "https"})
    assert inline["ssl_cadata"] == pki.ca_pem and inline["ssl_certdata"] == pki.client_chain_pem
    assert inline["ssl_keydata"] == Secret(pki.client_key_pem) and inline["ssl_check_hostname"] is True
    rd, untranslated = translate(inline)
    assert untranslated == [] and rd == {
        "security.protocol": "SSL", "ssl.ca.pem": pki.ca_pem, "ssl.certificate.pem": pki.client_chain_pem,
        "ssl.key.pem": pki.client_key_pem, "ssl.key.password": PASSWORD,
        "ssl.endpoint.identification.algorithm": "https"}
    # kafka-python needs paths: private files (0600), shared by equal content.
    written = materialize_pem(inline)
    for key in ("ssl_cafile", "ssl_certfile", "ssl_keyfile"):
        assert stat.S_IMODE(Path(written[key]).stat().st_mode) == 0o600
    assert Path(written["ssl_keyfile"]).read_text() == pki.client_key_pem
    assert Path(written["ssl_cafile"]).read_text() == pki.ca_pem
    assert materialize_pem(inline)["ssl_keyfile"] == written["ssl_keyfile"]
    assert not {"ssl_cadata", "ssl_certdata", "ssl_keydata"} & set(written)


def test_inline_pem_without_memfd_goes_to_private_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Where there is no memfd_create (macOS...), a 0600 file in a 0700 temporary directory, shared by equal content.
    import kit.security as security

    monkeypatch.delattr(os, "memfd_create", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(security, "_PEM_DIR", None)
    pki = make_pki(tmp_path / "pki", PASSWORD)
    written = materialize_pem({"ssl_keydata": Secret(pki.client_key_pem), "ssl_cadata": pki.ca_pem})
    key = Path(written["ssl_keyfile"])
    assert key.parent.parent == tmp_path and key.parent.name.startswith("dmk-kafka-pem-")
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and stat.S_IMODE(key.parent.stat().st_mode) == 0o700
    assert key.read_text() == pki.client_key_pem and Path(written["ssl_cafile"]).read_text() == pki.ca_pem
    assert materialize_pem({"ssl_keydata": Secret(pki.client_key_pem)})["ssl_keyfile"] == str(key)


_PEM_CHILD = """
import os, sys
from kit.security import Secret, materialize_pem
key = sys.stdin.read()
path = materialize_pem({"ssl_keydata": Secret(key)})["ssl_keyfile"]
child = os.fork()
if child == 0:  # a forked worker reads the parent's file
    os._exit(0 if open(path).read() == key else 3)
_, status = os.waitpid(child, 0)
print(path, os.waitstatus_to_exitcode(status), flush=True)
os._exit(0)  # as a PySpark worker ends: no atexit
"""


def test_inline_pem_leaves_no_file_behind_when_the_process_ends_without_atexit(tmp_path: Path) -> None:
    # PySpark's workers end with os._exit and killed drivers at once: the key must not outlive them on a disk.
    pki = make_pki(tmp_path / "pki", PASSWORD)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    done = subprocess.run([sys.executable, "-c", _PEM_CHILD], input=pki.client_key_pem, capture_output=True,
                          text=True, timeout=60, check=True,
                          env={**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": str(Path(__file__).parents[1])})
    path, forked = done.stdout.split()
    assert forked == "0"  # the forked child read the same key through the same path
    assert list(tmp.iterdir()) == []
    if sys.platform == "linux":
        assert not Path(path).is_relative_to(tmp)


@pytest.mark.parametrize(("given", "field", "start", "fix"), [
    ({"security.protocol": "SSL", "ssl.truststore.location": "/x/t.jks", "ssl.truststore.password": PASSWORD},
     "ssl.truststore.type", "ssl.truststore.type: JKS truststores cannot be read by the Python Kafka clients "
     "(JKS is Java's default type)", "keytool -importkeystore -srckeystore STORE.jks"),
    ({"security.protocol": "SSL", "ssl.keystore.type": "PKCS12", "ssl.keystore.location": "/x/k.p12"},
     "ssl.keystore.type", "ssl.keystore.type: PKCS12 keystores cannot be read", "openssl pkcs12 -in STORE.p12"),
    ({"security.protocol": "SASL_SSL", "sasl.jaas.config": JAAS}, "sasl.mechanism",
     "sasl.mechanism: mechanism GSSAPI (Java's default when sasl.mechanism is not set) is not supported here",
     "set sasl.mechanism to PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER", "sasl.jaas.config": JAAS},
     "sasl.mechanism", "sasl.mechanism: mechanism OAUTHBEARER is not supported here", "GSSAPI/Kerberos and"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.jaas.config": JAAS}, "sasl.jaas.config",
     "sasl.jaas.config: ScramLoginModule does not log in with PLAIN", "use ScramLoginModule with SCRAM"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}, "sasl.jaas.config",
     "sasl.jaas.config: is required with security.protocol=SASL_SSL", "set sasl.jaas.config to the user's login"),
    ({"security.protocol": "SSL", "ssl.keystore.type": "PEM", "ssl.keystore.location": "/x/k.pem",
      "ssl.keystore.password": PASSWORD}, "ssl.keystore.password",
     "ssl.keystore.password: a PEM keystore takes ssl.key.password", "give the key's password as ssl.key.password"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256", "sasl.jaas.config": JAAS,
      "sasl.kerberos.service.name": "kafka"}, "sasl.kerberos.service.name",
     "sasl.kerberos.service.name: has no equivalent in the Python Kafka clients: GSSAPI/Kerberos", "remove"),
    ({"security.protocol": "SSL", "ssl.truststore.locaton": "/x"}, "ssl.truststore.locaton",
     "ssl.truststore.locaton: is not a TLS/SASL setting this kit knows", "did you mean 'ssl.truststore.location'?"),
    ({"security.protocol": "SSL", "ssl.truststore.type": "PEM", "ssl.truststore.location": "/no/such/ca.pem"},
     "ssl.truststore.location", "ssl.truststore.location: the truststore '/no/such/ca.pem' is not a readable file",
     "give the path of the PEM file on this machine"),
    ({"security.protocol": "TLS"}, "security.protocol", "security.protocol: unknown protocol 'TLS'",
     "use one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"),
])
def test_what_has_no_equivalent_is_refused_with_the_reason_and_fix(
    given: dict, field: str, start: str, fix: str
) -> None:
    with pytest.raises(SecuritySettingError) as err:
        translate_security(given)
    message = str(err.value)
    assert err.value.field == field
    assert message.startswith(start), message
    assert fix in message.split("Fix: ", 1)[1]
    assert PASSWORD not in message


def test_settings_a_protocol_does_not_use_are_ignored_with_the_reason(tmp_path: Path) -> None:
    settings, ignored = translate_security({"security.protocol": "SSL", "sasl.jaas.config": JAAS,
                                            "ssl.enabled.protocols": "TLSv1.2,TLSv1.3"})
    assert settings == {"security_protocol": "SSL"}
    assert ignored == {
        "sasl.jaas.config": "security.protocol is SSL, which does not use SASL (as in Java's client)",
        "ssl.enabled.protocols": "the Python clients negotiate TLS 1.2 or 1.3, as Java's defaults do"}


# -- both engines' option vocabularies -------------------------------------------------------------------------


def test_legacy_kafka_params_take_java_security_settings_and_never_show_the_password() -> None:
    parsed = KafkaParams.parse({"metadata.broker.list": "h:1", **SASL})
    assert parsed.client_settings() == {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512",
                                        "sasl_plain_username": "alice", "sasl_plain_password": Secret(PASSWORD)}
    assert PASSWORD not in repr(parsed) and PASSWORD not in str(parsed)
    # Tasks carry the value to the executors (as Spark's connector ships kafkaParams); equal params share a handle.
    assert pickle.loads(pickle.dumps(parsed)) == parsed
    assert reveal(dict(pickle.loads(pickle.dumps(parsed)).settings)["sasl_plain_password"]) == PASSWORD


def test_legacy_refuses_what_has_no_equivalent_together_with_other_bad_keys() -> None:
    with pytest.raises(UnsupportedKafkaParams) as err:
        KafkaParams.parse({"metadata.broker.list": "h:1", "security.protocol": "SSL",
                           "ssl.truststore.location": "/x/t.jks", "fetch.message.max.bytes": "lots"})
    assert sorted(err.value.unsupported) == ["fetch.message.max.bytes", "ssl.truststore.type"]
    assert err.value.unsupported["ssl.truststore.type"].startswith("JKS truststores cannot be read by the Python")


def test_modern_source_and_sink_take_kafka_prefixed_security_options() -> None:
    options = {"kafka.bootstrap.servers": "h:1", "subscribe": "t", **{f"kafka.{k}": v for k, v in SASL.items()}}
    source = SourceSettings.from_options(options, streaming=True)
    expected = {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": "alice",
                "sasl_plain_password": Secret(PASSWORD)}
    assert source.client == expected
    sink = SinkSettings.from_options({k: v for k, v in options.items() if k != "subscribe"} | {"topic": "o"})
    assert sink.client == expected and sink.producer == {}
    assert PASSWORD not in repr(source) and PASSWORD not in repr(sink)
    with pytest.raises(KafkaOptionError) as err:
        SourceSettings.from_options({**options, "kafka.sasl.jaas.config": JAAS.replace(SCRAM, PLAIN)}, streaming=True)
    assert err.value.option == "kafka.sasl.jaas.config"
    assert str(err.value).startswith("kafka.sasl.jaas.config: PlainLoginModule does not log in with SCRAM-SHA-512")
    assert PASSWORD not in str(err.value)


# -- what the kit writes and shows ------------------------------------------------------------------------------


def test_driver_config_and_compare_settings_never_hold_the_password_in_files_or_reprs(tmp_path: Path) -> None:
    config = DriverConfig(engine="modern", bootstrap_servers="h:1", topics={"events": "t"}, out_dir="o",
                          checkpoint_dir="c", kafka_security=dict(SASL))
    text = config.to_json()
    assert PASSWORD not in text and PASSWORD not in repr(config)
    assert json.loads(text)["kafka_security"] == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": f'{SCRAM} required username="alice" password="***";'}
    settings = CompareSettings("running_counts", out_dir=tmp_path / "run", kafka_security=dict(SASL))
    assert PASSWORD not in repr(settings) and "password=\"***\"" in repr(settings)


def test_command_lines_recorded_by_the_kit_hide_secret_options() -> None:
    argv = ["bench", "--kafka-option", f"sasl.jaas.config={JAAS}", f"--kafka-option=ssl.key.password={PASSWORD}",
            "--kafka-option", "security.protocol=SASL_SSL"]
    assert _redacted_argv(argv) == ["bench", "--kafka-option", "sasl.jaas.config=***",
                                    "--kafka-option=ssl.key.password=***",
                                    "--kafka-option", "security.protocol=SASL_SSL"]


def test_properties_files_read_as_javas_with_continuations(tmp_path: Path) -> None:
    path = tmp_path / "client.properties"
    path.write_text(
        "# a Kafka --command-config file\n! also a comment\n"
        "security.protocol = SASL_SSL\nsasl.mechanism:SCRAM-SHA-256\n"
        f'sasl.jaas.config={SCRAM} required \\\n    username="alice" \\\n    password="{PASSWORD}";\n'
        "ssl.endpoint.identification.algorithm=\n"
        "client.id  dmk\\u0021\n")
    java = read_properties(path)
    assert java == {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256",
                    "sasl.jaas.config": f'{SCRAM} required username="alice" password="{PASSWORD}";',
                    "ssl.endpoint.identification.algorithm": "", "client.id": "dmk!"}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        settings = java_client_settings({k: v for k, v in java.items() if not k.startswith("ssl.")})
    assert settings["client_id"] == "dmk!" and settings["sasl_plain_password"] == Secret(PASSWORD)
    with pytest.raises(ConfigError, match=r"\['group.id'\] are not settings the kit applies to its Kafka clients"):
        java_client_settings({"group.id": "g"})


def test_secrets_are_withheld_from_disk_pickles_and_found_again_in_the_process() -> None:
    settings, _ = translate_security(SASL)
    withheld = withhold_secrets(settings)
    assert withheld["sasl_plain_password"] == Withheld("sasl_plain_password[user=alice]")
    assert PASSWORD.encode() not in pickle.dumps(withheld)
    assert restore_secrets(pickle.loads(pickle.dumps(withheld))) == settings
    with pytest.raises(SecretUnavailable) as err:
        reveal(Withheld("sasl_plain_password[user=nobody]"))
    assert "give this process the same security settings before restoring" in str(err.value)
    assert redact_settings({"sasl.password": PASSWORD, "ssl_keydata": Secret("k")}) == {
        "sasl.password": REDACTED, "ssl_keydata": REDACTED}


# -- real TLS (mutual, with an encrypted client key) --------------------------------------------------------------


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory):
    """``(pki, bootstrap)`` of a broker reachable only through TLS with a client certificate."""
    directory = tmp_path_factory.mktemp("tls")
    pki = make_pki(directory / "pki", PASSWORD)
    probe = TlsProxy(pki, 0)  # reserves the port the broker advertises
    broker = AdvertisedBroker(probe.port, directory / "tansu.log")
    with broker:
        proxy = TlsProxy(pki, broker.port)
        proxy.port = probe.port
        with proxy:
            yield pki, f"127.0.0.1:{proxy.port}", proxy


def _java_tls(pki: Pki, *, inline: bool = True) -> dict[str, str]:
    if inline:  # inline PEM: the encrypted key and its password are the secrets
        return {"security.protocol": "SSL", "ssl.truststore.type": "PEM", "ssl.truststore.certificates": pki.ca_pem,
                "ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": pki.client_chain_pem,
                "ssl.keystore.key": pki.client_key_pem, "ssl.key.password": PASSWORD}
    return {"security.protocol": "SSL", "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca_file),
            "ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.client_file), "ssl.key.password": PASSWORD}


def _secrets(pki: Pki) -> list[str]:
    body = "".join(pki.client_key_pem.strip().splitlines()[1:-1])[:40]  # a piece of the encrypted key's base64
    return [PASSWORD, body]


def _leaks(root: Path, secrets: list[str]) -> list[str]:
    found = []
    for path in root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            found += [f"{path}: {s[:8]}..." for s in secrets if s.encode() in data]
    return found


@pytest.mark.parametrize("inline", [True, False], ids=["inline-pem", "pem-files"])
def test_both_clients_produce_and_read_through_mutual_tls(tls, kafka_client: str, inline: bool) -> None:
    pki, bootstrap, proxy = tls
    settings = java_client_settings(_java_tls(pki, inline=inline))
    before = proxy.handshakes
    with Kafka(bootstrap, settings=settings, timeout_s=20) as kafka:
        assert kafka.client == kafka_client
        _produce_and_read(kafka, records=5)
    assert proxy.handshakes > before  # every connection was TLS: the broker is reachable only through the proxy


def test_a_client_trusting_another_ca_does_not_connect(tls) -> None:
    pki, bootstrap, _ = tls
    java = {**_java_tls(pki), "ssl.truststore.certificates": pki.other_ca_pem}
    with pytest.raises(KafkaConnectionRefused) as err, \
            Kafka(bootstrap, settings=java_client_settings(java), timeout_s=5, client="kafka-python") as kafka:
        kafka.topics()
    assert err.value.kind == "tls" and "CERTIFICATE_VERIFY_FAILED" in err.value.reason
    assert str(err.value).startswith(f"Kafka at '{bootstrap}' failed the TLS handshake: ")
    assert "Fix: check that ssl.truststore.* holds the CA that signed the broker's certificate" in str(err.value)
    assert PASSWORD not in str(err.value)


# -- SASL (PLAIN, SCRAM) through an authenticating proxy -----------------------------------------------------------


def _jaas(mechanism: str, password: str) -> str:
    module = PLAIN if mechanism == "PLAIN" else SCRAM
    return f'{module} required username="alice" password="{password}";'


@contextlib.contextmanager
def _sasl_endpoint(mechanism: str, log: Path, tls_pki: Pki | None = None) -> Iterator[tuple[str, SaslProxy]]:
    """Bootstrap servers where clients must log in as alice/PASSWORD with ``mechanism`` (over TLS with a PKI)."""
    context = None
    if tls_pki is not None:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(str(tls_pki.server_cert), str(tls_pki.server_key))
    port = free_port()
    with AdvertisedBroker(port, log) as broker, \
            SaslProxy(mechanism, {"alice": PASSWORD}, broker.port, tls=context, port=port) as proxy:
        yield f"127.0.0.1:{port}", proxy


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_both_clients_log_in_with_each_mechanism(kafka_client: str, mechanism: str, tmp_path: Path) -> None:
    java = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
            "sasl.jaas.config": _jaas(mechanism, PASSWORD)}
    with _sasl_endpoint(mechanism, tmp_path / "tansu.log") as (bootstrap, proxy), \
            Kafka(bootstrap, settings=java_client_settings(java), timeout_s=20) as kafka:
        assert kafka.client == kafka_client
        _produce_and_read(kafka)
    assert proxy.failed == [] and set(proxy.authenticated) == {"alice"} and len(proxy.authenticated) >= 2


def test_scram_over_tls_with_a_pem_truststore(kafka_client: str, tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki", PASSWORD)
    java = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": _jaas("SCRAM-SHA-512", PASSWORD), "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(pki.ca_file)}
    with _sasl_endpoint("SCRAM-SHA-512", tmp_path / "tansu.log", pki) as (bootstrap, proxy), \
            Kafka(bootstrap, settings=java_client_settings(java), timeout_s=20) as kafka:
        _produce_and_read(kafka)
    assert proxy.failed == [] and "alice" in proxy.authenticated


def test_a_wrong_password_is_refused_with_the_fix_and_without_either_password(tmp_path: Path) -> None:
    wrong = "wrong-" + uuid.uuid4().hex
    java = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.jaas.config": _jaas("SCRAM-SHA-256", wrong)}
    with _sasl_endpoint("SCRAM-SHA-256", tmp_path / "tansu.log") as (bootstrap, proxy):
        with pytest.raises(KafkaConnectionRefused) as err, \
                Kafka(bootstrap, settings=java_client_settings(java), timeout_s=5) as kafka:
            kafka.topics()
        assert proxy.failed and set(proxy.failed) == {"alice"} and proxy.authenticated == []
    message = str(err.value)
    assert err.value.kind == "authentication"
    assert message.startswith(f"Kafka at '{bootstrap}' refused the client's credentials: ")
    assert "Authentication failed: Invalid username or password" in message
    assert "Fix: check sasl.mechanism and the username and password in sasl.jaas.config" in message
    assert wrong not in message and PASSWORD not in message


def _produce_and_read(kafka: Kafka, records: int = 3) -> None:
    topic = f"sec_{uuid.uuid4().hex[:8]}"
    kafka.create_topic(topic, 1)
    sender = kafka.sender()
    for i in range(records):
        sender.send(topic, key=b"k", value=f"v{i}".encode(), partition=0)
    assert sender.flush(20) == 0
    sender.close()
    end = kafka.end_offsets(topic)[TopicPartition(topic, 0)]
    rows = [(r.offset, r.value) for r in kafka.read_range(topic, 0, 0, end)]
    assert rows == [(i, f"v{i}".encode()) for i in range(records)]


# -- both engines on a secured cluster: the run works, and nothing it writes holds a secret ------------------------


@pytest.fixture(params=["mutual-tls", "sasl-scram"])
def secured(request: pytest.FixtureRequest, tls, tmp_path: Path) -> Iterator[tuple[str, dict[str, str], list[str]]]:
    """``(bootstrap, Java settings, secrets to grep for)`` of a mutual-TLS or a SASL/SCRAM endpoint."""
    if request.param == "mutual-tls":
        pki, bootstrap, _ = tls
        yield bootstrap, _java_tls(pki), _secrets(pki)
        return
    java = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.jaas.config": _jaas("SCRAM-SHA-256", PASSWORD)}
    with _sasl_endpoint("SCRAM-SHA-256", tmp_path / "tansu.log") as (bootstrap, _):
        yield bootstrap, java, [PASSWORD]


def _fill(bootstrap: str, java: dict[str, str], topic: str, values: list[str]) -> None:
    with Kafka(bootstrap, settings=java_client_settings(java), timeout_s=20) as kafka:
        kafka.create_topic(topic, 2)
        sender = kafka.sender()
        for i, value in enumerate(values):
            sender.send(topic, key=None, value=value.encode(), partition=i % 2)
        assert sender.flush(20) == 0
        sender.close()


def test_legacy_direct_stream_reads_a_secured_cluster_and_its_checkpoint_holds_no_secret(
    secured, spark, tmp_path: Path, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture
) -> None:
    from kit.spark import streaming_context
    from legacy.kafka import KafkaUtils

    bootstrap, java, secrets = secured
    topic = f"sec_legacy_{uuid.uuid4().hex[:8]}"
    _fill(bootstrap, java, topic, [f"r{i}" for i in range(6)])
    checkpoint = tmp_path / "checkpoint"
    ssc = streaming_context(0.5)
    try:
        ssc.checkpoint(str(checkpoint))
        stream = KafkaUtils.createDirectStream(ssc, [topic], {"metadata.broker.list": bootstrap,
                                                              "auto.offset.reset": "smallest", **java})
        seen: list[str] = []
        stream.foreachRDD(lambda rdd: seen.extend(v for _, v in rdd.collect()))
        ssc.start()
        await_condition(ssc, lambda: len(seen) >= 6 and len(list(checkpoint.glob("checkpoint-*"))) >= 2,
                        lambda: (seen, sorted(p.name for p in checkpoint.iterdir())))
    finally:
        ssc.stop(stopSparkContext=False, stopGraceFully=False)
    assert sorted(seen) == [f"r{i}" for i in range(6)]
    out, err = capfd.readouterr()
    assert _leaks(checkpoint, secrets) == []
    assert not [s for s in secrets if s in out + err + caplog.text]


def test_modern_source_and_sink_run_on_a_secured_cluster_and_the_checkpoint_holds_no_secret(
    secured, spark, tmp_path: Path, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture
) -> None:
    from modern.kafka import source_format

    bootstrap, java, secrets = secured
    options = {"kafka.bootstrap.servers": bootstrap, **{f"kafka.{k}": v for k, v in java.items()}}
    topic, out_topic = f"sec_modern_{uuid.uuid4().hex[:8]}", f"sec_modern_out_{uuid.uuid4().hex[:8]}"
    _fill(bootstrap, java, topic, [f"m{i}" for i in range(6)])
    fmt = source_format(spark)
    frame = (spark.readStream.format(fmt).options(**options).option("subscribe", topic)
             .option("startingOffsets", "earliest").load().selectExpr("value"))
    plan = frame._jdf.queryExecution().toString()
    assert topic in plan and not [s for s in secrets if s in plan]  # the kit's sessions redact Kafka options
    checkpoint = tmp_path / "checkpoint"
    with Kafka(bootstrap, settings=java_client_settings(java), timeout_s=20) as kafka:
        kafka.create_topic(out_topic, 1)
        query = (frame.writeStream.format(fmt).options(**options).option("topic", out_topic)
                 .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
        assert query.awaitTermination(120), "the query did not finish within 120 s"
        assert query.exception() is None
        end = kafka.end_offsets(out_topic)
        written = sorted(r.value.decode() for tp, o in end.items()
                         for r in kafka.read_range(out_topic, tp.partition, 0, o))
    assert written == [f"m{i}" for i in range(6)]
    out, err = capfd.readouterr()
    assert os.listdir(checkpoint)
    assert _leaks(checkpoint, secrets) == []
    assert not [s for s in secrets if s in out + err + caplog.text]


@pytest.mark.parametrize("inline", [True, False], ids=["inline-pem", "pem-files"])
def test_a_wrong_key_password_fails_at_once_naming_the_setting_and_fix(tmp_path: Path, inline: bool) -> None:
    pki = make_pki(tmp_path, PASSWORD)
    wrong = "wrong-" + uuid.uuid4().hex
    cases = ((wrong, "does not decrypt the client key"), (None, "is missing: the client key is encrypted"))
    for given, problem in cases:
        java = {k: v for k, v in _java_tls(pki, inline=inline).items() if k != "ssl.key.password"}
        if given is not None:
            java["ssl.key.password"] = given
        with pytest.raises(KafkaOptionError) as err:
            SourceSettings.from_options({"kafka.bootstrap.servers": "h:1", "subscribe": "t",
                                         **{f"kafka.{k}": v for k, v in java.items()}}, streaming=True)
        assert str(err.value) == (f"kafka.ssl.key.password: {problem}. Fix: give the password the key was encrypted "
                                  "with as kafka.ssl.key.password")
        assert wrong not in str(err.value) and PASSWORD not in str(err.value)


def test_a_checkpointed_stream_state_finds_its_secret_in_a_new_process_given_the_same_settings(tmp_path: Path) -> None:
    """What a restarted driver does: the checkpoint holds a reference; the process's own settings give the value."""
    settings, _ = translate_security(SASL)
    blob = tmp_path / "state.pickle"
    blob.write_bytes(pickle.dumps(withhold_secrets(settings)))
    assert PASSWORD.encode() not in blob.read_bytes()
    script = (
        "import pickle, sys, json\n"
        "from kit.security import translate_security, restore_secrets, reveal, SecretUnavailable\n"
        "restored = restore_secrets(pickle.loads(open(sys.argv[1], 'rb').read()))\n"
        "try:\n    reveal(restored['sasl_plain_password'])\nexcept SecretUnavailable as e:\n    print('unavailable')\n"
        "translate_security(json.loads(sys.argv[2]))\n"
        "print(reveal(restore_secrets(pickle.loads(open(sys.argv[1], 'rb').read()))['sasl_plain_password']))\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(blob), json.dumps(SASL)], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.splitlines() == ["unavailable", PASSWORD]


def _properties(java: dict[str, str]) -> str:
    """Java settings as a .properties file (newlines of inline PEM escaped as Java reads them)."""
    return "".join(f"{k}={v.strip().replace(chr(10), chr(92) + 'n')}\n" for k, v in java.items())


def _dmk(*args: str, timeout_s: float = 300) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DMK_KAFKA_CONFIG", "DMK_BOOTSTRAP_SERVERS")}
    return subprocess.run([sys.executable, "-m", "compare.cli", *args], capture_output=True, text=True,
                          timeout=timeout_s, env=env, cwd=Path(__file__).resolve().parent.parent)


def test_dmk_commands_and_a_compare_run_connect_through_tls_and_write_no_secret(tls, tmp_path: Path) -> None:
    pki, bootstrap, proxy = tls
    config = tmp_path / "client.properties"
    config.write_text("# as Kafka's --command-config\n" + _properties(_java_tls(pki)))
    topic = f"tls_cli_{uuid.uuid4().hex[:8]}"
    with Kafka(bootstrap, settings=java_client_settings(_java_tls(pki)), timeout_s=20) as kafka:
        kafka.create_topic(topic, 2)
        sender = kafka.sender()
        for _ in range(3):
            sender.send(topic, key=None, value=b"x", partition=0)
        assert sender.flush(20) == 0
        sender.close()
    offsets = _dmk("offsets", topic, "--json", "--bootstrap-servers", bootstrap, "--kafka-config", str(config))
    assert offsets.returncode == 0, offsets.stderr
    assert json.loads(offsets.stdout) == {topic: {"0": {"beginning": 0, "end": 3}, "1": {"beginning": 0, "end": 0}}}
    # A wrong key password given on the command line (over the file): one clear line, no secret.
    wrong = "wrong-" + uuid.uuid4().hex
    refused = _dmk("offsets", topic, "--bootstrap-servers", bootstrap, "--kafka-config", str(config),
                   "--kafka-option", f"ssl.key.password={wrong}")
    assert refused.returncode == 2
    assert "dmk offsets: error: ssl.key.password: does not decrypt the client key. Fix: give the password" in (
        " ".join(refused.stderr.split()))
    assert wrong not in refused.stderr + refused.stdout
    # A compare run: replay, both driver processes (their sources, the legacy checkpoint), report, metrics.
    run = tmp_path / "run"
    before = proxy.handshakes
    done = _dmk("compare", "running_counts", "--records", "600", "--profile", "clean", "--burst", "--partitions", "2",
                "--out", str(run),
                "--bootstrap-servers", bootstrap, "--kafka-config", str(config), "--timeout", "240", timeout_s=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert proxy.handshakes > before + 4
    assert _leaks(run, _secrets(pki)) == []
    assert not [s for s in _secrets(pki) if s in done.stdout + done.stderr]
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["settings"]["kafka_security"]["ssl.key.password"] == REDACTED
    assert metrics["settings"]["kafka_security"]["ssl.keystore.key"] == REDACTED
    config_file = json.loads((run / "legacy" / "driver-config.json").read_text())
    assert config_file["kafka_security"]["ssl.key.password"] == REDACTED
    assert list(run.glob("legacy-checkpoint/checkpoint-*"))


def test_the_docs_kafka_config_example_reads_and_translates() -> None:
    """docs/security.md's --kafka-config example is a file dmk reads as the docs say."""
    doc = (Path(__file__).resolve().parent.parent / "docs" / "security.md").read_text()
    block = doc.split("```properties\n", 1)[1].split("```", 1)[0]
    path = Path(os.environ.get("TMPDIR", "/tmp")) / f"dmk-doc-{uuid.uuid4().hex}.properties"
    path.write_text(block)
    try:
        java = read_properties(path)
    finally:
        path.unlink()
    assert java["sasl.jaas.config"] == f'{SCRAM} required username="alice" password="alice-secret";'
    settings, ignored = translate_security({k: v for k, v in java.items() if k != "ssl.truststore.location"})
    assert ignored == {} and settings["sasl_plain_username"] == "alice"
    assert settings["sasl_plain_password"] == Secret("alice-secret")


def test_the_pytest_plugin_connects_its_fixtures_with_kafka_config_and_options(tmp_path: Path) -> None:
    """A team's CI runs the plugin's fixtures against a secured cluster: --kafka-config, --kafka-option, env."""
    config = tmp_path / "client.properties"
    config.write_text(
        f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config={_jaas('PLAIN', 'x')}\n")
    (tmp_path / "test_secured.py").write_text(
        "from kit.kafka import Kafka\n\n"
        "def test_fixtures(kafka_settings, kafka_broker):\n"
        "    assert kafka_settings['sasl.mechanism'] == 'SCRAM-SHA-256'\n"
        "    assert kafka_settings['client.id'] == 'from-env'\n"
        "    with Kafka(kafka_broker) as kafka:  # no settings given: the session's\n"
        "        kafka.create_topic('plugin_topic', 1)\n"
        "        assert 'plugin_topic' in kafka.topics()\n"
    )
    with _sasl_endpoint("SCRAM-SHA-256", tmp_path / "tansu.log") as (bootstrap, proxy):
        env = {**os.environ, "DMK_TEST_KAFKA_OPTIONS": "client.id=from-env\n"}
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path / "test_secured.py"),
             "--kafka-bootstrap", bootstrap, "--kafka-config", str(config),
             "--kafka-option", "sasl.mechanism=SCRAM-SHA-256",
             "--kafka-option", f"sasl.jaas.config={_jaas('SCRAM-SHA-256', PASSWORD)}"],
            capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        assert "1 passed" in done.stdout
        assert proxy.failed == [] and "alice" in proxy.authenticated
    assert PASSWORD not in done.stdout + done.stderr


def test_run_configs_of_both_engines_show_their_kafka_settings_redacted() -> None:
    from kit.dataset import DatasetSpec
    from legacy.runner import LegacyRunConfig
    from modern.runner import ModernRunConfig

    dataset = DatasetSpec.from_profile("clean", records=100)
    legacy = LegacyRunConfig("h:1", {"events": "t"}, "o", "c", dataset, (), kafka_params=dict(SASL))
    modern = ModernRunConfig("h:1", {"events": "t"}, "o", "c", dataset, (),
                             source_options={f"kafka.{k}": v for k, v in SASL.items()})
    for config in (legacy, modern):
        assert PASSWORD not in repr(config)
        assert f'{SCRAM} required username="alice" password="***";' in repr(config)


def _secured_legacy_job() -> str:
    """examples/orders/legacy_job.py, its own output producer given the team's client settings, as teams do.

    Its stream's kafkaParams stay without TLS/SASL settings: ``dmk compare-jobs --kafka-config`` gives them.
    """
    source = (Path(__file__).resolve().parent.parent / "examples" / "orders" / "legacy_job.py").read_text()
    producer = "    producer = KafkaProducer(bootstrap_servers=bootstrap)\n"
    main = "if __name__ == \"__main__\":\n"
    assert producer in source and main in source
    # The settings are read where the producer runs: a closure holding them would put them in the checkpoint.
    return (source.replace(producer, "    producer = KafkaProducer(bootstrap_servers=bootstrap, **client_settings())\n")
            .replace(main, "from kit.kafka import java_client_settings, python_client_config\n"
                           "from kit.security import read_properties\n\n"
                           "CONFIG = sys.argv[5]\n\n\n"
                           "def client_settings():\n"
                           "    return python_client_config(java_client_settings(read_properties(CONFIG)))\n\n\n"
                           + main))


# Slow (80-95 s): both engines already run on a SASL cluster in the default tier (the secured-cluster tests above),
# and compare-jobs on the plain broker (tests/test_compare_jobs.py).
@pytest.mark.slow
def test_compare_jobs_gives_the_settings_to_the_teams_unmodified_jobs_on_a_sasl_cluster(
    kafka_broker: str, tmp_path: Path
) -> None:
    from examples.orders import orders
    from kit.capture import capture

    topic = f"sec_orders_{uuid.uuid4().hex[:8]}"
    with Kafka(kafka_broker) as kafka:  # the capture comes from anywhere: here the plain session broker
        kafka.create_topic(topic, 2)
        sender = kafka.sender()
        for i, (key, value) in enumerate(orders(300)):
            sender.send(topic, key=key, value=value, partition=i % 2)
        assert sender.flush(30) == 0
        sender.close()
    captured = capture(kafka_broker, topic, tmp_path / "orders.jsonl").path
    config = tmp_path / "client.properties"
    config.write_text(_properties({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
                                   "sasl.jaas.config": _jaas("SCRAM-SHA-512", PASSWORD)}))
    legacy = tmp_path / "legacy_secured.py"
    legacy.write_text(_secured_legacy_job())
    run = tmp_path / "run"
    with _sasl_endpoint("SCRAM-SHA-512", tmp_path / "tansu.log") as (bootstrap, proxy):
        done = _dmk("compare-jobs", "--input", str(captured), "--key", "customer", "--out", str(run),
                    "--legacy", f"python {legacy} {{bootstrap}} {{topic}} {{output_topic}} {{checkpoint}} {config}",
                    "--modern",
                    "python examples/orders/modern_job.py {bootstrap} {topic} {output_topic} {checkpoint}",
                    "--bootstrap-servers", bootstrap, "--kafka-config", str(config), "--timeout", "300",
                    timeout_s=900)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:] + "".join(
            p.read_text()[-3000:] for p in run.glob("*/job.log"))
        assert proxy.failed == [] and proxy.authenticated.count("alice") > 4
    assert json.loads((run / "metrics.json").read_text())["equivalent"] is True
    assert _leaks(run, [PASSWORD]) == [] and PASSWORD not in done.stdout + done.stderr

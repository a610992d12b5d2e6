"""Fast tests of the event contract and the dataset generator (no Spark, no Kafka)."""

from __future__ import annotations

import dataclasses
import json
import time
from collections import Counter, defaultdict

import numpy as np
import pandas as pd
import pytest

from kit.dataset import (
    COLUMNS,
    KINDS,
    PROFILES,
    DatasetSpec,
    ad_campaigns,
    generate,
    generate_to_file,
    read_dataset,
    read_manifest,
    write_dataset,
)
from kit.errors import ConfigError, DatasetError
from kit.events import EVENT_TIME_MAX_MS, REJECT_REASONS, REQUIRED_FIELDS, parse_event
from kit.kafka import key_partition

VALID_KINDS = ("clean", "late", "too_late", "duplicate")

# 50k messy records: the main fixture for label and file checks.
MESSY = DatasetSpec.from_profile("messy", records=50_000, seed=11)
# Few, slow users: ~30-event sessions and many session boundaries within 20k records.
SESSIONS = DatasetSpec.from_profile("messy", records=20_000, seed=3, users=20, events_per_second=5)


@pytest.fixture(scope="module")
def messy() -> pd.DataFrame:
    return generate(MESSY)


@pytest.fixture(scope="module")
def sessions() -> pd.DataFrame:
    return generate(SESSIONS)


def parsed(df: pd.DataFrame) -> list[tuple[dict | None, str | None]]:
    return [parse_event(v) for v in df["value"]]


def independent_lateness(df: pd.DataFrame) -> list[int | None]:
    """Lateness per row from the values themselves: max earlier valid event_time minus own (None if invalid)."""
    out: list[int | None] = []
    running = None
    for event, _ in parsed(df):
        if event is None:
            out.append(None)
            continue
        t = event["event_time"]
        out.append(0 if running is None else running - t)
        running = t if running is None else max(running, t)
    return out


# ----------------------------------------------------------------------------------------------------
# kit.events


VALID = (
    b'{"event_id":"e42-000000001f","user":"u0042","key":"k0007","ad_id":"ad-0013",'
    b'"ad_type":"banner","event_type":"view","event_time":1767225600123}'
)


def test_parse_event_accepts_a_valid_event():
    event, reason = parse_event(VALID)
    assert reason is None
    assert list(event) == list(REQUIRED_FIELDS)
    assert event["event_time"] == 1767225600123


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (VALID.replace(b"u0042", b"u0042\xff"), "bad_utf8"),
        (b"\xff{not json", "bad_utf8"),  # checks run in order: UTF-8 before JSON
        (VALID[:-1], "bad_json"),
        (b"[1, 2]", "bad_json"),
        (b'"a string"', "bad_json"),
        (b"", "bad_json"),
        (None, "bad_json"),
        (VALID.replace(b'"user":"u0042",', b""), "missing_field"),
        (VALID.replace(b"1767225600123", b"true"), "missing_field"),
        (VALID.replace(b"1767225600123", b"1767225600123.0"), "missing_field"),
        (VALID.replace(b"1767225600123", b'"1767225600123"'), "missing_field"),
        (VALID.replace(b'"u0042"', b"42"), "missing_field"),
        (VALID.replace(b"1767225600123", b"-1"), "bad_timestamp"),
        (VALID.replace(b"1767225600123", b"0"), "bad_timestamp"),
        (VALID.replace(b"1767225600123", b"10000000000000000"), "bad_timestamp"),
        (VALID.replace(b"1767225600123", str(EVENT_TIME_MAX_MS).encode()), "bad_timestamp"),
    ],
)
def test_parse_event_reasons(value, reason):
    assert parse_event(value) == (None, reason)


def test_parse_event_accepts_bytearray_and_memoryview():
    assert parse_event(bytearray(VALID))[1] is None
    assert parse_event(memoryview(VALID))[1] is None


# ----------------------------------------------------------------------------------------------------
# Spec


def test_defaults_and_profiles():
    spec = DatasetSpec()
    assert (spec.records, spec.seed, spec.partitions, spec.start_ms) == (100_000, 42, 4, 1_767_225_600_000)
    assert set(PROFILES) == {"clean", "messy"}
    assert DatasetSpec.from_profile("clean") == spec
    messy = DatasetSpec.from_profile("messy", seed=1)
    assert (messy.late_fraction, messy.too_late_fraction, messy.duplicate_fraction, messy.malformed_fraction) == (
        0.05,
        0.01,
        0.02,
        0.01,
    )
    assert messy.seed == 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.records = 5  # type: ignore[misc]


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"records": 0}, "records"),
        ({"records": True}, "records"),
        ({"records": 10.0}, "records"),
        ({"seed": -1}, "seed"),
        ({"partitions": 0}, "partitions"),
        ({"key_skew": "pareto"}, "key_skew"),
        ({"zipf_exponent": 0}, "zipf_exponent"),
        ({"events_per_second": float("inf")}, "events_per_second"),
        ({"late_fraction": 1.0}, "late_fraction"),
        ({"duplicate_fraction": -0.1}, "duplicate_fraction"),
        ({"malformed_fraction": True}, "malformed_fraction"),
        ({"late_fraction": 0.3, "duplicate_fraction": 0.2}, "malformed_fraction"),  # sum must be < 0.5
        ({"campaigns": 101}, "campaigns"),
        ({"session_margin_ms": 30_000}, "session_margin_ms"),
        ({"lateness_margin_ms": 5_000}, "lateness_margin_ms"),
        ({"session_margin_ms": 3_000}, "session_margin_ms"),  # must exceed 5000 - 2000
        ({"start_ms": 0}, "start_ms"),
        ({"start_ms": EVENT_TIME_MAX_MS}, "start_ms"),
    ],
)
def test_spec_validation(overrides, field):
    with pytest.raises(ConfigError) as info:
        DatasetSpec(**overrides)
    err = info.value
    assert err.field == field
    assert f"DatasetSpec.{field}: expected" in str(err)
    assert repr(err.actual) in str(err)


def test_spec_validation_names_expected_and_actual():
    with pytest.raises(ConfigError) as info:
        DatasetSpec(lateness_margin_ms=6_000)
    assert info.value.expected == "less than allowed_lateness_ms=5000"
    assert info.value.actual == 6_000
    assert str(info.value) == "DatasetSpec.lateness_margin_ms: expected less than allowed_lateness_ms=5000, got 6000."


def test_from_profile_rejects_unknown_profile_and_configs():
    with pytest.raises(ConfigError, match=r"unknown dataset profile 'dirty'; valid profiles: clean, messy"):
        DatasetSpec.from_profile("dirty")
    with pytest.raises(ConfigError) as info:
        DatasetSpec.from_profile("messy", recrods=5, zzz=1)
    assert str(info.value).startswith("Unrecognized configs: {'recrods', 'zzz'}. Valid DatasetSpec fields: records,")
    assert info.value.actual == ("recrods", "zzz")


def test_too_short_a_stream_for_too_late_records_is_a_config_error():
    # 1000 records at 1000/s span one second; a too_late record needs an in-order record 7 s after it.
    with pytest.raises(ConfigError) as info:
        generate(DatasetSpec.from_profile("messy", records=1_000))
    assert info.value.field == "too_late_fraction"
    assert "lower events_per_second" in str(info.value)


# ----------------------------------------------------------------------------------------------------
# Counts and labels


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (
            MESSY,
            {"clean": 45_500, "late": 2_500, "too_late": 500, "duplicate": 1_000, "boundary": 0}
            | dict.fromkeys(REJECT_REASONS, 125),
        ),
        # 1234 * (0.05, 0.01, 0.02, 0.01) = 61.7, 12.34, 24.68, 12.34 -> 62, 12, 25, 12 (= 3 per reason)
        (
            DatasetSpec.from_profile("messy", records=1_234, events_per_second=50),
            {"clean": 1_123, "late": 62, "too_late": 12, "duplicate": 25, "boundary": 0}
            | dict.fromkeys(REJECT_REASONS, 3),
        ),
        # 0.007 * 1000 = 7 malformed: 2, 2, 2, 1 in REJECT_REASONS order; 0.0005 * 1000 = 0.5 rounds up to 1.
        (
            DatasetSpec(records=1_000, events_per_second=50, malformed_fraction=0.007, late_fraction=0.0005),
            {"clean": 992, "late": 1, "too_late": 0, "duplicate": 0, "boundary": 0, "bad_utf8": 2, "bad_json": 2}
            | {"missing_field": 2, "bad_timestamp": 1},
        ),
    ],
)
def test_exact_kind_counts(spec, expected):
    assert spec.kind_counts() == expected
    df = generate(spec)
    assert len(df) == spec.records
    assert dict(Counter(df["kind"])) == {k: n for k, n in expected.items() if n}


def test_frame_shape(messy):
    assert tuple(messy.columns) == COLUMNS
    assert messy.dtypes.astype(str).tolist() == ["int64", "object", "object", "int64", "int32", "string"]
    assert (messy["seq"].to_numpy() == np.arange(len(messy))).all()
    assert set(messy["kind"]) == set(KINDS) - {"boundary"}  # boundary records only with boundary_records
    assert all(type(k) is bytes for k in messy["key"]) and all(type(v) is bytes for v in messy["value"])


def test_parse_event_reason_equals_kind_for_every_row(messy):
    for (event, reason), kind in zip(parsed(messy), messy["kind"]):
        if kind in VALID_KINDS:
            assert reason is None and event is not None, kind
        else:
            assert reason == kind


def test_lateness_bands(messy):
    spec = MESSY
    lateness = independent_lateness(messy)
    bands = {
        "clean": lambda x: x <= 0,
        "late": lambda x: 0 < x <= spec.allowed_lateness_ms - spec.lateness_margin_ms,
        "too_late": lambda x: x >= spec.allowed_lateness_ms + spec.lateness_margin_ms,
        "duplicate": lambda x: 0 <= x <= spec.allowed_lateness_ms - spec.lateness_margin_ms,
    }
    seen = Counter()
    for lat, kind in zip(lateness, messy["kind"]):
        if kind in bands:
            assert bands[kind](lat), (kind, lat)
            seen[kind] += 1
    assert seen == Counter({k: n for k, n in spec.kind_counts().items() if k in bands})


def test_timestamps(messy):
    """Valid records carry their event time; malformed ones the running max (so always a sane timestamp)."""
    running = None
    for (event, _), ts in zip(parsed(messy), messy["timestamp_ms"]):
        if event is not None:
            assert ts == event["event_time"]
            running = ts if running is None else max(running, ts)
        elif running is not None:
            assert ts == running
        else:
            assert ts >= MESSY.start_ms


def test_valid_values_are_compact_json_in_field_order(messy):
    first = messy["value"].iloc[0]
    assert first.startswith(b'{"event_id":"e11-0000000000","user":"u')
    event_ids = set()
    for value, kind in zip(messy["value"], messy["kind"]):
        if kind in ("clean", "late", "too_late"):
            event = json.loads(value)
            assert list(event) == list(REQUIRED_FIELDS)
            assert value == json.dumps(event, separators=(",", ":")).encode()
            event_ids.add(event["event_id"])
    assert len(event_ids) == MESSY.kind_counts()["clean"] + 2_500 + 500  # unique per base event


def test_duplicates_copy_an_earlier_clean_record_within_the_horizon(messy):
    horizon = MESSY.allowed_lateness_ms - MESSY.lateness_margin_ms
    clean_seen: set[bytes] = set()
    running = None
    originals = []
    for value, kind, ts in zip(messy["value"], messy["kind"], messy["timestamp_ms"]):
        if kind == "duplicate":
            assert value in clean_seen
            assert 0 <= running - ts <= horizon
            originals.append(value)
        if kind == "clean":
            clean_seen.add(value)
        if kind in VALID_KINDS:
            running = ts if running is None else max(running, ts)
    assert len(originals) == len(set(originals)) == 1_000


def test_key_is_the_user_and_partition_is_murmur2(messy):
    for key, partition, (event, _) in zip(messy["key"], messy["partition"], parsed(messy)):
        assert partition == key_partition(key, MESSY.partitions)
        if event is not None:
            assert key == event["user"].encode()


def test_sessions_never_gap_near_the_session_gap(sessions):
    spec = SESSIONS
    low, high = spec.session_gap_ms - spec.session_margin_ms, spec.session_gap_ms + spec.session_margin_ms
    with_too_late: dict[str, list[int]] = defaultdict(list)
    without: dict[str, list[int]] = defaultdict(list)
    for (event, _), kind in zip(parsed(sessions), sessions["kind"]):
        if event is not None:
            with_too_late[event["user"]].append(event["event_time"])
            if kind != "too_late":
                without[event["user"]].append(event["event_time"])
    boundaries = 0
    for per_user in (with_too_late, without):  # an engine that drops too_late records sees the same sessions
        boundaries = 0
        for times in per_user.values():
            gaps = np.diff(np.sort(times))
            assert not ((gaps > low) & (gaps < high)).any()
            boundaries += int((gaps >= high).sum())
    # ~1000 events per user in sessions of ~30: the property is tested across hundreds of boundaries.
    assert boundaries > 300
    events_per_session = (len(sessions) - boundaries) / (boundaries + spec.users)
    assert 15 < events_per_session < 60


def test_stream_rate_is_close_to_events_per_second(sessions, messy):
    for spec, df in ((SESSIONS, sessions), (MESSY, messy)):
        times = df.loc[df["kind"] == "clean", "timestamp_ms"]
        rate = (len(df) - 1) / ((times.max() - times.min()) / 1000)
        assert 0.8 * spec.events_per_second < rate < 1.25 * spec.events_per_second


def test_zipf_makes_the_top_key_hot():
    def top_share(skew: str) -> float:
        df = generate(DatasetSpec(records=20_000, key_skew=skew))
        counts = Counter(json.loads(v)["key"] for v in df["value"])
        return counts.most_common(1)[0][1] / len(df)

    uniform, zipf = top_share("uniform"), top_share("zipf")
    assert uniform < 0.005  # 1000 keys: about 0.001 each
    assert zipf > 0.15  # bounded zipf(1.2) over 1000 keys puts ~22 % on k0000
    assert zipf > 30 * uniform


def test_ad_campaigns():
    mapping = ad_campaigns(DatasetSpec())
    assert list(mapping) == [f"ad-{i:04d}" for i in range(100)]
    assert Counter(mapping.values()) == {f"c-{c:04d}": 10 for c in range(10)}
    assert mapping == ad_campaigns(DatasetSpec())
    assert mapping != ad_campaigns(DatasetSpec(seed=43))


def test_generation_is_deterministic_and_seeded(messy):
    pd.testing.assert_frame_equal(generate(MESSY), messy, check_exact=True)
    other = generate(dataclasses.replace(MESSY, seed=12))
    assert not other["value"].equals(messy["value"])


# ----------------------------------------------------------------------------------------------------
# Files


@pytest.mark.parametrize("suffix", [".parquet", ".jsonl"])
def test_files_are_byte_identical_and_round_trip(tmp_path, messy, suffix):
    first = tmp_path / "a" / f"events{suffix}"
    second = tmp_path / "b" / f"events{suffix}"
    manifest = write_dataset(messy, first, MESSY)
    assert generate_to_file(MESSY, second) == manifest
    assert first.read_bytes() == second.read_bytes()
    manifest_path = first.with_name(first.name + ".manifest.json")
    assert manifest_path.read_bytes() == second.with_name(second.name + ".manifest.json").read_bytes()
    assert read_manifest(first) == read_manifest(manifest_path) == manifest
    assert json.loads(manifest_path.read_text()) == manifest

    assert manifest["format"] == "dmk-dataset/4"
    assert manifest["boundary"] is None
    assert manifest["file"] == f"events{suffix}"
    assert manifest["format_of_file"] == suffix[1:]
    assert manifest["records"] == 50_000
    assert manifest["spec"] == dataclasses.asdict(MESSY)
    assert manifest["counts"] == MESSY.kind_counts()
    assert manifest["partitions"] == {
        str(p): int(n) for p, n in enumerate(np.bincount(messy["partition"], minlength=MESSY.partitions))
    }
    valid = messy["kind"].isin(VALID_KINDS)
    assert manifest["event_time_ms"] == {
        "min": int(messy.loc[valid, "timestamp_ms"].min()),
        "max": int(messy.loc[valid, "timestamp_ms"].max()),
    }

    pd.testing.assert_frame_equal(read_dataset(first), messy, check_exact=True)

    third = tmp_path / "c" / f"events{suffix}"
    assert generate_to_file(dataclasses.replace(MESSY, seed=12), third)["sha256"] != manifest["sha256"]


def test_jsonl_lines(tmp_path, messy):
    path = tmp_path / "events.jsonl"
    write_dataset(messy, path, MESSY)
    lines = path.read_text(encoding="ascii").splitlines()
    first = json.loads(lines[0])
    assert list(first) == ["seq", "partition", "timestamp_ms", "kind", "key", "value"]
    assert first["value"].encode() == messy["value"].iloc[0]
    b64 = [json.loads(line) for line, kind in zip(lines, messy["kind"]) if kind == "bad_utf8"]
    assert len(b64) == 125 and all("value_b64" in o and "value" not in o for o in b64)


def test_tampered_file_is_detected(tmp_path):
    path = tmp_path / "events.jsonl"
    spec = DatasetSpec(records=2_000)
    generate_to_file(spec, path)
    data = bytearray(path.read_bytes())
    data[40] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(DatasetError, match="changed since generation") as info:
        read_dataset(path)
    assert info.value.path == str(path)
    assert "Re-generate" in str(info.value)


@pytest.mark.parametrize("suffix", [".parquet", ".jsonl"])
def test_missing_and_garbage_files(tmp_path, suffix):
    path = tmp_path / f"nope{suffix}"
    with pytest.raises(DatasetError, match="does not exist") as info:
        read_dataset(path)
    assert info.value.path == str(path) and "generate_to_file" in str(info.value)
    path.write_bytes(b"this is not a dataset\n")
    with pytest.raises(DatasetError, match="Re-generate") as info:
        read_dataset(path)
    assert info.value.path == str(path)
    with pytest.raises(DatasetError, match="no manifest found"):
        read_manifest(path)


def test_bad_extension_and_mismatched_frames(tmp_path, messy):
    with pytest.raises(DatasetError, match=r"unknown dataset file extension '\.csv'"):
        write_dataset(messy, tmp_path / "events.csv", MESSY)
    with pytest.raises(DatasetError, match=r"unknown dataset file extension '\.csv'"):
        read_dataset(tmp_path / "events.csv")
    with pytest.raises(DatasetError, match="spec.records is 50001"):
        write_dataset(messy, tmp_path / "events.parquet", dataclasses.replace(MESSY, records=50_001))
    with pytest.raises(DatasetError, match="key_partition"):
        write_dataset(messy, tmp_path / "events.parquet", dataclasses.replace(MESSY, partitions=3))
    assert list(tmp_path.iterdir()) == []  # nothing half-written


# ----------------------------------------------------------------------------------------------------
# The boundary block (issue 38, item 4)

_BASE = DatasetSpec.from_profile("messy", records=20_000, seed=5, events_per_second=500, lateness_margin_ms=4_000,
                                 users=300)
BOUNDARY = dataclasses.replace(_BASE, records=20_000 + _BASE.boundary_minimum,
                               boundary_records=_BASE.boundary_minimum)


@pytest.fixture(scope="module")
def boundary() -> pd.DataFrame:
    return generate(BOUNDARY)


def test_boundary_minimum_is_two_lead_ins_of_three_batches_and_the_probes():
    # 500 events/s with a 4 s margin: the batch caps let 1,000 records through per batch.
    assert (_BASE.boundary_lead_in, _BASE.boundary_minimum) == (3_000, 6_024)
    with pytest.raises(ConfigError, match="at least 6024") as info:
        dataclasses.replace(_BASE, records=30_000, boundary_records=6_023)
    assert info.value.field == "boundary_records" and "--boundary-records 6024" in str(info.value)
    with pytest.raises(ConfigError) as info:
        dataclasses.replace(_BASE, records=6_024, boundary_records=6_024)
    assert info.value.field == "records"


def test_boundary_block_follows_the_main_stream_unchanged(boundary):
    assert len(boundary) == BOUNDARY.records
    main = generate(_BASE)
    assert boundary.iloc[:20_000].drop(columns="seq").equals(main.drop(columns="seq"))
    assert dict(Counter(boundary["kind"])) == {k: n for k, n in BOUNDARY.kind_counts().items() if n}
    assert Counter(boundary["kind"].iloc[20_000:]) == Counter(clean=6_000, boundary=22, bad_timestamp=2)


def test_boundary_probes_sit_exactly_at_and_1_ms_either_side_of_each_boundary(boundary):
    """Recomputed from the values alone: each probe's lateness, the chain's gaps, the validity times."""
    d, gap = BOUNDARY.allowed_lateness_ms, BOUNDARY.session_gap_ms
    block = boundary.iloc[20_000:]
    lateness = independent_lateness(boundary)[20_000:]
    events = [json.loads(v) if k != "bad_timestamp" else None for v, k in zip(block["value"], block["kind"])]
    probes = [(e["user"], lat) for e, lat in zip(events, lateness) if e and e["user"].startswith("bp")]
    expected = sorted([d + 1, d, d - 1, d + gap + 1, d + gap, d + gap - 1] * 2)
    assert sorted(lat for _, lat in probes) == expected
    # Each set of probes comes after a lead-in of >= 3 batches' worth of records at the maximum they are judged by.
    for name, residue in (("A", 0), ("B", 9_999)):
        lead = block[block["key"].map(lambda k: k.startswith(b"bf")).to_numpy()
                     & (np.arange(len(block)) < np.flatnonzero(block["key"] == f"bp{name}0".encode())[0])]
        lead_times = set(lead["timestamp_ms"].iloc[-BOUNDARY.boundary_lead_in:])
        assert len(lead_times) == 1
        watermark = lead_times.pop() - d
        assert watermark % 10_000 == residue  # a window ends at the watermark (A) or 1 ms after it (B)
    chain = defaultdict(list)
    for e in events:
        if e and e["user"].startswith("bs"):
            chain[e["user"]].append(e["event_time"])
    assert sorted(b - a for a, b in chain.values()) == [gap - 1, gap, gap + 1]
    validity = block[block["key"].map(lambda k: k.startswith(b"bv")).to_numpy()]
    times = [e["event_time"] if e else json.loads(v)["event_time"] for e, v in
             zip([json.loads(v) for v in validity["value"]], validity["value"])]
    assert list(zip(times, validity["kind"])) == [
        (946_684_799_999, "bad_timestamp"), (946_684_800_000, "boundary"), (946_684_800_001, "boundary"),
        (4_102_444_800_000, "bad_timestamp"), (4_102_444_799_998, "boundary"), (4_102_444_799_999, "boundary"),
    ]
    assert [parse_event(v)[1] for v in validity["value"]] == ["bad_timestamp", None, None, "bad_timestamp", None, None]


def test_the_oracles_decide_the_probes_as_spark_does(boundary):
    from kit import workloads

    d = BOUNDARY.allowed_lateness_ms
    block = boundary.iloc[20_000:]
    seq_of = {json.loads(v)["user"]: s for v, s, k in zip(block["value"], block["seq"], block["kind"])
              if k == "boundary"}
    # dedup: a record is late iff event_time <= watermark: W - 1 and W dropped, W + 1 kept; both 2000-01-01 ones.
    dedup = workloads.get("dedup").oracle(boundary, BOUNDARY)
    dropped = set(dedup.late_dropped["seq"]) & set(block["seq"])
    assert dropped == {seq_of[u] for u in ("bpA0", "bpA1", "bpA3", "bpA4", "bpA5", "bpB0", "bpB1", "bpB3", "bpB4",
                                           "bpB5", "bv1", "bv2")}
    # sessions: late iff event_time + gap <= watermark; the chain cuts at gap + 1, not at gap.
    sessions = workloads.get("sessions").oracle(boundary, BOUNDARY)
    late = set(sessions.late_dropped["seq"]) & set(block["seq"])
    assert late == {seq_of[u] for u in ("bpA3", "bpA4", "bpB3", "bpB4", "bv1", "bv2")}
    counts = sessions.rows[sessions.rows["user"].str.startswith("bs")].groupby("user")["events"].apply(list)
    assert counts.to_dict() == {"bs0": [2], "bs1": [2], "bs2": [1, 1]}
    # windowed_counts: W_A - 1 is dropped from the windows ending at W_A (tumbling and sliding) and kept in the
    # sliding one ending 5 s later; W_B (1 ms before a window end) is kept everywhere.
    windowed = workloads.get("windowed_counts").oracle(boundary, BOUNDARY)
    late_windows = windowed.late_dropped.groupby("seq")["window"].apply(sorted).to_dict()
    assert len(late_windows[seq_of["bpA0"]]) == 2 and seq_of["bpA1"] not in late_windows
    assert seq_of["bpB1"] not in late_windows and seq_of["bpB0"] not in late_windows
    rows = windowed.rows[windowed.rows["key"] == "bkpA0"]
    assert rows["window_kind"].tolist() == ["sliding"] and rows["count"].tolist() == [1]
    assert sorted(windowed.rows.loc[windowed.rows["key"] == "bkpB1", "window_kind"]) == ["sliding", "sliding",
                                                                                          "tumbling"]
    # The 2099 records carry the final watermark past every window before them: no probe window is left open.
    assert d < 10_000 and windowed.rows["window_start"].max() < 4_102_444_790_000


def test_boundary_manifest(tmp_path, boundary):
    manifest = generate_to_file(BOUNDARY, tmp_path / "b.parquet")
    assert manifest["boundary"]["first_seq"] == 20_000
    assert manifest["boundary"]["records"] == BOUNDARY.boundary_records
    assert manifest["boundary"]["lead_in_records"] == [3_000, 3_000]
    assert [w % 10_000 for w in manifest["boundary"]["watermarks_ms"]] == [0, 9_999]
    assert read_dataset(tmp_path / "b.parquet").equals(boundary)


@pytest.mark.slow
@pytest.mark.parametrize("suffix", [".parquet", ".jsonl"])
def test_million_records_timing(tmp_path, suffix):
    """Prints generation and write time for 1M messy records; asserts only the counts, never the time."""
    spec = DatasetSpec.from_profile("messy", records=1_000_000)
    start = time.perf_counter()
    df = generate(spec)
    generated = time.perf_counter()
    manifest = write_dataset(df, tmp_path / f"events{suffix}", spec)
    written = time.perf_counter()
    print(
        f"\n1M messy records, {suffix}: generate {generated - start:.2f} s, "
        f"write {written - generated:.2f} s, total {written - start:.2f} s"
    )
    assert manifest["counts"] == spec.kind_counts()

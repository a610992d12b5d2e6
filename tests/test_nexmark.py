"""The Nexmark generator (kit.nexmark, ``dmk gen --nexmark``) against the reference generator's rules.

Pure Python apart from the one replay test: the expected figures are the reference's formulas (Beam's
GeneratorConfig, PersonGenerator, AuctionGenerator, BidGenerator), recomputed here from event ids, and the
generated values are parsed back and held to them.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from compare.cli import main
from kit.dataset import DatasetSpec, read_dataset, read_manifest
from kit.errors import ConfigError
from kit.events import REJECT_REASONS
from kit.kafka import Kafka
from kit.nexmark import (
    FIRST_AUCTION_ID,
    FIRST_PERSON_ID,
    HOT_BATCH,
    ID_LEAD,
    TOPICS,
    TYPES,
    NexmarkSpec,
    adjusted_event_numbers,
    event_timestamps,
    generate_nexmark,
    last_base0_auction_id,
    last_base0_person_id,
    nexmark_to_file,
    parse_nexmark,
)

# One generated stream shared by the field tests: 100k events at the defaults (about 1 s to generate).
_SPEC = NexmarkSpec(records=100_000, seed=5)


@pytest.fixture(scope="module")
def events() -> pd.DataFrame:
    """The records of ``_SPEC``, parsed: one row per event with its position, type and fields."""
    df = generate_nexmark(_SPEC)
    rows = [parse_nexmark(v) for v in df["value"]]
    assert all(reason is None for _, reason in rows)
    parsed = pd.DataFrame([event for event, _ in rows])
    parsed["position"] = np.arange(len(parsed))
    parsed["event_id"] = adjusted_event_numbers(_SPEC)
    parsed["timestamp_ms"] = df["timestamp_ms"].to_numpy()
    parsed["key"] = df["key"].to_numpy()
    return parsed


def _types_by_position(df: pd.DataFrame) -> np.ndarray:
    return np.array([TYPES.index(parse_nexmark(v)[0]["type"]) for v in df["value"]])  # type: ignore[index]


def _five_sigma(hit: np.ndarray, p: np.ndarray) -> tuple[int, float, float]:
    """Observed hits, expected hits and five standard deviations of a sum of independent Bernoulli(p)."""
    return int(hit.sum()), float(p.sum()), 5 * float(np.sqrt((p * (1 - p)).sum()))


# -- determinism -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".parquet", ".jsonl"])
def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path: Path, suffix: str) -> None:
    spec = NexmarkSpec.from_profile("messy", records=30_000, seed=9, first_event_rate=500, layout="three")
    first = nexmark_to_file(spec, tmp_path / f"a{suffix}")
    again = nexmark_to_file(spec, tmp_path / f"b{suffix}")
    other = nexmark_to_file(NexmarkSpec.from_profile("messy", records=30_000, seed=10, first_event_rate=500,
                                                     layout="three"), tmp_path / f"c{suffix}")
    assert first["sha256"] == again["sha256"] != other["sha256"]
    assert (tmp_path / f"a{suffix}").read_bytes() == (tmp_path / f"b{suffix}").read_bytes()
    assert (tmp_path / f"a{suffix}.manifest.json").read_text().replace("a" + suffix, "b" + suffix) == \
        (tmp_path / f"b{suffix}.manifest.json").read_text()


def test_a_file_reads_back_as_generated_and_its_manifest_says_what_it_holds(tmp_path: Path) -> None:
    spec = NexmarkSpec.from_profile("messy", records=20_000, seed=2, first_event_rate=400, layout="three")
    for suffix in (".parquet", ".jsonl"):
        manifest = nexmark_to_file(spec, tmp_path / f"n{suffix}")
        frame = read_dataset(tmp_path / f"n{suffix}")
        pd.testing.assert_frame_equal(frame, generate_nexmark(spec))
        assert list(frame.columns)[-1] == "topic"
        assert manifest["spec"] == {"generator": "nexmark", **json.loads(json.dumps(spec.manifest_spec()))}
        assert manifest["topics"] == {t: int((frame["topic"] == t).sum()) for t in TOPICS}
        assert sum(manifest["types"].values()) == spec.events == 20_000 - 200
        assert manifest["counts"]["too_late"] == 200 and manifest["counts"]["bad_json"] == 50


def test_the_kit_s_workloads_refuse_a_nexmark_manifest(tmp_path: Path) -> None:
    nexmark_to_file(NexmarkSpec(records=1_000), tmp_path / "n.parquet")
    with pytest.raises(ConfigError, match="written by the 'nexmark' generator") as err:
        DatasetSpec.from_dict(read_manifest(tmp_path / "n.parquet")["spec"])
    assert err.value.field == "generator"


# -- proportions, ids and ratios ---------------------------------------------------------------------------


def test_proportions_follow_the_epoch_rule_exactly_on_100k_events() -> None:
    df = generate_nexmark(_SPEC)
    types = _types_by_position(df)
    assert np.bincount(types).tolist() == [2_000, 6_000, 92_000]
    # Every epoch of 50 event numbers is one person, three auctions, then 46 bids, in that order.
    epoch = np.array([0, 1, 1, 1] + [2] * 46)
    assert np.array_equal(types, np.tile(epoch, 2_000))


@pytest.mark.slow  # 1M events: about 5 s to generate and 10 s to check on a loaded 2-core machine
def test_proportions_follow_the_epoch_rule_exactly_on_1m_events() -> None:
    spec = NexmarkSpec(records=1_000_000, seed=1)
    started = time.monotonic()
    df = generate_nexmark(spec)
    print(f"generated 1M Nexmark events in {time.monotonic() - started:.1f} s")
    types = np.array([TYPES.index(v[9:v.index(b'"', 9)].decode()) for v in df["value"]])
    assert np.bincount(types).tolist() == [20_000, 60_000, 920_000]
    assert np.array_equal(types, np.tile(np.array([0, 1, 1, 1] + [2] * 46), 20_000))


def test_persons_and_auctions_take_consecutive_ids_from_1000(events: pd.DataFrame) -> None:
    persons = events[events["type"] == "person"]
    auctions = events[events["type"] == "auction"]
    assert persons["id"].tolist() == list(range(FIRST_PERSON_ID, FIRST_PERSON_ID + 2_000))
    assert auctions["id"].tolist() == list(range(FIRST_AUCTION_ID, FIRST_AUCTION_ID + 6_000))
    assert np.array_equal(persons["id"] - FIRST_PERSON_ID, last_base0_person_id(persons["event_id"]))
    assert np.array_equal(auctions["id"] - FIRST_AUCTION_ID, last_base0_auction_id(auctions["event_id"]))
    assert events["key"].tolist() == [str(k).encode() for k in events["id"].fillna(events["auction"]).astype(int)]


def test_auction_fields_lie_in_the_reference_s_ranges(events: pd.DataFrame) -> None:
    auctions = events[events["type"] == "auction"]
    assert set(auctions["category"]) == {10, 11, 12, 13, 14}
    # nextPrice: round(10^(6u) * 100), so 100 .. 10^8; the reserve is the initial bid plus another price.
    assert auctions["initialBid"].between(100, 10**8).all()
    assert (auctions["reserve"] - auctions["initialBid"]).between(100, 10**8).all()
    # Expiry: 1 .. 2 * horizon ms after the auction, horizon = the time of the event 1666 numbers later
    # (numInFlightAuctions 100 * 50 / 3): 166 ms at 10,000 events/s.
    horizon = event_timestamps(_SPEC, auctions["event_id"] + 1666) - auctions["dateTime"]
    length = auctions["expires"] - auctions["dateTime"]
    assert (horizon == 166).all() and length.between(1, 332).all() and length.max() > 300
    assert auctions["itemName"].str.len().max() <= 19 and auctions["description"].str.len().max() <= 99
    sizes = auctions["extra"].str.len() + auctions["itemName"].str.len() + auctions["description"].str.len() + 48
    assert abs(sizes.mean() - 500) < 5  # avgAuctionByteSize


def test_person_fields_use_the_reference_s_vocabularies(events: pd.DataFrame) -> None:
    persons = events[events["type"] == "person"]
    assert set(persons["state"]) == {"AZ", "CA", "ID", "OR", "WA", "WY"}
    assert len(set(persons["city"])) == 10
    assert persons["creditCard"].str.fullmatch(r"\d{4} \d{4} \d{4} \d{4}").all()
    assert persons["emailAddress"].str.fullmatch(r"[a-z ]*@[a-z ]*\.com").all()


def test_sellers_bidders_and_auctions_come_from_the_reference_s_id_windows(events: pd.DataFrame) -> None:
    auctions = events[events["type"] == "auction"]
    bids = events[events["type"] == "bid"]
    for ids, refs, hot_offset in ((auctions["event_id"], auctions["seller"], 0), (bids["event_id"], bids["bidder"], 1)):
        last = last_base0_person_id(ids)
        active = np.minimum(last + 1, 1000)
        base0 = refs.to_numpy() - FIRST_PERSON_ID
        hot = (last // HOT_BATCH) * HOT_BATCH + hot_offset
        assert ((base0 == hot) | ((base0 >= last + 1 - active) & (base0 < last + 1 + ID_LEAD))).all()
    last = last_base0_auction_id(bids["event_id"])
    base0 = bids["auction"].to_numpy() - FIRST_AUCTION_ID
    hot = (last // HOT_BATCH) * HOT_BATCH
    assert ((base0 == hot) | ((base0 >= np.maximum(last - 100, 0)) & (base0 <= last + ID_LEAD))).all()


def test_hot_shares_match_the_reference_s_formula(events: pd.DataFrame) -> None:
    """P(hot) = (1 - 1/ratio) + (1/ratio) / (size of the random draw's window): the hot id is in that window too."""
    bids = events[events["type"] == "bid"]
    auctions = events[events["type"] == "auction"]
    last_a = last_base0_auction_id(bids["event_id"])
    window = last_a - np.maximum(last_a - 100, 0) + 1 + ID_LEAD
    hit = bids["auction"].to_numpy() - FIRST_AUCTION_ID == (last_a // HOT_BATCH) * HOT_BATCH
    observed, expected, tolerance = _five_sigma(hit, 1 / 2 + (1 / 2) / window)
    assert abs(observed - expected) < tolerance, (observed, expected, tolerance)
    assert abs(observed / len(bids) - 0.5045) < 0.01

    for frame, column, offset in ((bids, "bidder", 1), (auctions, "seller", 0)):
        last_p = last_base0_person_id(frame["event_id"])
        window = np.minimum(last_p + 1, 1000) + ID_LEAD
        hit = frame[column].to_numpy() - FIRST_PERSON_ID == (last_p // HOT_BATCH) * HOT_BATCH + offset
        observed, expected, tolerance = _five_sigma(hit, 3 / 4 + (1 / 4) / window)
        assert abs(observed - expected) < tolerance, (column, observed, expected, tolerance)


def test_references_run_at_most_the_lead_ahead_of_the_ids_generated_so_far(events: pd.DataFrame) -> None:
    """A random seller, bidder or auction may be up to 10 ids beyond the last one generated, as in the reference.

    The reference calls it the "lead": newPerson/newAuction events then look swapped in time.
    """
    persons_so_far = np.maximum.accumulate(events["id"].where(events["type"] == "person", -1).fillna(-1).to_numpy())
    auctions_so_far = np.maximum.accumulate(events["id"].where(events["type"] == "auction", -1).fillna(-1).to_numpy())
    bids = (events["type"] == "bid").to_numpy()
    ahead_auction = events["auction"].to_numpy()[bids] - auctions_so_far[bids]
    assert ahead_auction.max() <= ID_LEAD
    # Only the random half of the bids can run ahead, by 1..10 of a 111-id window: about 4.5 % of bids.
    assert 0.03 < (ahead_auction > 0).mean() < 0.06
    ahead_bidder = events["bidder"].to_numpy()[bids] - persons_so_far[bids]
    assert ahead_bidder.max() <= ID_LEAD
    sellers = (events["type"] == "auction").to_numpy()
    assert (events["seller"].to_numpy()[sellers] - persons_so_far[sellers]).max() <= ID_LEAD


# -- event time and out-of-order groups -----------------------------------------------------------------------


def test_event_times_follow_the_rate_in_order(events: pd.DataFrame) -> None:
    times = events["dateTime"].to_numpy()
    assert np.array_equal(times, 1_436_918_400_000 + (np.arange(len(times)) * 100) // 1000)  # 100 us apart
    assert np.array_equal(times, events["timestamp_ms"].to_numpy())
    assert (np.diff(times) >= 0).all()


def test_a_square_rate_alternates_its_two_delays() -> None:
    spec = NexmarkSpec(records=10, first_event_rate=1000, next_event_rate=100, rate_shape="square", rate_period_s=4)
    assert spec.inter_event_delays_us == (1000, 10_000) and spec.step_length_s == 2
    # 2000 events 1 ms apart, then 200 events 10 ms apart, then again: an epoch of 2200 events and 4 s.
    numbers = np.array([0, 1999, 2000, 2001, 2199, 2200, 2201])
    assert (event_timestamps(spec, numbers) - spec.start_ms).tolist() == [0, 1999, 2000, 2010, 3990, 4000, 4001]


def test_a_sine_rate_takes_ten_steps_between_the_two_rates() -> None:
    spec = NexmarkSpec(records=10, first_event_rate=10_000, next_event_rate=5_000, rate_period_s=600)
    # RateShape.SINE: rate_i = round(7500 + 2500 cos(2 pi i / 10)), delay = (1e6 + rate // 2) // rate; e.g. i = 3:
    # round(7500 - 772.5) = 6728 (Math.round: half up), (1,000,000 + 3364) // 6728 = 149.
    assert spec.inter_event_delays_us == (100, 105, 121, 149, 183, 200, 183, 149, 121, 105)
    assert spec.step_length_s == 60
    per_step = [60_000_000 // d for d in spec.inter_event_delays_us]
    assert (event_timestamps(spec, np.array([per_step[0], sum(per_step)])) - spec.start_ms).tolist() == [
        60_000, sum(n * d // 1000 for n, d in zip(per_step, spec.inter_event_delays_us, strict=True))]


def test_out_of_order_groups_shuffle_within_each_group_as_the_reference_does() -> None:
    spec = NexmarkSpec(records=10_000, seed=3, out_of_order_group_size=100)
    df = generate_nexmark(spec)
    ids = adjusted_event_numbers(spec)
    assert np.array_equal(ids, (np.arange(10_000) // 100) * 100 + (np.arange(10_000) * 953) % 100)
    assert np.array_equal(np.sort(ids.reshape(100, 100), axis=1), np.arange(10_000).reshape(100, 100))
    times = df["timestamp_ms"].to_numpy()
    assert np.array_equal(times, event_timestamps(spec, ids))
    assert (np.diff(times) < 0).any()  # out of order within groups...
    assert (np.diff(times.reshape(100, 100).max(axis=1)) > 0).all()  # ...never across them
    # Types travel with their event ids: the epoch rule holds per id, so the counts are exact.
    assert np.bincount(_types_by_position(df)).tolist() == [200, 600, 9_200]
    lateness = np.maximum.accumulate(times) - times
    labels = df["kind"].to_numpy(dtype=object)
    assert set(labels[lateness > 0]) == {"late"} and set(labels[lateness == 0]) == {"clean"}


# -- the messy profile ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", ["one", "three"])
def test_messy_records_are_labelled_as_the_kit_labels_them(layout: str) -> None:
    spec = NexmarkSpec.from_profile("messy", records=40_000, seed=4, first_event_rate=500, layout=layout)
    df = generate_nexmark(spec)
    kinds = df["kind"].to_numpy(dtype=object)
    counts = pd.Series(kinds).value_counts().to_dict()
    assert counts == {"clean": 37_200, "late": 2_000, "too_late": 400, **{r: 100 for r in REJECT_REASONS}}
    for value, kind, topic in zip(df["value"], kinds, df["topic"] if layout == "three" else [None] * len(df),
                                  strict=True):
        event_type = TYPES[TOPICS.index(topic)] if topic is not None else None
        reason = parse_nexmark(value, event_type)[1]
        assert reason == (kind if kind in REJECT_REASONS else None), (kind, value)
    valid = ~np.isin(kinds, REJECT_REASONS)
    times = df["timestamp_ms"].to_numpy()
    before = np.concatenate([[times[0]], np.maximum.accumulate(np.where(valid, times, 0))[:-1]])
    lateness = (before - times)[valid]
    assert set(kinds[valid][lateness <= 0]) == {"clean"}
    assert set(kinds[valid][(lateness > 0) & (lateness <= spec.late_max_ms)]) == {"late"}
    assert set(kinds[valid][lateness >= spec.too_late_min_ms]) == {"too_late"}
    assert not ((lateness > spec.late_max_ms) & (lateness < spec.too_late_min_ms)).any()


def test_parse_nexmark_rejects_in_the_kit_s_order() -> None:
    bid = b'{"type":"bid","auction":1000,"bidder":1001,"price":100,"dateTime":1436918400000,"extra":""}'
    assert parse_nexmark(bid)[1] is None
    assert parse_nexmark(bid.replace(b'"type":"bid",', b""), "bid")[0] == {
        "auction": 1000, "bidder": 1001, "price": 100, "dateTime": 1436918400000, "extra": ""}
    assert parse_nexmark(b"\xff" + bid)[1] == "bad_utf8"
    assert parse_nexmark(bid[:-1])[1] == "bad_json"
    assert parse_nexmark(b"[1]")[1] == "bad_json"
    assert parse_nexmark(bid.replace(b'"bid"', b'"ask"'))[1] == "missing_field"
    assert parse_nexmark(bid.replace(b'"bid"', b'["bid"]'))[1] == "missing_field"  # an unhashable type
    assert parse_nexmark(bid.replace(b"1436918400000", b"true"))[1] == "missing_field"
    assert parse_nexmark(bid, "person")[1] == "missing_field"
    assert parse_nexmark(bid.replace(b"1436918400000", b"4102444800000"))[1] == "bad_timestamp"


# -- settings and the CLI -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"out_of_order_group_size": 0}, "out_of_order_group_size"),
        ({"out_of_order_group_size": 953 * 2}, "out_of_order_group_size"),
        ({"out_of_order_group_size": 40_000}, "out_of_order_group_size"),  # 4 s of events: neither late nor too late
        ({"layout": "two"}, "layout"),
        ({"first_event_rate": 0}, "first_event_rate"),
        ({"hot_auction_ratio": 0}, "hot_auction_ratio"),
        ({"late_fraction": 1.5}, "late_fraction"),
        ({"late_fraction": 0.3, "too_late_fraction": 0.2}, "malformed_fraction"),  # the sum, named as the kit does
    ],
)
def test_invalid_settings_name_their_field(overrides: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError) as err:
        NexmarkSpec(**overrides)  # type: ignore[arg-type]
    assert err.value.field == field


def test_a_stream_too_short_for_its_too_late_records_says_so() -> None:
    with pytest.raises(ConfigError, match="spans about 9.9 s of event time") as err:
        generate_nexmark(NexmarkSpec.from_profile("messy", records=100_000))
    assert err.value.field == "too_late_fraction"


def test_dmk_gen_nexmark_writes_the_dataset_and_prints_its_counts(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "nexmark.parquet"
    code = main(["gen", "--nexmark", "--records", "20000", "--seed", "3", "--profile", "messy", "--out", str(out),
                 "--first-event-rate", "400", "--nexmark-layout", "three", "--out-of-order-group-size", "7"])
    assert code == 0
    manifest = read_manifest(out)
    spec = NexmarkSpec.from_profile("messy", records=20_000, seed=3, first_event_rate=400, layout="three",
                                    out_of_order_group_size=7)
    assert manifest["spec"] == spec.manifest_spec()
    printed = capsys.readouterr().out
    assert manifest["sha256"] in printed
    for name in ("person", "auction", "bid"):
        assert f"{manifest['types'][name]:,}" in printed
    assert f"{manifest['counts']['too_late']:,}" in printed


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--nexmark", "--users", "5"], "--users: not options of dmk gen --nexmark"),
        (["--first-event-rate", "5"], "--first-event-rate: Nexmark options; add --nexmark"),
        (["--nexmark", "--nexmark-layout", "two"], "invalid choice: 'two'"),
        (["--nexmark", "--out-of-order-group-size", "0"], "out_of_order_group_size: expected an int >= 1, got 0"),
        (["--nexmark", "--profile", "messy"], "too_late_fraction: expected a stream long enough"),
    ],
)
def test_dmk_gen_nexmark_errors_are_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                    args: list[str], says: str) -> None:
    try:
        code = main(["gen", "--records", "1000", "--out", str(tmp_path / "x.parquet"), *args])
    except SystemExit as exited:  # argparse's own errors (an invalid choice) exit rather than return
        code = exited.code  # type: ignore[assignment]
    err = capsys.readouterr().err
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "x.parquet").exists()


def test_dmk_replay_sends_a_three_topic_dataset_to_three_topics(bootstrap_servers: str, tmp_path: Path) -> None:
    data = tmp_path / "nexmark.jsonl"
    manifest = nexmark_to_file(NexmarkSpec(records=2_000, seed=1, layout="three", partitions=2), data)
    prefix = f"nexmark_{time.monotonic_ns()}"
    assert main(["replay", str(data), "--topic", prefix, "--bootstrap-servers", bootstrap_servers]) == 0
    with Kafka(bootstrap_servers) as kafka:
        got = {t: sum(kafka.end_offsets(f"{prefix}-{t}").values()) for t in TOPICS}
    assert got == manifest["topics"] == {"persons": 40, "auctions": 120, "bids": 1_840}

"""The options registry (lakesdk.config.options): every TableOptions field has an Option with
its Hudi key; bad values are an OptionsError naming the key and what is allowed; Hudi's keys
read in and out."""

from __future__ import annotations

import dataclasses

import pytest

import lakesdk as lk
from lakesdk.config.options import OPTIONS, TableOptions, option


def test_every_field_is_registered_with_its_default():
    names = [f.name for f in dataclasses.fields(TableOptions)]
    assert names == [o.name for o in OPTIONS]
    defaults = TableOptions()
    for o in OPTIONS:
        assert getattr(defaults, o.name) == o.default, o.name
    assert lk.TableOptions is TableOptions


@pytest.mark.parametrize("kw,words", [
    ({"markers": "foo"}, ["hoodie.write.markers.type", "'timeline_server', 'direct'", "'foo'"]),
    ({"engine": "gpu"}, ["engine", "'auto', 'spark', 'local'", "'gpu'"]),
    ({"target_file_size": -5}, ["hoodie.parquet.max.file.size", ">= 1", "-5"]),
    ({"lock": "redis"}, ["hoodie.write.lock.provider", "'in_process', 'storage', 'zookeeper'", "'redis'"]),
    ({"heartbeat_interval_s": "60"}, ["hoodie.client.heartbeat.interval_in_ms", "a number"]),
    ({"compact_every": 0}, ["hoodie.compact.inline.max.delta.commits", ">= 1"]),
    ({"clean_after_write": "yes"}, ["hoodie.clean.automatic", "True or False"]),
    ({"failed_writes": "EAGER"}, ["hoodie.cleaner.policy.failed.writes", "'eager', 'lazy'"]),
])
def test_invalid_values_are_options_errors_naming_the_key_and_the_allowed_values(kw, words):
    with pytest.raises(lk.OptionsError) as e:
        TableOptions(**kw)
    for w in words:
        assert w in str(e.value)
    assert e.value.key


def test_handles_and_lakes_check_their_options(tmp_path):
    with pytest.raises(lk.OptionsError, match="hoodie.write.lock.provider"):
        lk.Lake(str(tmp_path), lock="redis")
    with pytest.raises(lk.OptionsError, match="hoodie.write.concurrency.mode"):
        lk.Lake(str(tmp_path), concurrency="pessimistic")
    with pytest.raises(lk.OptionsError, match="concurrency='optimistic'"):
        lk.Lake(str(tmp_path), options=lk.TableOptions(early_conflict_detection=True))
    with pytest.raises(lk.OptionsError, match="must be a lakesdk.TableOptions"):
        lk.Lake(str(tmp_path), options={"markers": "direct"})


def test_from_hoodie_reads_hudi_keys():
    opts = TableOptions.from_hoodie({
        "hoodie.write.concurrency.mode": "optimistic_concurrency_control",
        "hoodie.write.lock.provider": "org.apache.hudi.client.transaction.lock.FileSystemBasedLockProvider",
        "hoodie.write.lock.wait_time_ms": "2500",
        "hoodie.compact.inline": "true",
        "hoodie.client.heartbeat.interval_in_ms": 5000,
        "hoodie.parquet.max.file.size": "1048576",
        "hoodie.write.markers.type": "DIRECT",
        "hoodie.clustering.plan.strategy.sort.columns": "city, ts",
        "hoodie.clean.automatic": "false",
    }, engine="local")
    assert (opts.concurrency, opts.lock, opts.compact_every, opts.heartbeat_interval_s) == ("optimistic", "storage", 5, 5.0)
    assert (opts.target_file_size, opts.markers, opts.cluster_sort_by) == (1048576, "direct", ("city", "ts"))
    assert opts.lock_options == (("hoodie.write.lock.wait_time_ms", "2500"),) and opts.engine == "local"
    assert TableOptions.from_hoodie({"hoodie.compact.inline": "false",
                                     "hoodie.compact.inline.max.delta.commits": "3"}).compact_every is None
    assert TableOptions.from_hoodie({"hoodie.compact.inline.max.delta.commits": "3"}).compact_every == 3


@pytest.mark.parametrize("props,words", [
    ({"hoodie.parquet.max.file.sise": "1"}, ["Did you mean 'hoodie.parquet.max.file.size'"]),
    ({"hoodie.write.markers.type": "EVERYWHERE"}, ["'TIMELINE_SERVER_BASED', 'DIRECT'", "'EVERYWHERE'"]),
    ({"hoodie.parquet.max.file.size": "big"}, ["hoodie.parquet.max.file.size", "a number"]),
    ({"hoodie.datasource.write.recordkey.field": "id"}, ["defines the table", "create_table"]),
    ({"hoodie.compact.inline": "maybe"}, ["true or false"]),
])
def test_from_hoodie_refuses_unknown_keys_and_bad_values(props, words):
    with pytest.raises(lk.OptionsError) as e:
        TableOptions.from_hoodie(props)
    for w in words:
        assert w in str(e.value)


def test_to_hoodie_round_trips():
    opts = TableOptions(markers="direct", concurrency="optimistic", lock="zookeeper", compact_every=3,
                        heartbeat_interval_s=1.5, cluster_sort_by=("a", "b"), clean_after_write=True)
    wire = opts.to_hoodie()
    assert wire["hoodie.client.heartbeat.interval_in_ms"] == "1500"
    assert wire["hoodie.write.concurrency.mode"] == "OPTIMISTIC_CONCURRENCY_CONTROL"
    assert wire["hoodie.compact.inline"] == "true" and wire["hoodie.clustering.inline"] == "false"
    back = TableOptions.from_hoodie(wire, engine=opts.engine, progress=opts.progress)
    assert back == opts
    assert option("hoodie.write.markers.type") is option("markers")
    with pytest.raises(lk.OptionsError, match="unknown option"):
        option("marker")

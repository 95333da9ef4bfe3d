"""A sink worker: one consumer-group member with its participants (and the coordinator when
it owns partition 0), driven by one thread.

Per loop turn: read the control topic (every worker reads every control event: the control
consumer is assigned the one partition directly, from its end, like Hudi's
``auto.offset.reset=latest`` agent), read a batch of data records into the participants,
let each participant process its events and records, write the records of the participants
whose round ended (one ``write_batch`` call for all of them), tick the coordinator.
Rebalance callbacks run inside the data consumer's poll on the same thread, so nothing is
shared between threads except the status snapshot.

One write a round per worker, not one per partition: the round's fixed costs (tagging,
markers, one log file per table partition and file group) are paid once, and a round of P
Kafka partitions into T table partitions makes T new files, not P * T.  Every participant
still sends its own WRITE_STATUS with its own offset; the write's stats go with the first.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from lakesdk.exceptions import MissingDependencyError, TableConfigError
from lakesdk.streaming.kafka.config import SinkConfig, make_decoder
from lakesdk.streaming.kafka.coordinator import TransactionCoordinator
from lakesdk.streaming.kafka.decoding import RoundRows, make_batch_decoder
from lakesdk.streaming.kafka.events import KAFKA_OFFSET_KEY, KAFKA_TOPIC_KEY, ControlEvent, EntityType, parse_offsets
from lakesdk.streaming.kafka.participant import TransactionParticipant

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from types import ModuleType

    from lakesdk.table.table import Table

__all__ = ["SinkWorker", "latest_commit_offsets", "sink_commit_history", "open_sink_table", "require_kafka"]


def require_kafka() -> ModuleType:
    try:
        import confluent_kafka
    except ImportError:
        raise MissingDependencyError("confluent-kafka", "kafka", "The Kafka sink") from None
    return confluent_kafka


def open_sink_table(cfg: SinkConfig) -> Table:
    """Open the target table for the sink's writes (local Arrow engine, direct markers, the
    sink's concurrency settings); refuses copy-on-write tables and tables lakesdk does not write."""
    import lakesdk as lk
    from lakesdk.table.table import TableOptions
    t = lk.open_table(cfg.table_url, storage_options=dict(cfg.storage_options) or None,
                      options=TableOptions(engine="local", markers="direct"), concurrency=cfg.concurrency,
                      lock=cfg.lock, lock_options=dict(cfg.lock_options) or None)
    if not t.config.is_mor:
        raise TableConfigError(
            f"the Kafka sink writes into merge-on-read tables, and {t.name!r} at {cfg.table_url!r} is "
            "copy-on-write: its participants would rewrite the same file groups in one instant.  Create the "
            "table with Lake(...).create_table(..., table_type=\"mor\")", key="hoodie.table.type")
    # what lakesdk does not write (Lance base files, no meta fields, version 6 logs, partition paths
    # formatted from a time): refused before a worker starts, not at its first round
    from lakesdk.table.write_input import check_partition_paths
    t.context.check_writable("Kafka sink round")
    check_partition_paths(t.config, "Kafka sink round", None)
    return t


def _warm_up_arrow() -> None:
    """pyarrow imports pandas the first time it converts Python objects (0.5 s, seconds where
    Python compiles its modules afresh): import it while the first round reads records, not
    after its END_COMMIT, where the coordinator waits for the write."""
    try:
        import pyarrow as pa
        pa.array([{"warm": 1}])
        import lakesdk.markers  # noqa: F401 - and the modules of the first begin, write and commit
        import lakesdk.services.rollback  # noqa: F401
        import lakesdk.services.transaction  # noqa: F401
        import lakesdk.table.write  # noqa: F401
    except Exception:  # noqa: BLE001 - the first round imports them then
        pass


_offsets_cache: dict[tuple[str, str], tuple[dict[int, int] | None, str | None]] = {}


def latest_commit_offsets(table: Any, topic: str | None = None) -> tuple[dict[int, int], str | None]:
    """``kafka.commit.offsets`` of the latest completed delta commit that has them (for
    ``topic`` when the commit names its topic), and that instant; ({}, None) when none.

    Hudi reads only the very latest commit; lakesdk skips commits of other writers (no
    offsets) so a compaction or a batch upsert in between does not reset the sink to 0."""
    store = table.context.store
    for inst in reversed(store.load().commits.by_completion()):
        if inst.action not in ("deltacommit", "commit"):
            continue
        key = (table.path, inst.requested)
        hit = _offsets_cache.get(key)
        if hit is None:
            extra = store.commit_metadata(inst).extra_metadata or {}
            raw = extra.get(KAFKA_OFFSET_KEY)
            hit = (parse_offsets(raw) if raw else None, extra.get(KAFKA_TOPIC_KEY))
            if len(_offsets_cache) > 10000:
                _offsets_cache.clear()
            _offsets_cache[key] = hit
        offs, t = hit
        if offs is not None and (topic is None or t is None or t == topic):
            return dict(offs), inst.requested
    return {}, None


def sink_commit_history(table: Any, topic: str | None = None, limit: int = 20) -> list[tuple[str, dict[int, int], int]]:
    """The latest ``limit`` completed commits that carry Kafka offsets (for ``topic``), oldest
    first: (instant, offsets, records written per the commit statistics)."""
    store = table.context.store
    out: list[tuple[str, dict[int, int], int]] = []
    for inst in reversed(store.load().commits.by_completion()):
        if len(out) >= limit:
            break
        if inst.action not in ("deltacommit", "commit"):
            continue
        md = store.commit_metadata(inst)
        extra = md.extra_metadata or {}
        raw = extra.get(KAFKA_OFFSET_KEY)
        t = extra.get(KAFKA_TOPIC_KEY)
        if not raw or (topic is not None and t is not None and t != topic):
            continue
        out.append((inst.requested, parse_offsets(raw), int(md.totals()["written"])))
    return out[::-1]


_TURN_RECORDS = 10_000   # records a loop turn takes from the consumer at most
_CONSUME_BATCH = 1_000   # ... in calls of this many


class _PartitionContext:
    def __init__(self, worker: "SinkWorker", partition: int) -> None:
        self.w = worker
        self.p = partition

    def _tp(self, offset: int | None = None) -> Any:
        from confluent_kafka import TopicPartition
        return TopicPartition(self.w.cfg.topic, self.p) if offset is None else \
            TopicPartition(self.w.cfg.topic, self.p, offset)

    def pause(self) -> None:
        self.w.consumer.pause([self._tp()])

    def resume(self) -> None:
        self.w.consumer.resume([self._tp()])

    def seek(self, offset: int) -> bool:
        try:
            self.w.consumer.seek(self._tp(offset))
            return True
        except Exception as e:  # noqa: BLE001 - e.g. the fetcher is not started yet: retried
            log.debug("seek of partition %s to %s failed: %s", self.p, offset, e)
            return False

    def commit_offset(self, offset: int) -> None:
        self.w.consumer.commit(offsets=[self._tp(offset)], asynchronous=False)


class _Services:
    """The coordinator's table and broker services."""

    def __init__(self, worker: "SinkWorker") -> None:
        self.w = worker

    def latest_offsets(self) -> dict[int, int]:
        return latest_commit_offsets(self.w.table, self.w.cfg.topic)[0]

    def history(self, limit: int) -> list[tuple[str, dict[int, int], int]]:
        return sink_commit_history(self.w.table, self.w.cfg.topic, limit)

    def num_partitions(self) -> int:
        md = self.w.consumer.list_topics(self.w.cfg.topic, timeout=10)
        return len(md.topics[self.w.cfg.topic].partitions)

    def end_offsets(self, num_partitions: int) -> dict[int, int] | None:
        from confluent_kafka import TopicPartition
        out = {}
        try:
            for p in range(num_partitions):
                _lo, hi = self.w.consumer.get_watermark_offsets(TopicPartition(self.w.cfg.topic, p), timeout=5)
                out[p] = hi
        except Exception:  # noqa: BLE001 - unknown: run the round
            return None
        self.w.end_offsets.update(out)
        return out

    def begin(self) -> dict[str, Any]:
        import json

        from lakesdk.table.transaction import begin
        return json.loads(begin(self.w.table).to_json())

    def commit(self, txn: dict[str, Any], stats: list[dict[str, Any]], schema: str | None,
               extra_metadata: dict[str, str]) -> str:
        from lakesdk.table.transaction import OpenInstant, commit
        res = commit(self.w.table, OpenInstant(**txn), stats, schema=schema, extra_metadata=extra_metadata)
        return res.instant

    def abort(self, txn: dict[str, Any]) -> None:
        from lakesdk.table.transaction import OpenInstant, abort
        abort(self.w.table, OpenInstant(**txn))


class SinkWorker:
    """One member of the sink's consumer group (see the module doc).  :meth:`run` blocks
    until ``stop`` is set."""

    def __init__(self, cfg: SinkConfig, *, name: str | None = None) -> None:
        self.cfg = cfg
        self.name = name or f"{os.uname().nodename}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.participants: dict[int, TransactionParticipant] = {}
        self.coordinator: TransactionCoordinator | None = None
        self.end_offsets: dict[int, int] = {}
        self.table: Any = None
        self.consumer: Any = None
        self.control: Any = None
        self.producer: Any = None
        self.error: BaseException | None = None
        self._snapshot: dict[str, Any] = {"worker": self.name, "running": False}
        self._decode = make_decoder(cfg)
        self._decode_batch = make_batch_decoder(cfg)
        self._avro_arrow: Any = None
        self._decode_pool: ThreadPoolExecutor | None = None
        self._last_wm = 0.0
        self.ready = threading.Event()

    # -- wiring -----------------------------------------------------------------------------------
    def _publish(self, ev: ControlEvent) -> None:
        self.producer.produce(self.cfg.control_topic, key=self.cfg.topic.encode(), value=ev.encode())
        self.producer.flush(10)
        if ev.receiver is EntityType.COORDINATOR and self.coordinator is not None:
            # this worker's own coordinator takes its participants' statuses at once (its next tick, in
            # this loop turn) instead of after a round trip through the control topic; the copy that
            # arrives from there later counts as the same report (K16) or as stale (K15)
            self.coordinator.on_event(ev)

    def _write(self, txn: dict[str, Any], rows: RoundRows | list[dict[str, Any]]) -> tuple[list[dict[str, Any]], str | None]:
        from lakesdk.table.transaction import OpenInstant, write_batch
        if self.cfg.format == "avro" and self._avro_arrow is None:
            import json

            from lakesdk.format.schema import avro_to_arrow
            raw = self.cfg.avro_schema
            if isinstance(raw, str):
                raw = json.loads(raw) if raw.strip().startswith("{") else json.loads(open(raw).read())
            self._avro_arrow = avro_to_arrow(raw)  # type: ignore[arg-type]
        data = (rows if isinstance(rows, RoundRows) else RoundRows([rows])).to_arrow(self._avro_arrow)
        # a field no record of the round has is null there, as a record converted to the table's
        # schema reads it in Hudi's sink (refusing it would fail the round on every retry)
        return write_batch(self.table, OpenInstant(**txn), data, missing_columns="null")

    def _write_pending(self) -> None:
        """Write the records of every participant whose round ended in this loop turn, one
        ``write_batch`` call per instant, and let each publish its WRITE_STATUS (the stats with the
        first, or the error with all).  Then each handles the events queued behind its END_COMMIT."""
        pending = [p for p in self.participants.values() if p.pending is not None and not p.stopped]
        if not pending:
            return
        by_instant: dict[str, list[TransactionParticipant]] = {}
        for part in sorted(pending, key=lambda p: p.partition):
            assert part.pending is not None
            by_instant.setdefault(part.pending.commit_time, []).append(part)
        # a participant that caught up with its target waits for the others of its instant that still
        # read: one write per instant and worker, as when END_COMMIT ends them all in one turn
        reading = {p.txn.commit_time for p in self.participants.values()
                   if p.txn is not None and not p.txn.initiated and not p.stopped}
        by_instant = {ct: parts for ct, parts in by_instant.items() if ct not in reading}
        if not by_instant:
            return
        for commit_time, parts in by_instant.items():
            rows = RoundRows.concat([p.pending.rows for p in parts if p.pending])
            stats: list[dict[str, Any]] = []
            schema: str | None = None
            error: str | None = None
            if rows:
                first = parts[0].pending
                try:
                    stats, schema = self._write((first.txn if first else None) or {"instant": commit_time}, rows)
                except Exception as e:  # noqa: BLE001 - reported: the coordinator aborts the round
                    log.exception("partitions %s could not write their records for %s",
                                  [p.partition for p in parts], commit_time)
                    error = f"{type(e).__name__}: {e}"
            for i, part in enumerate(parts):
                part.complete_write(stats if i == 0 else [], schema, error)
        for part in (p for parts in by_instant.values() for p in parts):
            part.process()

    def _setup(self) -> None:
        ck = require_kafka()
        from confluent_kafka import Consumer, Producer, TopicPartition
        cfg = self.cfg
        self.table = open_sink_table(cfg)
        # one thread decodes the records the participants took while this one reads on (in order)
        self._decode_pool = ThreadPoolExecutor(1, thread_name_prefix=f"{self.name}-decode")
        threading.Thread(target=_warm_up_arrow, name=f"{self.name}-warm-up", daemon=True).start()
        if cfg.create_control_topic:
            self._ensure_control_topic(ck)
        self.producer = Producer({"bootstrap.servers": cfg.bootstrap, "acks": "all", "linger.ms": 0})
        self.control = Consumer({"bootstrap.servers": cfg.bootstrap, "group.id": f"lakesdk-control-{uuid.uuid4().hex}",
                                 "enable.auto.commit": False, "auto.offset.reset": "latest"})
        _lo, hi = self.control.get_watermark_offsets(TopicPartition(cfg.control_topic, 0), timeout=10)
        self.control.assign([TopicPartition(cfg.control_topic, 0, hi)])
        conf = {"bootstrap.servers": cfg.bootstrap, "group.id": cfg.group_id, "enable.auto.commit": False,
                "auto.offset.reset": "earliest", "session.timeout.ms": cfg.session_timeout_ms,
                "heartbeat.interval.ms": max(300, cfg.session_timeout_ms // 5),
                "partition.assignment.strategy": "range", "max.poll.interval.ms": cfg.max_poll_interval_ms,
                "enable.partition.eof": False, "client.id": self.name}
        if cfg.instance_id:
            conf["group.instance.id"] = cfg.instance_id   # static membership: a restart takes over at once
        conf.update(dict(cfg.consumer_config))
        self.consumer = Consumer(conf)
        self.consumer.subscribe([cfg.topic], on_assign=self._on_assign, on_revoke=self._on_revoke,
                                on_lost=self._on_lost)

    def _ensure_control_topic(self, ck: Any) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic
        admin = AdminClient({"bootstrap.servers": self.cfg.bootstrap})
        md = admin.list_topics(timeout=10)
        if self.cfg.control_topic in md.topics:
            return
        fut = admin.create_topics([NewTopic(self.cfg.control_topic, 1, 1)])[self.cfg.control_topic]
        try:
            fut.result(10)
        except Exception as e:  # noqa: BLE001 - another worker created it first
            if "exist" not in str(e).lower():
                raise
        for _ in range(50):
            if self.cfg.control_topic in admin.list_topics(timeout=10).topics:
                return
            time.sleep(0.1)

    # -- rebalance callbacks (run inside consumer.consume on the loop thread) --------------------------
    def _on_assign(self, consumer: Any, partitions: list[Any]) -> None:
        offsets, _ = latest_commit_offsets(self.table, self.cfg.topic)
        for tp in partitions:
            # a partition the table has no offset for starts at 0 (K12), not OFFSET_BEGINNING: the
            # client then looks the log's start up first (half a second on some brokers); when
            # retention removed offset 0, auto.offset.reset=earliest starts at the log's start
            tp.offset = offsets.get(tp.partition, 0)
        consumer.assign(partitions)
        if not self.cfg.prefetch_bytes:
            consumer.pause(partitions)
        log.info("%s assigned partitions %s", self.name, [tp.partition for tp in partitions])
        for tp in partitions:
            p = tp.partition
            part = TransactionParticipant(self.cfg.topic, p, _PartitionContext(self, p), self._write, self._publish,
                                          group=self.cfg.group_id, decode=self._decode,
                                          decode_batch=self._decode_batch, prefetch_bytes=self.cfg.prefetch_bytes,
                                          defer_writes=True, decode_pool=self._decode_pool)
            part.start(offsets.get(p), position=offsets.get(p, 0))   # the table's offset: to the group at once
            self.participants[p] = part
            if p == 0 and self.coordinator is None:
                self.coordinator = TransactionCoordinator(
                    self.cfg.topic, _Services(self), self._publish, group=self.cfg.group_id,
                    commit_interval=self.cfg.commit_interval, write_timeout=self.cfg.write_timeout,
                    allow_commit_on_errors=self.cfg.allow_commit_on_errors,
                    skip_empty_rounds=self.cfg.skip_empty_rounds, catch_up=self.cfg.catch_up,
                    extra_metadata=self.cfg.extra,
                    latest_instant=lambda: latest_commit_offsets(self.table, self.cfg.topic)[1])
                self.coordinator.start()

    def _drop(self, partitions: list[Any], *, commit: bool) -> None:
        for tp in partitions:
            part = self.participants.pop(tp.partition, None)
            if part is None:
                continue
            if commit and part.kafka_committed != part.committed_offset and \
                    (part.committed_offset > 0 or part.kafka_committed is not None):
                try:
                    part.context.commit_offset(part.committed_offset)
                except Exception as e:  # noqa: BLE001
                    log.warning("could not commit offset of partition %s on revoke: %s", tp.partition, e)
            part.stop()
            if tp.partition == 0 and self.coordinator is not None:
                self.coordinator.stop()
                self.coordinator = None

    def _on_revoke(self, consumer: Any, partitions: list[Any]) -> None:
        log.info("%s revoked partitions %s", self.name, [tp.partition for tp in partitions])
        self._drop(partitions, commit=True)
        consumer.unassign()

    def _on_lost(self, consumer: Any, partitions: list[Any]) -> None:
        self._drop(partitions, commit=False)
        consumer.unassign()

    # -- the loop -------------------------------------------------------------------------------------
    def run(self, stop: threading.Event) -> None:
        try:
            self._setup()
            self.ready.set()
            while not stop.is_set():
                self.step()
        except BaseException as e:
            self.error = e
            log.exception("sink worker %s failed", self.name)
            raise
        finally:
            self.ready.set()
            self._shutdown()

    def step(self, data_timeout: float = 0.05) -> None:
        for m in self.control.consume(num_messages=200, timeout=0) or []:
            if m.error():
                continue
            try:
                ev = ControlEvent.decode(m.value())
            except Exception as e:  # noqa: BLE001 - not ours, or another protocol version
                log.warning("ignoring a control message: %s", e)
                continue
            if ev.topic != self.cfg.topic or ev.group != self.cfg.group_id:
                continue
            if ev.receiver is EntityType.PARTICIPANT:
                for part in list(self.participants.values()):
                    part.on_event(ev)
            elif self.coordinator is not None:
                self.coordinator.on_event(ev)
        by_partition: dict[int, list[tuple[int, Any]]] = {}
        # up to 10,000 records a turn, 1,000 at a time: a Kafka message object is tracked by Python's
        # garbage collector, and 10,000 alive at once promote each other to the oldest generation, whose
        # full collections then cost more than the decoding
        got, timeout = 0, data_timeout
        while got < _TURN_RECORDS:
            msgs = self.consumer.consume(num_messages=_CONSUME_BATCH, timeout=timeout) or []
            for m in msgs:
                if m.error():
                    log.debug("data consumer: %s", m.error())
                    continue
                p = m.partition()
                records = by_partition.get(p)
                if records is None:
                    records = by_partition[p] = []
                records.append((m.offset(), m.value()))
            got += len(msgs)
            if len(msgs) < _CONSUME_BATCH:
                break
            timeout = 0
        for p, records in by_partition.items():
            participant = self.participants.get(p)
            if participant is not None:
                participant.buffer_many(records)
        for part in list(self.participants.values()):
            part.process()
        self._write_pending()
        if self.coordinator is not None:
            self.coordinator.tick()
        now = time.monotonic()
        if now - self._last_wm > 1.0:
            self._last_wm = now
            self._refresh_snapshot()

    def _refresh_snapshot(self) -> None:
        from confluent_kafka import TopicPartition
        for p in list(self.participants):
            try:
                _lo, hi = self.consumer.get_watermark_offsets(TopicPartition(self.cfg.topic, p), timeout=0.5)
                self.end_offsets[p] = hi
            except Exception:  # noqa: BLE001
                pass
        parts = {}
        for p, part in sorted(self.participants.items()):
            s = part.snapshot()
            s["end"] = self.end_offsets.get(p)
            parts[p] = s
        self._snapshot = {"worker": self.name, "running": True, "partitions": parts,
                          "coordinator": self.coordinator.snapshot() if self.coordinator else None}

    def snapshot(self) -> dict[str, Any]:
        return dict(self._snapshot)

    def _shutdown(self) -> None:
        try:
            if self.consumer is not None and self.table is not None and self.participants:
                offsets, _ = latest_commit_offsets(self.table, self.cfg.topic)
                from confluent_kafka import TopicPartition
                tps = [TopicPartition(self.cfg.topic, p, offsets[p]) for p in self.participants if p in offsets]
                if tps:
                    self.consumer.commit(offsets=tps, asynchronous=False)
        except Exception as e:  # noqa: BLE001
            log.warning("could not commit the final offsets: %s", e)
        if self.coordinator is not None:
            self.coordinator.stop()
            self.coordinator = None
        for part in self.participants.values():
            part.stop()
        self.participants.clear()
        for c in (self.consumer, self.control):
            if c is not None:
                try:
                    c.close()
                except Exception:  # noqa: BLE001
                    pass
        if self.producer is not None:
            self.producer.flush(5)
        self.consumer = self.control = self.producer = None
        if self._decode_pool is not None:
            self._decode_pool.shutdown(wait=True, cancel_futures=True)
            self._decode_pool = None
        self._snapshot = {**self._snapshot, "running": False, "partitions": {}, "coordinator": None}

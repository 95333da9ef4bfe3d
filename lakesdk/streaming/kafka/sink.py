"""Start and stop a Kafka sink from Python (a notebook, a script, a test).

>>> from lakesdk.streaming.kafka import KafkaSink
>>> sink = KafkaSink("file:///tmp/lake/orders", "orders", "127.0.0.1:9092", commit_interval=5)
>>> sink
<KafkaSink 'orders' -> 'file:///tmp/lake/orders' group='lakesdk-sink-orders' stopped>
>>> sink.status()
<SinkStatus 'orders' stopped: no worker running>

``sink.start()`` runs ``workers`` consumer-group members on threads of this process;
``sink.status()`` takes a snapshot (no I/O: each worker refreshes its own about once a
second); ``sink.stop()`` stops them after rolling back an open round.  For several
processes use the CLI: ``lakesdk kafka-sink --workers N``.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any, Literal

from lakesdk.streaming.kafka.config import DEFAULT_CONTROL_TOPIC, DEFAULT_PREFETCH_BYTES, SinkConfig
from lakesdk.streaming.kafka.status import CommittedRound, PartitionStatus, SinkStatus, merge_snapshots

if TYPE_CHECKING:
    from lakesdk.widgets.kafka_monitor import KafkaMonitorWidget

__all__ = ["KafkaSink", "SinkStatus", "PartitionStatus", "CommittedRound"]


class KafkaSink:
    """An exactly-once sink from a Kafka topic into an existing merge-on-read table.

    The table's record key, ordering and partition fields decide how records are written;
    the value of each Kafka record is one row (``format="json"``: a JSON object;
    ``format="avro"``: Avro binary written with ``avro_schema``).  Beside other writers or
    table services, give it their concurrency settings (``concurrency="optimistic"``, the
    same ``lock`` and ``lock_options``): a round that loses a race to them is rolled back
    and its records are written again in the next round."""

    def __init__(self, table_url: str, topic: str, bootstrap: str, *, group: str | None = None,
                 control_topic: str = DEFAULT_CONTROL_TOPIC, commit_interval: float = 60.0,
                 write_timeout: float = 300.0, format: Literal["json", "avro"] = "json",
                 avro_schema: str | dict[str, Any] | None = None,
                 avro_framing: Literal["none", "confluent"] = "none", allow_commit_on_errors: bool = True,
                 skip_empty_rounds: bool = True, catch_up: bool = True, workers: int = 1, instance_id: str | None = None,
                 prefetch_bytes: int = DEFAULT_PREFETCH_BYTES,
                 session_timeout_ms: int = 10000,
                 max_poll_interval_ms: int = 300000,
                 consumer_config: dict[str, Any] | None = None,
                 storage_options: dict[str, Any] | None = None,
                 concurrency: Literal["single_writer", "optimistic"] | None = None,
                 lock: Literal["in_process", "storage", "zookeeper"] | None = None,
                 lock_options: dict[str, Any] | None = None) -> None:
        self.config = SinkConfig(
            table_url=str(table_url), topic=topic, bootstrap=bootstrap, group=group, control_topic=control_topic,
            commit_interval=commit_interval, write_timeout=write_timeout, format=format, avro_schema=avro_schema,
            avro_framing=avro_framing, allow_commit_on_errors=allow_commit_on_errors,
            skip_empty_rounds=skip_empty_rounds, catch_up=catch_up, prefetch_bytes=prefetch_bytes, instance_id=instance_id,
            session_timeout_ms=session_timeout_ms,
            max_poll_interval_ms=max_poll_interval_ms,
            consumer_config=tuple(sorted((consumer_config or {}).items())),
            storage_options=tuple(sorted((storage_options or {}).items())), concurrency=concurrency, lock=lock,
            lock_options=tuple(sorted((lock_options or {}).items())))
        if workers < 1:
            raise ValueError(f"workers must be at least 1, not {workers}")
        self.workers = workers
        self._threads: list[tuple[Any, threading.Thread]] = []
        self._stop = threading.Event()

    @classmethod
    def from_config(cls, cfg: SinkConfig, *, workers: int = 1) -> "KafkaSink":
        s = cls.__new__(cls)
        s.config, s.workers, s._threads, s._stop = cfg, workers, [], threading.Event()
        return s

    def __repr__(self) -> str:
        c = self.config
        state = "running" if self.running else "stopped"
        return f"<KafkaSink {c.topic!r} -> {c.table_url!r} group={c.group_id!r} {state}>"

    @property
    def running(self) -> bool:
        return any(t.is_alive() for _, t in self._threads)

    def start(self, *, wait: float = 30.0) -> "KafkaSink":
        """Start the workers (threads of this process); returns once they joined the group's
        setup, or raises the first worker's error."""
        from lakesdk.streaming.kafka.worker import SinkWorker, open_sink_table, require_kafka
        require_kafka()
        open_sink_table(self.config)   # fail early on a copy-on-write or missing table
        if self.running:
            return self
        self._stop = threading.Event()
        self._threads = []
        for i in range(self.workers):
            cfg = self.config
            if cfg.instance_id and self.workers > 1:
                cfg = cfg.with_(instance_id=f"{cfg.instance_id}-{i}")
            w = SinkWorker(cfg, name=f"{self.config.topic}-w{i}")
            t = threading.Thread(target=self._run, args=(w,), name=f"lakesdk-kafka-sink-{i}", daemon=True)
            self._threads.append((w, t))
            t.start()
        deadline = time.monotonic() + wait
        for w, _ in self._threads:
            w.ready.wait(max(0.0, deadline - time.monotonic()))
            if w.error is not None:
                self.stop()
                raise w.error
        return self

    def _run(self, w: Any) -> None:
        try:
            w.run(self._stop)
        except BaseException:  # noqa: BLE001 - kept on the worker, shown by status()
            pass

    def stop(self, timeout: float = 60.0) -> "KafkaSink":
        """Stop every worker (an open round is rolled back; its records are read again next
        time).  Idempotent."""
        self._stop.set()
        for _, t in self._threads:
            t.join(timeout)
        return self

    def status(self) -> SinkStatus:
        snaps = [w.snapshot() for w, _ in self._threads]
        errors = [f"{w.name}: {type(w.error).__name__}: {w.error}" for w, _ in self._threads if w.error is not None]
        return merge_snapshots(self.config.topic, snaps, errors)

    def widget(self, *, live: bool = False, interval_s: float = 2.0) -> KafkaMonitorWidget:
        """A notebook monitor of this sink: coordinator, rounds, per-partition offsets and lag
        (:class:`lakesdk.widgets.KafkaMonitorWidget`; ``pip install 'lakesdk[notebook]'``)."""
        from lakesdk.widgets.kafka_monitor import KafkaMonitorWidget
        return KafkaMonitorWidget(self, live=live, interval_s=interval_s)

    def __enter__(self) -> "KafkaSink":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

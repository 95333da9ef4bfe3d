"""Settings of a Kafka sink, and the record formats (JSON, Avro with a given schema)."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Literal

__all__ = ["SinkConfig", "make_decoder", "DEFAULT_CONTROL_TOPIC", "DEFAULT_PREFETCH_BYTES"]

DEFAULT_CONTROL_TOPIC = "lakesdk-control-topic"   # Hudi: hoodie.kafka.control.topic = hudi-control-topic
DEFAULT_PREFETCH_BYTES = 8 << 20                  # per partition: what it reads ahead of its next round


@dataclass(frozen=True)
class SinkConfig:
    """One sink: which table, which topic, how often to commit.

    ``commit_interval`` is Hudi's ``hoodie.kafka.commit.interval.secs`` (START_COMMIT to
    END_COMMIT), ``write_timeout`` its ``hoodie.kafka.coordinator.write.timeout.secs``;
    ``allow_commit_on_errors`` (``hoodie.kafka.allow.commit.on.errors``) commits rounds in
    which some records could not be decoded (they are skipped and counted).
    ``catch_up`` (lakesdk): a round ends once it has read every record its partitions held when it
    started, without waiting for the rest of ``commit_interval``, and rounds start at most once
    per ``commit_interval``, as Hudi Streamer's rounds read up to the offsets they found (False:
    every round lasts ``commit_interval``, as in Hudi's Kafka Connect sink).
    ``prefetch_bytes``: how many bytes of record values each partition reads ahead of its
    round, from END_COMMIT until the next START_COMMIT takes them (0: pause in between, as
    Hudi does).  ``instance_id`` is Kafka's ``group.instance.id`` (static membership): a worker restarted
    with the same id takes over its partitions at once, without waiting for the broker to
    expire the dead member's session.  ``concurrency``, ``lock`` and ``lock_options`` open
    the table as :func:`lakesdk.open_table` does (Hudi's ``hoodie.write.concurrency.mode``
    and ``hoodie.write.lock.*``): ``concurrency="optimistic"`` with the lock the table's other
    writers and table services use lets the sink run beside them."""

    table_url: str
    topic: str
    bootstrap: str
    group: str | None = None
    control_topic: str = DEFAULT_CONTROL_TOPIC
    commit_interval: float = 60.0
    write_timeout: float = 300.0
    format: Literal["json", "avro"] = "json"
    avro_schema: str | dict[str, Any] | None = None
    avro_framing: Literal["none", "confluent"] = "none"
    allow_commit_on_errors: bool = True
    skip_empty_rounds: bool = True
    catch_up: bool = True
    prefetch_bytes: int = DEFAULT_PREFETCH_BYTES
    instance_id: str | None = None       # Kafka group.instance.id (static membership)
    session_timeout_ms: int = 10000
    max_poll_interval_ms: int = 300000   # also the group's rebalance timeout: a dead member can stall a rebalance this long
    consumer_config: tuple[tuple[str, Any], ...] = ()
    storage_options: tuple[tuple[str, Any], ...] = ()
    concurrency: Literal["single_writer", "optimistic"] | None = None   # None: the table handle's default
    lock: Literal["in_process", "storage", "zookeeper"] | None = None
    lock_options: tuple[tuple[str, Any], ...] = ()
    create_control_topic: bool = True
    extra: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.prefetch_bytes < 0:
            raise ValueError(f"prefetch_bytes must be 0 or more, not {self.prefetch_bytes}")

    @property
    def group_id(self) -> str:
        return self.group or f"lakesdk-sink-{self.topic}"

    def with_(self, **changes: Any) -> "SinkConfig":
        return replace(self, **changes)

    def to_json(self) -> str:
        from dataclasses import asdict
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> "SinkConfig":
        d = json.loads(text)
        d["consumer_config"] = tuple(tuple(x) for x in d.get("consumer_config", ()))
        d["storage_options"] = tuple(tuple(x) for x in d.get("storage_options", ()))
        d["lock_options"] = tuple(tuple(x) for x in d.get("lock_options", ()))
        return cls(**d)


def make_decoder(cfg: SinkConfig) -> Callable[[bytes | None], dict[str, Any]]:
    """A function from a Kafka record value (bytes) to a row (dict).

    >>> dec = make_decoder(SinkConfig("t", "x", "b"))
    >>> dec(b'{"id": 1, "v": "a"}')
    {'id': 1, 'v': 'a'}
    """
    if cfg.format == "json":
        def decode_json(value: bytes | None) -> dict[str, Any]:
            if value is None:
                raise ValueError("a null value (tombstone) is not a row")
            try:
                text: str | bytes = value.decode("utf-8") if isinstance(value, bytes) else value
            except UnicodeDecodeError:
                text = value      # json.loads detects UTF-16/32 itself
            row = json.loads(text)
            if not isinstance(row, dict):
                raise ValueError(f"expected a JSON object, found {type(row).__name__}")
            return row
        return decode_json
    if cfg.format == "avro":
        import fastavro
        if cfg.avro_schema is None:
            raise ValueError("format='avro' needs avro_schema= (the writer's Avro schema, as JSON text, a dict "
                             "or a path to an .avsc file)")
        raw: Any = cfg.avro_schema
        if isinstance(raw, str):
            s = raw.strip()
            raw = json.loads(s) if s.startswith("{") else json.loads(open(s, encoding="utf-8").read())
        schema = fastavro.parse_schema(raw)
        skip = 5 if cfg.avro_framing == "confluent" else 0

        def decode_avro(value: bytes | None) -> dict[str, Any]:
            if value is None:
                raise ValueError("a null value (tombstone) is not a row")
            if skip and (len(value) < 5 or value[0] != 0):
                raise ValueError("not in the Confluent wire format (magic byte 0 + 4-byte schema id)")
            return fastavro.schemaless_reader(io.BytesIO(value[skip:]), schema)  # type: ignore[return-value]
        return decode_avro
    raise ValueError(f"format must be 'json' or 'avro', not {cfg.format!r}")

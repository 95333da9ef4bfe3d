"""Control events of the Kafka sink and their wire encoding (protocol version 1).

Hudi's connector sends a protobuf ``ControlMessage``; lakesdk sends the same fields as one
UTF-8 JSON object per Kafka record on the control topic (key: the data topic's name)::

    {"v": 1,                              protocol version; a reader drops versions it does not know
     "type": "START_COMMIT",              START_COMMIT | END_COMMIT | WRITE_STATUS | ACK_COMMIT
     "group": "lakesdk-sink-orders",      the sink's consumer group (several sinks may share a control topic)
     "topic": "orders",                   the data topic
     "sender": "COORDINATOR",             COORDINATOR | PARTICIPANT
     "sender_partition": 0,
     "receiver": "PARTICIPANT",           PARTICIPANT (every participant of the topic) | COORDINATOR
     "receiver_partition": 0,
     "commit_time": "20250101120000000",  the round's Hudi instant ("" when there is none)
     "txn": {...} | null,                 the OpenInstant (instant, action, operation) participants write for
     "offsets": {"0": 12, "1": 40},       coordinator events: globalKafkaCommitOffsets (next offset to consume)
     "targets": {"0": 90, "1": 40},       START_COMMIT (lakesdk): each partition's end offset when the round
                                          started; a participant that has taken every record before it
                                          reports at once, with "caught_up": true (see below)
     "kafka_offset": 41,                  WRITE_STATUS: the participant's next expected offset
     "stats": [...], "schema": "...",     WRITE_STATUS: the write stats (dicts) and base64 Arrow schema
     "records": 10, "error_records": 0,   WRITE_STATUS: records written, records that could not be decoded
     "write_error": null,                 WRITE_STATUS: why the batch could not be written (aborts the round)
     "caught_up": false}                  WRITE_STATUS (lakesdk): sent before END_COMMIT, on reaching the target

Absent fields take the defaults above, so a version-1 reader accepts messages that omit
them, and ignores fields it does not know: a participant that does not know ``targets`` waits
for END_COMMIT, and only a coordinator that sent ``targets`` counts a status before END_COMMIT.  Offsets in the Hudi commit metadata use Hudi's own format under
``kafka.commit.offsets``: ``"<partition>=<offset>"`` entries joined by ``,`` (sorted by
partition), so Hudi's Kafka Connect sink can resume from a lakesdk commit and back.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from lakesdk.exceptions import OffsetsFormatError

__all__ = ["PROTOCOL_VERSION", "KAFKA_OFFSET_KEY", "EventType", "EntityType", "ControlEvent",
           "format_offsets", "parse_offsets", "OffsetsFormatError"]

PROTOCOL_VERSION = 1
KAFKA_OFFSET_KEY = "kafka.commit.offsets"
KAFKA_TOPIC_KEY = "kafka.commit.topic"
KAFKA_GROUP_KEY = "kafka.commit.group"


class EventType(StrEnum):
    START_COMMIT = "START_COMMIT"
    END_COMMIT = "END_COMMIT"
    WRITE_STATUS = "WRITE_STATUS"
    ACK_COMMIT = "ACK_COMMIT"


class EntityType(StrEnum):
    COORDINATOR = "COORDINATOR"
    PARTICIPANT = "PARTICIPANT"


@dataclass(frozen=True)
class ControlEvent:
    """One control message (see the module doc for the wire form)."""

    type: EventType
    topic: str
    group: str = ""
    sender: EntityType = EntityType.COORDINATOR
    sender_partition: int = 0
    receiver: EntityType = EntityType.PARTICIPANT
    receiver_partition: int = 0
    commit_time: str = ""
    txn: dict[str, Any] | None = None
    offsets: dict[int, int] = field(default_factory=dict)
    kafka_offset: int = -1
    stats: list[dict[str, Any]] = field(default_factory=list)
    schema: str | None = None
    records: int = 0
    error_records: int = 0
    write_error: str | None = None
    targets: dict[int, int] = field(default_factory=dict)
    caught_up: bool = False
    version: int = PROTOCOL_VERSION

    def encode(self) -> bytes:
        """The JSON bytes of this event.

        >>> e = ControlEvent(EventType.START_COMMIT, "t", commit_time="101", offsets={0: 5})
        >>> ControlEvent.decode(e.encode()) == e
        True
        """
        d: dict[str, Any] = {
            "v": self.version, "type": self.type.value, "group": self.group, "topic": self.topic,
            "sender": self.sender.value, "sender_partition": self.sender_partition,
            "receiver": self.receiver.value, "receiver_partition": self.receiver_partition,
            "commit_time": self.commit_time, "txn": self.txn,
            "offsets": {str(k): int(v) for k, v in sorted(self.offsets.items())},
        }
        if self.targets:
            d["targets"] = {str(k): int(v) for k, v in sorted(self.targets.items())}
        if self.type is EventType.WRITE_STATUS:
            d.update(kafka_offset=self.kafka_offset, stats=self.stats, schema=self.schema, records=self.records,
                     error_records=self.error_records, write_error=self.write_error)
            if self.caught_up:
                d["caught_up"] = True
        return json.dumps(d, separators=(",", ":")).encode("utf-8")

    @classmethod
    def decode(cls, data: bytes | str) -> "ControlEvent":
        """Parse an encoded event; raises ``ValueError`` for a version this code does not speak."""
        d = json.loads(data)
        v = int(d.get("v", 0))
        if v != PROTOCOL_VERSION:
            raise ValueError(f"control event protocol version {v} is not supported (this lakesdk speaks "
                             f"{PROTOCOL_VERSION}); upgrade lakesdk on every worker of the sink")
        return cls(type=EventType(d["type"]), topic=d["topic"], group=d.get("group", ""),
                   sender=EntityType(d.get("sender", "COORDINATOR")), sender_partition=int(d.get("sender_partition", 0)),
                   receiver=EntityType(d.get("receiver", "PARTICIPANT")),
                   receiver_partition=int(d.get("receiver_partition", 0)), commit_time=d.get("commit_time", ""),
                   txn=d.get("txn"), offsets={int(k): int(x) for k, x in (d.get("offsets") or {}).items()},
                   kafka_offset=int(d.get("kafka_offset", -1)), stats=list(d.get("stats") or []),
                   schema=d.get("schema"), records=int(d.get("records", 0)),
                   error_records=int(d.get("error_records", 0)), write_error=d.get("write_error"),
                   targets={int(k): int(x) for k, x in (d.get("targets") or {}).items()},
                   caught_up=bool(d.get("caught_up", False)), version=v)


def format_offsets(offsets: dict[int, int]) -> str:
    """Hudi's ``kafka.commit.offsets`` value: ``"p=o,p=o"`` sorted by partition.

    >>> format_offsets({})
    ''
    """
    return ",".join(f"{int(p)}={int(o)}" for p, o in sorted(offsets.items()))


def parse_offsets(text: str | None) -> dict[int, int]:
    """Parse ``kafka.commit.offsets``: Hudi's ``"p=o,..."`` form, or a JSON object ``{"p": o}``.

    >>> parse_offsets('{"0": 3, "2": 9}')
    {0: 3, 2: 9}
    >>> parse_offsets('')
    {}
    >>> parse_offsets('0=x')  # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    OffsetsFormatError: could not deserialize the kafka commit offsets '0=x'
    """
    if text is None or not text.strip():
        return {}
    s = text.strip()
    try:
        if s.startswith("{"):
            return {int(k): int(v) for k, v in json.loads(s).items()}
        out: dict[int, int] = {}
        for entry in s.split(","):
            p, o = entry.split("=")
            out[int(p.strip())] = int(o.strip())
        return out
    except (ValueError, AttributeError) as e:
        raise OffsetsFormatError(f"could not deserialize the kafka commit offsets {text!r}: expected "
                                 f"'<partition>=<offset>,...' or a JSON object ({e})") from None

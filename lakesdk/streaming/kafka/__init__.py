"""Exactly-once Kafka sink: Hudi's Kafka Connect coordinator/participant protocol in Python.

One consumer group reads the data topic.  Every assigned partition gets a
:class:`TransactionParticipant`; the worker that owns partition 0 also runs the
:class:`TransactionCoordinator`.  They talk over a one-partition control topic with the
events START_COMMIT, END_COMMIT, WRITE_STATUS and ACK_COMMIT (see
:mod:`lakesdk.streaming.kafka.events` for the versioned JSON encoding).  Each round is one
Hudi instant whose commit metadata carries the Kafka offsets of every partition
(``kafka.commit.offsets``), so data and offsets become durable in the same commit.

The code speaks only the Kafka protocol (through ``confluent-kafka``): it runs on Apache
Kafka, Redpanda or any compatible broker.

>>> from lakesdk.streaming.kafka import format_offsets, parse_offsets
>>> format_offsets({1: 17, 0: 5})
'0=5,1=17'
>>> parse_offsets('0=5,1=17')
{0: 5, 1: 17}
"""

from __future__ import annotations

from typing import Any

from lakesdk.streaming.kafka.events import (
    KAFKA_OFFSET_KEY,
    PROTOCOL_VERSION,
    ControlEvent,
    EventType,
    format_offsets,
    parse_offsets,
)

_LAZY = {
    "TransactionCoordinator": "lakesdk.streaming.kafka.coordinator",
    "CoordinatorState": "lakesdk.streaming.kafka.coordinator",
    "TransactionParticipant": "lakesdk.streaming.kafka.participant",
    "SinkConfig": "lakesdk.streaming.kafka.config",
    "KafkaSink": "lakesdk.streaming.kafka.sink",
    "SinkStatus": "lakesdk.streaming.kafka.status",
    "PartitionStatus": "lakesdk.streaming.kafka.status",
    "CommittedRound": "lakesdk.streaming.kafka.status",
    "SinkWorker": "lakesdk.streaming.kafka.worker",
}

__all__ = ["ControlEvent", "EventType", "PROTOCOL_VERSION", "KAFKA_OFFSET_KEY", "format_offsets", "parse_offsets",
           *_LAZY]


def __getattr__(name: str) -> Any:
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'lakesdk.streaming.kafka' has no attribute {name!r}")
    import importlib
    value = getattr(importlib.import_module(mod), name)
    globals()[name] = value
    return value

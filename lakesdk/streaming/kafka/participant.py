"""The TransactionParticipant: one per assigned partition of the data topic.

Hudi's ``ConnectTransactionParticipant``.  The worker hands it records with
:meth:`TransactionParticipant.buffer` and control events with
:meth:`TransactionParticipant.on_event`, then calls :meth:`TransactionParticipant.process`
(events first, in order, then records).  Kafka is reached only through a small
:class:`PartitionContext` (pause, resume, seek, commit), so the state machine is tested
without a broker.

* START_COMMIT: drop any local transaction (it failed globally), take the committed offset
  from the coordinator's offsets (absent partition -> 0, K12), resume, start a transaction
  that expects exactly that offset next.  lakesdk seeks to it at once unless the buffer
  already starts there (Hudi waits for a gap to seek).
* records: ``offset == expected`` is taken, ``offset < expected`` is a duplicate and dropped,
  ``offset > expected`` is a gap: seek back to ``expected`` (once; a gap that is still there
  right after the seek is real, e.g. a compacted topic, and is accepted).
* END_COMMIT for this transaction: pause, write the buffered records with the coordinator's
  instant (``write_batch``), publish WRITE_STATUS(stats, next expected offset).  For another
  instant: drop the transaction and resync (K14).  Without a transaction: nothing (K10).
* ACK_COMMIT: take the coordinator's offset for this partition, end the transaction, and
  commit that offset to the Kafka consumer group (Hudi's ``preCommit``, K22).
* Group offsets never trail the table for long: a participant started with the table's
  offset (a new assignment) commits it to the consumer group before anything else, and a
  START_COMMIT or ACK_COMMIT whose offset is ahead of the group's is committed as well (the
  worker that would have committed it after the last ACK may have died).
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from lakesdk.exceptions import DecodeError
from lakesdk.streaming.kafka.events import ControlEvent, EntityType, EventType

log = logging.getLogger(__name__)

__all__ = ["PartitionContext", "TransactionParticipant", "TransactionInfo", "DecodeError"]


class PartitionContext(Protocol):
    def pause(self) -> None: ...
    def resume(self) -> None: ...
    def seek(self, offset: int) -> bool | None: ...   # False: not possible now, retried
    def commit_offset(self, offset: int) -> None: ...


@dataclass
class TransactionInfo:
    commit_time: str
    txn: dict[str, Any] | None
    expected_offset: int
    rows: list[dict[str, Any]] = field(default_factory=list)
    error_records: int = 0
    initiated: bool = False


Writer = Callable[[dict[str, Any], list[dict[str, Any]]], "tuple[list[dict[str, Any]], str | None]"]


class TransactionParticipant:
    """One partition's side of the protocol (see the module doc)."""

    def __init__(self, topic: str, partition: int, context: PartitionContext, writer: Writer,
                 publish: Callable[[ControlEvent], None], *, group: str = "",
                 decode: Callable[[Any], dict[str, Any]] | None = None) -> None:
        self.topic = topic
        self.partition = partition
        self.context = context
        self.writer = writer
        self.publish = publish
        self.group = group
        self.decode = decode or (lambda v: v)
        self.committed_offset = 0
        self.txn: TransactionInfo | None = None
        self._buffer: deque[tuple[int, Any]] = deque()
        self._events: deque[ControlEvent] = deque()
        self._sought: int | None = None
        self._want_seek: int | None = None
        self.records_written = 0
        self.error_records = 0
        self.last_consumed: int | None = None
        self.kafka_committed: int | None = None
        self.written_offset: int | None = None
        self.stopped = False
        self._group_sync_pending = False

    # -- lifecycle --------------------------------------------------------------------------------
    def start(self, committed: int | None = None) -> None:
        """Pause until the first START_COMMIT.  ``committed``: the partition's offset in the
        table's latest commit (a new assignment); it is committed to the consumer group at the
        next :meth:`process`, so the group catches up with the table even when no round follows."""
        if committed is not None:
            self.committed_offset = committed
            self._group_sync_pending = True
        self.context.pause()

    def stop(self) -> None:
        self.stopped = True
        self.txn = None
        self._buffer.clear()
        self._events.clear()

    # -- input ------------------------------------------------------------------------------------
    def buffer(self, offset: int, value: Any) -> None:
        self._buffer.append((offset, value))
        self.last_consumed = offset if self.last_consumed is None else max(self.last_consumed, offset)

    def on_event(self, event: ControlEvent) -> None:
        if event.topic == self.topic and event.receiver is EntityType.PARTICIPANT:
            self._events.append(event)

    def process(self) -> None:
        """Handle queued control events in order, then the buffered records."""
        if self._group_sync_pending and not self.stopped:
            self._group_sync_pending = False
            self.sync_group_offset()
        while self._events and not self.stopped:
            ev = self._events.popleft()
            if ev.type is EventType.START_COMMIT:
                self._start_commit(ev)
            elif ev.type is EventType.END_COMMIT:
                self._end_commit(ev)
            elif ev.type is EventType.ACK_COMMIT:
                self._ack_commit(ev)
        self._write_records()

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    # -- the state machine ------------------------------------------------------------------------
    def _sync_with_leader(self, ev: ControlEvent) -> None:
        off = ev.offsets.get(self.partition)
        if off is not None and off >= 0:
            if off != self.committed_offset:
                log.debug("partition %s: committed offset %s -> %s (from the coordinator)", self.partition,
                          self.committed_offset, off)
            self.committed_offset = off
        else:
            self.committed_offset = 0   # K12: nothing committed for this partition yet

    def _start_commit(self, ev: ControlEvent) -> None:
        self.txn = None   # a local transaction still open failed globally
        self._sync_with_leader(ev)
        self.context.resume()
        self.txn = TransactionInfo(ev.commit_time, ev.txn, self.committed_offset)
        while self._buffer and self._buffer[0][0] < self.committed_offset:
            self._buffer.popleft()
        if not self._buffer or self._buffer[0][0] != self.committed_offset:
            self._seek(self.committed_offset)
        if self.committed_offset > (self.kafka_committed or 0):
            self.sync_group_offset()

    def _seek(self, offset: int) -> None:
        self._buffer.clear()
        if self.context.seek(offset) is False:
            self._want_seek, self._sought = offset, None
        else:
            self._want_seek, self._sought = None, offset

    def _end_commit(self, ev: ControlEvent) -> None:
        txn = self.txn
        if txn is None:
            log.debug("partition %s: END_COMMIT %s without a transaction", self.partition, ev.commit_time)
            return   # K10
        if txn.commit_time != ev.commit_time:
            log.warning("partition %s: END_COMMIT %s does not match the transaction %s; resyncing",
                        self.partition, ev.commit_time, txn.commit_time)
            self.txn = None
            self._sync_with_leader(ev)   # K14
            return
        self.context.pause()
        txn.initiated = True
        stats: list[dict[str, Any]] = []
        schema: str | None = None
        error: str | None = None
        try:
            if txn.rows:
                stats, schema = self.writer(txn.txn or {"instant": txn.commit_time}, txn.rows)
        except Exception as e:  # noqa: BLE001 - reported: the coordinator aborts the round
            log.exception("partition %s could not write its batch for %s", self.partition, txn.commit_time)
            error = f"{type(e).__name__}: {e}"
        self.publish(ControlEvent(EventType.WRITE_STATUS, self.topic, group=self.group,
                                  sender=EntityType.PARTICIPANT, sender_partition=self.partition,
                                  receiver=EntityType.COORDINATOR, receiver_partition=0,
                                  commit_time=txn.commit_time, kafka_offset=txn.expected_offset,
                                  stats=stats, schema=schema, records=0 if error else len(txn.rows),
                                  error_records=txn.error_records, write_error=error))
        if not error:
            self.records_written += len(txn.rows)
            self.written_offset = txn.expected_offset
        txn.rows = []

    def _ack_commit(self, ev: ControlEvent) -> None:
        if self.txn is not None and self.committed_offset < self.txn.expected_offset:
            self.committed_offset = self.txn.expected_offset
        self._sync_with_leader(ev)
        self.txn = None
        self.sync_group_offset(force=True)

    def sync_group_offset(self, *, force: bool = False) -> bool:
        """Commit :attr:`committed_offset` to the consumer group (unless it is already there,
        or ``force``); False when the broker refused (the next ACK or assignment retries)."""
        if not force and self.kafka_committed == self.committed_offset:
            return True
        try:
            self.context.commit_offset(self.committed_offset)
        except Exception as e:  # noqa: BLE001 - Kafka's group offset only trails; the table is the truth
            log.warning("partition %s: could not commit offset %s to Kafka: %s", self.partition,
                        self.committed_offset, e)
            self._group_sync_pending = True
            return False
        self.kafka_committed = self.committed_offset
        return True

    def _write_records(self) -> None:
        txn = self.txn
        if txn is None or txn.initiated:
            return
        if self._want_seek is not None:
            if self._want_seek != txn.expected_offset:
                self._want_seek = txn.expected_offset
            self._seek(self._want_seek)
            if self._want_seek is not None:
                return
        while self._buffer:
            offset, value = self._buffer[0]
            if offset < txn.expected_offset:
                self._buffer.popleft()        # already written or committed
                continue
            if offset > txn.expected_offset and self._sought != txn.expected_offset:
                self._seek(txn.expected_offset)   # a gap: read again from the expected offset
                return
            self._buffer.popleft()            # offset == expected, or a real gap right after a seek
            self._sought = None
            try:
                txn.rows.append(self.decode(value))
            except Exception as e:  # noqa: BLE001 - an error record (Hudi: allow.commit.on.errors)
                txn.error_records += 1
                self.error_records += 1
                log.warning("partition %s offset %s: cannot decode the record: %s", self.partition, offset, e)
            txn.expected_offset = offset + 1

    # -- status -------------------------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        t = self.txn
        return {"partition": self.partition, "committed": self.committed_offset,
                "kafka_committed": self.kafka_committed,
                "position": t.expected_offset if t else None, "last_consumed": self.last_consumed,
                "written": self.written_offset,
                "transaction": t.commit_time if t else None, "buffered": len(self._buffer),
                "pending_rows": len(t.rows) if t else 0, "records_written": self.records_written,
                "error_records": self.error_records}

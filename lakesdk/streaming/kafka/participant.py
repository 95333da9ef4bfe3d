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
  already starts there, or is empty with the consumer at that offset (Hudi waits for a gap
  to seek).
* records: ``offset == expected`` is taken, ``offset < expected`` is a duplicate and dropped,
  ``offset > expected`` is a gap: seek back to ``expected`` (once; a gap that is still there
  right after the seek is real, e.g. a compacted topic, and is accepted).
* END_COMMIT for this transaction: pause, write the buffered records with the coordinator's
  instant (``write_batch``), publish WRITE_STATUS(stats, next expected offset).  For another
  instant: drop the transaction and resync (K14).  Without a transaction: nothing (K10).
  With ``defer_writes`` the participant leaves the write to its worker, which writes every
  participant's records of the instant in one ``write_batch`` call and hands each its part of
  the result (:meth:`TransactionParticipant.complete_write`).
* a target (lakesdk, the coordinator's ``catch_up``): a START_COMMIT may carry each partition's
  end offset when the round started.  The participant takes records up to its target only, and
  once it has taken every record before it, ends its part of the round at once, as at
  END_COMMIT, with a WRITE_STATUS marked ``caught_up``; the round's END_COMMIT then finds the
  transaction already written and sends nothing.  A target never reached (records before it
  removed from the log) leaves the round to its END_COMMIT.
* ACK_COMMIT: take the coordinator's offset for this partition, end the transaction, and
  commit that offset to the Kafka consumer group (Hudi's ``preCommit``, K22).
* Group offsets never trail the table for long: a participant started with the table's
  offset (a new assignment) commits it to the consumer group before anything else, and a
  START_COMMIT or ACK_COMMIT whose offset is ahead of the group's is committed as well (the
  worker that would have committed it after the last ACK may have died).

Records are decoded in batches as they are taken into the transaction (``decode_batch``,
:mod:`lakesdk.streaming.kafka.decoding`), not when the round ends.

``prefetch_bytes`` (lakesdk; 0 is Hudi's behaviour): instead of pausing from END_COMMIT until
the next START_COMMIT, and from the assignment until the first, the partition keeps reading
into its buffer, up to that many bytes of record values, then pauses until a START_COMMIT
takes them.  The next round starts where its START_COMMIT's offset says, as before: the
buffer is used when it starts at that offset (the previous round committed), and dropped by
the seek otherwise (the round failed, or the leader's offset differs).  Nothing is written
or committed from the buffer before a START_COMMIT, so exactly-once is unchanged.
"""

from __future__ import annotations

import logging
from collections import deque
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence

from lakesdk.exceptions import DecodeError
from lakesdk.streaming.kafka.decoding import BatchDecoder, DecodedBatch, RoundRows, batch_decoder_of
from lakesdk.streaming.kafka.events import ControlEvent, EntityType, EventType

log = logging.getLogger(__name__)

__all__ = ["PartitionContext", "TransactionParticipant", "TransactionInfo", "DecodeError", "RECORD_OVERHEAD_BYTES"]

RECORD_OVERHEAD_BYTES = 100   # a buffered record's Python objects, counted against prefetch_bytes
DECODE_CHUNK_BYTES = 1 << 20  # records taken into a transaction are decoded in chunks of about this size


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
    rows: RoundRows = field(default_factory=RoundRows)
    error_records: int = 0
    taken: int = 0          # records taken into the transaction (decoded or not yet)
    # records taken and not decoded yet: (offsets, values) runs, their bytes, and the chunks being
    # decoded (their runs, and the decoded batch or its future)
    undecoded: list[tuple[Sequence[int], list[Any]]] = field(default_factory=list)
    undecoded_bytes: int = 0
    decoding: list[tuple[list[tuple[Sequence[int], list[Any]]], Any]] = field(default_factory=list)
    initiated: bool = False
    target: int | None = None      # the partition's end offset when the round started (catch_up)
    caught_up: bool = False        # ended on reaching the target, before END_COMMIT


Writer = Callable[[dict[str, Any], RoundRows], "tuple[list[dict[str, Any]], str | None]"]


class TransactionParticipant:
    """One partition's side of the protocol (see the module doc)."""

    def __init__(self, topic: str, partition: int, context: PartitionContext, writer: Writer,
                 publish: Callable[[ControlEvent], None], *, group: str = "",
                 decode: Callable[[Any], dict[str, Any]] | None = None, decode_batch: BatchDecoder | None = None,
                 prefetch_bytes: int = 0, defer_writes: bool = False, decode_pool: Executor | None = None,
                 decode_chunk_bytes: int = DECODE_CHUNK_BYTES) -> None:
        self.topic = topic
        self.partition = partition
        self.context = context
        self.writer = writer
        self.publish = publish
        self.group = group
        self.decode = decode or (lambda v: v)
        self.decode_batch = decode_batch or batch_decoder_of(self.decode)
        self.prefetch_bytes = prefetch_bytes
        self.defer_writes = defer_writes
        self.decode_pool = decode_pool
        self.decode_chunk_bytes = decode_chunk_bytes
        self.pending: TransactionInfo | None = None   # ended, its write not done yet (defer_writes)
        self.committed_offset = 0
        self.txn: TransactionInfo | None = None
        self._buffer: deque[tuple[int, Any]] = deque()
        self._buffered_bytes = 0
        self._paused: bool | None = None
        self._position: int | None = None   # the offset of the next record the consumer delivers, when known
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
    def start(self, committed: int | None = None, *, position: int | None = None) -> None:
        """Pause until the first START_COMMIT (with ``prefetch_bytes``, read ahead).
        ``committed``: the partition's offset in the table's latest commit (a new assignment); it
        is committed to the consumer group at the next :meth:`process`, so the group catches up
        with the table even when no round follows.  ``position``: the offset the consumer was
        assigned at, when known."""
        if committed is not None:
            self.committed_offset = committed
            self._group_sync_pending = True
        self._position = position
        self._pause(not self.prefetch_bytes)

    def stop(self) -> None:
        self.stopped = True
        self.txn = None
        self.pending = None
        self._clear_buffer()
        self._events.clear()

    def _pause(self, paused: bool) -> None:
        if paused:
            self.context.pause()
        else:
            self.context.resume()
        self._paused = paused

    # -- input ------------------------------------------------------------------------------------
    def buffer(self, offset: int, value: Any) -> None:
        self.buffer_many([(offset, value)])

    def buffer_many(self, records: list[tuple[int, Any]]) -> None:
        """Hand over records of this partition, (offset, value) in offset order."""
        if not records:
            return
        self._buffer.extend(records)
        self._buffered_bytes += _size_of([v for _, v in records])
        last = records[-1][0]
        self._position = last + 1
        self.last_consumed = last if self.last_consumed is None else max(self.last_consumed, last)

    def _clear_buffer(self) -> None:
        self._buffer.clear()
        self._buffered_bytes = 0

    def _drained(self) -> None:
        """The byte count covers what was buffered since the buffer was last empty (an upper
        bound of what it holds): it starts again at 0 whenever the buffer empties."""
        if not self._buffer:
            self._buffered_bytes = 0

    def on_event(self, event: ControlEvent) -> None:
        if event.topic == self.topic and event.receiver is EntityType.PARTICIPANT:
            self._events.append(event)

    def process(self) -> None:
        """Handle queued control events in order, then the buffered records."""
        if self._group_sync_pending and not self.stopped:
            self._group_sync_pending = False
            self.sync_group_offset()
        while self._events and not self.stopped and self.pending is None:
            ev = self._events.popleft()
            if ev.type is EventType.START_COMMIT:
                self._start_commit(ev)
            elif ev.type is EventType.END_COMMIT:
                self._end_commit(ev)
            elif ev.type is EventType.ACK_COMMIT:
                self._ack_commit(ev)
        self._write_records()
        if self.prefetch_bytes and not self.stopped:
            full = self._buffered_bytes >= self.prefetch_bytes
            if full != self._paused:
                self._pause(full)

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    @property
    def buffered_bytes(self) -> int:
        """The bytes of the record values buffered since the buffer was last empty, plus
        :data:`RECORD_OVERHEAD_BYTES` a record."""
        return self._buffered_bytes

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
        self._pause(False)
        self.txn = TransactionInfo(ev.commit_time, ev.txn, self.committed_offset, target=ev.targets.get(self.partition))
        while self._buffer and self._buffer[0][0] < self.committed_offset:
            self._buffer.popleft()
        self._drained()
        if self._buffer and self._buffer[0][0] == self.committed_offset:
            pass
        elif not self._buffer and self._position == self.committed_offset:
            # the consumer is there: its next record is the first at or after that offset, so a
            # gap before it is real (a transaction marker, compaction), as right after a seek
            self._want_seek, self._sought = None, self.committed_offset
        else:
            self._seek(self.committed_offset)
        if self.committed_offset > (self.kafka_committed or 0):
            self.sync_group_offset()

    def _seek(self, offset: int) -> None:
        self._clear_buffer()
        if self.context.seek(offset) is False:
            self._want_seek, self._sought = offset, None
        else:
            self._want_seek, self._sought, self._position = None, offset, offset

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
        if txn.initiated:
            return   # it caught up with its target and reported already
        self._end_transaction(txn)

    def _end_transaction(self, txn: TransactionInfo) -> None:
        """Stop taking records into ``txn`` and write them (or leave the write to the worker)."""
        if not self.prefetch_bytes:
            self._pause(True)
        txn.initiated = True
        self._decode(txn)
        self._collect_decoded(txn)
        self.pending = txn
        if self.defer_writes:
            return    # the worker writes, then calls complete_write
        stats: list[dict[str, Any]] = []
        schema: str | None = None
        error: str | None = None
        try:
            if txn.rows:
                stats, schema = self.writer(txn.txn or {"instant": txn.commit_time}, txn.rows)
        except Exception as e:  # noqa: BLE001 - reported: the coordinator aborts the round
            log.exception("partition %s could not write its batch for %s", self.partition, txn.commit_time)
            error = f"{type(e).__name__}: {e}"
        self.complete_write(stats, schema, error)

    def complete_write(self, stats: list[dict[str, Any]], schema: str | None, error: str | None) -> None:
        """Publish the WRITE_STATUS of the ended transaction (:attr:`pending`): the write's stats
        and schema, or its error.  With ``defer_writes`` the worker calls it once it wrote the
        records of every participant of the instant (all stats go with one participant's status)."""
        txn = self.pending
        if txn is None:
            return
        self.pending = None
        self.publish(ControlEvent(EventType.WRITE_STATUS, self.topic, group=self.group,
                                  sender=EntityType.PARTICIPANT, sender_partition=self.partition,
                                  receiver=EntityType.COORDINATOR, receiver_partition=0,
                                  commit_time=txn.commit_time, kafka_offset=txn.expected_offset,
                                  stats=stats, schema=schema, records=0 if error else len(txn.rows),
                                  error_records=txn.error_records, write_error=error, caught_up=txn.caught_up))
        if not error:
            self.records_written += len(txn.rows)
            self.written_offset = txn.expected_offset
        txn.rows = RoundRows()

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
        buf = self._buffer
        offsets: list[int] | range
        values: list[Any]
        end = txn.target if txn.target is not None else float("inf")
        if buf and buf[0][0] == txn.expected_offset and buf[-1][0] - buf[0][0] + 1 == len(buf) \
                and buf[-1][0] < end:
            # the usual case: the buffer holds exactly the next offsets (a partition's records come
            # in offset order): take them all
            offsets = range(buf[0][0], buf[0][0] + len(buf))
            values = [v for _, v in buf]
            self._clear_buffer()
            self._sought = None
            txn.expected_offset = offsets[-1] + 1
        else:
            offsets, values = [], []
            while buf and buf[0][0] < end:
                offset, value = buf[0]
                if offset < txn.expected_offset:
                    buf.popleft()                 # already written or committed
                    continue
                if offset > txn.expected_offset and self._sought != txn.expected_offset:
                    self._seek(txn.expected_offset)   # a gap: read again from the expected offset
                    break
                buf.popleft()                     # offset == expected, or a real gap right after a seek
                self._sought = None
                offsets.append(offset)
                values.append(value)
                txn.expected_offset = offset + 1
            self._drained()
        if values:
            txn.taken += len(values)
            txn.undecoded.append((offsets, values))
            txn.undecoded_bytes += _size_of(values)
            if txn.undecoded_bytes >= self.decode_chunk_bytes:
                self._decode(txn)
        if txn.target is not None and txn.expected_offset >= txn.target and not self.stopped:
            txn.caught_up = True
            self._end_transaction(txn)

    def _decode(self, txn: TransactionInfo) -> None:
        """Decode the records taken into ``txn`` so far, as one batch: on the decode pool when
        there is one (Arrow's JSON reader leaves the lock to the thread that reads from Kafka)."""
        runs = txn.undecoded
        if not runs:
            return
        txn.undecoded, txn.undecoded_bytes = [], 0
        values = runs[0][1] if len(runs) == 1 else [v for _, vs in runs for v in vs]
        pending = self.decode_pool.submit(self.decode_batch, values) if self.decode_pool else self.decode_batch(values)
        txn.decoding.append((runs, pending))

    def _collect_decoded(self, txn: TransactionInfo) -> None:
        """Take the decoded chunks into ``txn.rows`` in offset order, and count its error records
        (Hudi: allow.commit.on.errors)."""
        for runs, pending in txn.decoding:
            batch: DecodedBatch = pending if isinstance(pending, DecodedBatch) else pending.result()
            txn.rows.add(batch)
            for i, e in batch.errors:
                txn.error_records += 1
                self.error_records += 1
                log.warning("partition %s offset %s: cannot decode the record: %s", self.partition,
                            _offset_at(runs, i), e)
        txn.decoding = []

    # -- status -------------------------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        t = self.txn
        return {"partition": self.partition, "committed": self.committed_offset,
                "kafka_committed": self.kafka_committed,
                "position": t.expected_offset if t else None, "last_consumed": self.last_consumed,
                "written": self.written_offset,
                "transaction": t.commit_time if t else None, "buffered": len(self._buffer),
                "buffered_bytes": self._buffered_bytes,
                "pending_rows": t.taken if t else 0, "records_written": self.records_written,
                "error_records": self.error_records}


def _offset_at(runs: list[tuple[Sequence[int], list[Any]]], i: int) -> int:
    """The offset of the ``i``-th record of these runs."""
    for offsets, _ in runs:
        if i < len(offsets):
            return offsets[i]
        i -= len(offsets)
    raise IndexError(i)


def _size_of(values: list[Any]) -> int:
    try:
        n = sum(map(len, values))
    except TypeError:      # a tombstone (None), or rows handed over as they are
        n = sum(len(v) for v in values if isinstance(v, (bytes, bytearray)))
    return n + RECORD_OVERHEAD_BYTES * len(values)

"""``lakesdk kafka-sink``: run the exactly-once Kafka sink into an existing merge-on-read table.

    lakesdk kafka-sink --table URL --topic T --bootstrap HOST:PORT [--workers N|auto] [--format json|avro]
                       [--avro-schema FILE] [--commit-interval SECONDS] [--no-catch-up] [--write-timeout SECONDS]
                       [--group G] [--control-topic C] [--instance-id ID] [--status-every SECONDS]
                       [--concurrency optimistic --lock storage|zookeeper [--lock-option KEY=VALUE ...]]

With ``--workers N`` (N > 1) it starts N worker processes that share the consumer group and
waits for them (``--workers auto``, the default: one per two usable cores, at most one per
partition of the topic; one on two cores); SIGTERM or Ctrl-C stops them (an open round is rolled back).  The table's
record key, ordering and partition fields decide how records are written.
"""

from __future__ import annotations

import argparse
import logging
import signal
import subprocess
import sys
import threading
import time
from typing import Any, Sequence

__all__ = ["add_arguments", "run", "main"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--table", required=True, help="URL or path of an existing merge-on-read table")
    p.add_argument("--topic", required=True, help="the data topic")
    p.add_argument("--bootstrap", required=True, help="Kafka bootstrap servers, HOST:PORT[,HOST:PORT]")
    p.add_argument("--workers", type=_workers, default="auto",
                   help="worker processes sharing the consumer group, or auto (the default): one per two cores "
                        "this process may use, at most one per partition of the topic")
    p.add_argument("--format", choices=["json", "avro"], default="json", help="record format (default json)")
    p.add_argument("--avro-schema", default=None, help="the writer's Avro schema (.avsc file) for --format avro")
    p.add_argument("--avro-framing", choices=["none", "confluent"], default="none",
                   help="confluent: values carry the magic byte and schema id first")
    p.add_argument("--commit-interval", type=float, default=60.0,
                   help="seconds from START_COMMIT to END_COMMIT, and at least from one START_COMMIT to the next")
    p.add_argument("--no-catch-up", action="store_true",
                   help="every round lasts --commit-interval (Hudi's Kafka Connect sink); by default a round ends "
                        "once it has read what its partitions held when it started")
    p.add_argument("--write-timeout", type=float, default=300.0,
                   help="seconds to wait for every partition's write status before aborting the round")
    p.add_argument("--group", default=None, help="consumer group (default lakesdk-sink-<topic>)")
    p.add_argument("--control-topic", default=None, help="control topic (default lakesdk-control-topic)")
    p.add_argument("--instance-id", default=None,
                   help="Kafka group.instance.id (static membership): a worker restarted with the same id takes "
                        "over its partitions at once; with --workers N each worker gets ID-0..ID-N-1")
    p.add_argument("--session-timeout-ms", type=int, default=10000, help="consumer group session timeout")
    p.add_argument("--max-poll-interval-ms", type=int, default=300000,
                   help="consumer max.poll.interval.ms, also the rebalance timeout (default 300000)")
    p.add_argument("--concurrency", choices=["single_writer", "optimistic"], default=None,
                   help="optimistic: write beside other writers and table services (with their --lock)")
    p.add_argument("--lock", choices=["in_process", "storage", "zookeeper"], default=None,
                   help="the lock that guards commits (with --concurrency optimistic)")
    p.add_argument("--lock-option", action="append", default=[], metavar="KEY=VALUE", type=_lock_option,
                   help="a lock option, e.g. timeout_s=300 or zk_connect=HOST:PORT (repeatable; JSON values "
                        "such as numbers are parsed)")
    p.add_argument("--prefetch-bytes", type=int, default=None,
                   help="bytes of record values each partition reads ahead of its next round (default 8 MiB; "
                        "0: pause between rounds, as Hudi does)")
    p.add_argument("--no-allow-commit-on-errors", action="store_true",
                   help="abort a round in which some records could not be decoded")
    p.add_argument("--status-every", type=float, default=0.0, help="print the status every N seconds (0: never)")
    p.add_argument("--log-level", default="WARNING")


def _config(args: argparse.Namespace) -> Any:
    from lakesdk.streaming.kafka.config import DEFAULT_CONTROL_TOPIC, DEFAULT_PREFETCH_BYTES, SinkConfig
    return SinkConfig(table_url=args.table, topic=args.topic, bootstrap=args.bootstrap, group=args.group,
                      control_topic=args.control_topic or DEFAULT_CONTROL_TOPIC,
                      commit_interval=args.commit_interval, write_timeout=args.write_timeout, format=args.format,
                      avro_schema=args.avro_schema, avro_framing=args.avro_framing,
                      allow_commit_on_errors=not args.no_allow_commit_on_errors, catch_up=not args.no_catch_up,
                      instance_id=args.instance_id, session_timeout_ms=args.session_timeout_ms,
                      prefetch_bytes=DEFAULT_PREFETCH_BYTES if args.prefetch_bytes is None else args.prefetch_bytes,
                      max_poll_interval_ms=args.max_poll_interval_ms, concurrency=args.concurrency, lock=args.lock,
                      lock_options=tuple(sorted(dict(args.lock_option).items())))


def _lock_option(pair: str) -> tuple[str, Any]:
    """One ``KEY=VALUE``; a value that is JSON (a number, true, ...) is parsed, else kept as text.

    >>> _lock_option("timeout_s=300"), _lock_option("zk_connect=127.0.0.1:2181")
    (('timeout_s', 300), ('zk_connect', '127.0.0.1:2181'))
    """
    import json
    key, sep, raw = pair.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, found {pair!r}")
    try:
        return key, json.loads(raw)
    except ValueError:
        return key, raw


def _workers(text: str) -> int | str:
    if text == "auto":
        return text
    n = int(text)
    if n < 1:
        raise argparse.ArgumentTypeError(f"--workers must be auto or at least 1, not {n}")
    return n


def auto_workers(cores: int, partitions: int | None) -> int:
    """``--workers auto``: a worker reads and writes on one thread and decodes on another, so one
    worker per two cores, and no more workers than the topic has partitions (the others would
    hold none); 1 when the partitions are unknown."""
    return max(1, min(cores // 2, partitions or 1))


def _usable_cores() -> int:
    import os
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _topic_partitions(bootstrap: str, topic: str) -> int | None:
    try:
        from confluent_kafka.admin import AdminClient
        md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=5)
        t = md.topics.get(topic)
        return len(t.partitions) if t is not None and t.error is None else None
    except Exception:  # noqa: BLE001 - unknown: one worker
        return None


def _child_argv(argv: Sequence[str], index: int = 0, instance_id: str | None = None) -> list[str]:
    out: list[str] = []
    skip = False
    for a in argv:
        if skip:
            skip = False
            continue
        if a in ("--workers", "--instance-id"):
            skip = True
            continue
        if a.startswith(("--workers=", "--instance-id=")):
            continue
        out.append(a)
    tail = ["--instance-id", f"{instance_id}-{index}"] if instance_id else []
    return [sys.executable, "-m", "lakesdk.cli.kafka", *out, "--workers", "1", *tail]


def run(args: argparse.Namespace, argv: Sequence[str]) -> int:
    logging.basicConfig(level=getattr(logging, str(args.log_level).upper(), logging.WARNING),
                        format="%(asctime)s %(process)d %(name)s %(levelname)s %(message)s")
    from lakesdk.exceptions import LakeError
    from lakesdk.streaming.kafka.worker import open_sink_table, require_kafka
    cfg = _config(args)
    try:
        require_kafka()
        open_sink_table(cfg)
    except LakeError as e:
        print(f"lakesdk kafka-sink: {e}", file=sys.stderr)
        return 2
    stop = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        stop.set()
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    if args.workers == "auto":
        cores = _usable_cores()
        # under four cores one worker, without asking the broker for the partition count
        args.workers = auto_workers(cores, _topic_partitions(cfg.bootstrap, cfg.topic) if cores >= 4 else None)
    if args.workers > 1:
        procs = [subprocess.Popen(_child_argv(argv, i, args.instance_id)) for i in range(args.workers)]
        print(f"lakesdk kafka-sink: {args.workers} workers {[p.pid for p in procs]} on {cfg.topic!r} -> {cfg.table_url}",
              file=sys.stderr, flush=True)
        while not stop.is_set() and any(p.poll() is None for p in procs):
            stop.wait(0.5)
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        return max((p.wait() for p in procs), default=0)
    from lakesdk.streaming.kafka.status import merge_snapshots
    from lakesdk.streaming.kafka.worker import SinkWorker
    w = SinkWorker(cfg)
    t = threading.Thread(target=w.run, args=(stop,), name="lakesdk-kafka-sink", daemon=True)
    t.start()
    print(f"lakesdk kafka-sink: worker {w.name} on {cfg.topic!r} -> {cfg.table_url}", file=sys.stderr, flush=True)
    last = time.monotonic()
    while t.is_alive():
        t.join(0.5)
        if args.status_every and time.monotonic() - last >= args.status_every:
            last = time.monotonic()
            print(repr(merge_snapshots(cfg.topic, [w.snapshot()], [])), file=sys.stderr, flush=True)
    if w.error is not None:
        print(f"lakesdk kafka-sink: {type(w.error).__name__}: {w.error}", file=sys.stderr)
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    p = argparse.ArgumentParser(prog="lakesdk kafka-sink", description=__doc__.split("\n")[0])
    add_arguments(p)
    return run(p.parse_args(argv), argv)


if __name__ == "__main__":
    raise SystemExit(main())

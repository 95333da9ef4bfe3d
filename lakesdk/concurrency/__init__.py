"""Concurrency control for writers: heartbeats (:mod:`lakesdk.concurrency.heartbeat`)."""

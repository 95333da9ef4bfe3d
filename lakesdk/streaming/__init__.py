"""Streaming ingestion into Hudi tables (the exactly-once Kafka sink lives in :mod:`lakesdk.streaming.kafka`)."""

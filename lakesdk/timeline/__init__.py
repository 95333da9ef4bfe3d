"""The timeline on storage: :class:`~lakesdk.timeline.store.TimelineStore` reads and writes the
active timeline's files, :class:`~lakesdk.timeline.history.LSMTimeline` the timeline history.
The grammar of both (names, contents) is pure and lives in :mod:`lakesdk.format`."""

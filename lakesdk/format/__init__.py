"""The Hudi on-disk grammar: pure, deterministic, and free of pyspark.

The records of the timeline's files have one module per action: a write's completed file
(commit, delta commit, replace commit) is :mod:`~lakesdk.format.commit_metadata`; the plans
and metadata of the table services are :mod:`~lakesdk.format.compaction_plan` (compaction
and log compaction), :mod:`~lakesdk.format.clustering_plan`,
:mod:`~lakesdk.format.clean_metadata`, :mod:`~lakesdk.format.rollback_metadata`,
:mod:`~lakesdk.format.savepoint_metadata` and :mod:`~lakesdk.format.restore_metadata`, each
holding the plan (requested file) and the metadata (completed file) of its action.
:mod:`~lakesdk.format.avro_file` reads and writes their Avro container files.
"""

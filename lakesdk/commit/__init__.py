"""The commit layer: a table's context and the resources its writes start
(:mod:`lakesdk.commit.context`), the schema a commit records (:mod:`lakesdk.commit.schema_store`)
and what a write reports (:mod:`lakesdk.commit.results`).  Services and the handles build on it."""

"""The Hudi on-disk grammar: pure, deterministic, and free of pyspark."""

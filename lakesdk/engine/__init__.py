"""The data plane.

``lakesdk.engine.tasks`` holds the engine-agnostic write and read tasks (pure Arrow and
storage).  ``lakesdk.engine.spark`` runs them as Spark jobs; ``lakesdk.engine.session``
bootstraps Spark.  Importing this package does not import pyspark.
"""

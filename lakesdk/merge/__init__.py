"""Record mergers: pure Arrow, used by writers and readers alike."""

from lakesdk.merge.ordering import MergeCounts, combine_batch, merge_into_base

__all__ = ["MergeCounts", "merge_into_base", "combine_batch"]

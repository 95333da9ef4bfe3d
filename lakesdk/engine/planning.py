"""Driver-side planning shared by the engines: where inserts go."""

from __future__ import annotations

import math

from lakesdk.format.file_naming import new_file_id

__all__ = ["plan_insert_buckets"]


def plan_insert_buckets(insert_counts: dict[str, int], small_files: dict[str, list[tuple[str, int]]],
                        *, target_bytes: int, small_limit: int, record_size: int) -> dict[str, list[tuple[str, float]]]:
    """Per partition: [(file id, weight)] where weights sum to 1.

    Small files (base size below ``small_limit``) are filled first, up to the target file
    size; the rest go to new file groups of ``target_bytes / record_size`` records each.
    """
    per_file = max(1, target_bytes // max(1, record_size))
    out: dict[str, list[tuple[str, float]]] = {}
    for part, n in insert_counts.items():
        if n <= 0:
            continue
        left = n
        buckets: list[tuple[str, int]] = []
        for fid, size in sorted(small_files.get(part, []), key=lambda x: x[1]):
            if size >= small_limit or left <= 0:
                continue
            cap = max(0, (target_bytes - size) // max(1, record_size))
            take = min(cap, left)
            if take > 0:
                buckets.append((fid, take))
                left -= take
        if left > 0:
            k = math.ceil(left / per_file)
            share = left / k
            buckets.extend((new_file_id(), share) for _ in range(k))  # type: ignore[misc]
        out[part] = [(fid, c / n) for fid, c in buckets]
    return out

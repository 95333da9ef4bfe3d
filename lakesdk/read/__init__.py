"""Read planning: file-system views as of an instant, pruning, predicates."""

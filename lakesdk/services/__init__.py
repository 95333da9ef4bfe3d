"""Table services: plan (a requested instant) -> execute -> commit."""

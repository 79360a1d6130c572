"""Test helper: run a worker in several threads at once and fail on what they report."""

from __future__ import annotations

import threading
from collections.abc import Callable


def run_concurrently(worker: Callable[[int], None], count: int, errors: list[str], timeout: float = 300) -> None:
    """Runs worker(0) .. worker(count - 1) in threads at once; fails if one hangs or if
    `errors` (which the workers append to) is not empty afterwards."""
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=timeout)
    assert not any(t.is_alive() for t in threads), "a thread did not finish"
    assert not errors, "; ".join(errors[:5])

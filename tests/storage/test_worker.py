"""persistence.Worker: the one background thread of the store's and the domain's work."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import pytest

from persistence import Worker
from persistence.worker import backoff

log = logging.getLogger("tests.worker")


def _until(condition: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.005)
    return condition()


def test_backoff_doubles_up_to_the_longest() -> None:
    assert [backoff((0.5, 3.0), n) for n in range(1, 6)] == [0.5, 1.0, 2.0, 3.0, 3.0]


def test_notify_runs_the_job_and_stop_ends_the_thread() -> None:
    runs: list[int] = []
    worker = Worker("tests worker", lambda: runs.append(1), logger=log, what="test work")
    worker.start()
    assert worker.running
    worker.notify()
    assert _until(lambda: len(runs) == 1)
    assert worker.stop() and not worker.running and not worker.started
    assert [t for t in threading.enumerate() if t.name == "tests worker"] == []


def test_failures_are_logged_counted_and_retried_after_a_doubling_pause(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="tests.worker")
    calls: list[float] = []
    seen: list[Exception] = []

    def job() -> None:
        calls.append(time.monotonic())
        if len(calls) <= 3:
            raise RuntimeError(f"broken {len(calls)}")

    worker = Worker(
        "tests worker", job, logger=log, what="test work",
        retry=lambda: (0.02, 0.05), on_failure=seen.append,
    )  # fmt: skip
    worker.start()
    worker.notify()
    assert _until(lambda: len(calls) == 4)
    worker.stop()
    assert worker.errors == 3 and worker.failures == 0 and len(seen) == 3
    gaps = [b - a for a, b in zip(calls, calls[1:], strict=False)]
    assert gaps[0] >= 0.02 and gaps[1] >= 0.04 and gaps[2] >= 0.05
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert ["broken" in r.getMessage() and r.exc_info is not None for r in errors] == [True] * 3
    assert any("works again after 3 failure(s)" in r.getMessage() for r in caplog.records)


def test_max_failures_in_a_row_end_the_worker(caplog: pytest.LogCaptureFixture) -> None:
    def job() -> None:
        raise RuntimeError("always")

    worker = Worker("tests worker", job, logger=log, what="test work", max_failures=2)
    worker.start()
    worker.notify()
    assert _until(lambda: worker.failures == 1)
    worker.notify()  # no retry pause: the next wake tries again
    assert _until(lambda: not worker.running)
    assert worker.failures == 2 and worker.stopping
    assert any("stopped after 2 failures" in r.getMessage() for r in caplog.records)
    worker.start()  # a worker that gave up starts again
    assert worker.running and worker.failures == 0
    worker.stop()


def test_busy_is_no_failure_and_stop_waits_at_most_its_bound() -> None:
    class Busy(Exception):
        pass

    release = threading.Event()
    calls: list[int] = []

    def job() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise Busy
        release.wait(10)

    worker = Worker("tests worker", job, logger=log, what="test work", busy=(Busy,), busy_s=0.01)
    worker.start()
    worker.notify()
    assert _until(lambda: len(calls) == 2)  # tried again after the busy pause, unasked
    assert worker.errors == 0
    assert not worker.stop(timeout=0.05)  # the job under way holds it
    release.set()

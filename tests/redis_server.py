"""A real redis-server on a free loopback port, for every test that needs Redis (fixture `redis_server` in
tests/conftest.py; `running_redis` for fixtures of a wider scope). Skips when redis-server is not installed
(`make test` and `.ci/run` install it where they can: .ci/system-packages.sh)."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from deliberate.cli.local_redis import LocalRedis


@contextlib.contextmanager
def running_redis(data_dir: Path) -> Iterator[LocalRedis]:
    """A started redis-server, stopped at exit even when the test stopped or restarted it meanwhile."""
    skip_without_redis()
    server = LocalRedis(data_dir).start()
    try:
        yield server
    finally:
        server.stop()


def skip_without_redis() -> None:
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server)")

"""The reference store: a Redis server holding the reference data rule packs read (the ad-selection pack's
catalog, a category table, …), so every Verifier replica checks against the same data and it can change
without a release.

Each lookup has a timeout and no retry after one (a dropped connection, as after a Redis restart, is retried
once, at once), so a verification waits about `timeout_s` at most per lookup. Any failure — Redis down, slow
or a key missing — is `ReferenceUnavailable` naming the store, which the check that needed the data reports
as a failed rule.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from .packs import ReferenceUnavailable


class ReferenceStore:
    def __init__(self, url: str, timeout_s: float):
        self.url = url
        self.timeout_s = timeout_s
        self.client = redis.Redis.from_url(
            url,
            socket_timeout=timeout_s,
            socket_connect_timeout=timeout_s,
            # redis-py's default retries 10 times, timeouts included: far past the timeout.
            retry=Retry(NoBackoff(), 1, supported_errors=(redis.ConnectionError,)),
        )

    @property
    def name(self) -> str:
        return store_name(self.url)

    def get(self, key: str) -> bytes | None:
        return self._lookup(f"GET {key}", lambda: self.client.get(key))

    def hgetall(self, key: str) -> dict[bytes, bytes]:
        return self._lookup(f"HGETALL {key}", lambda: self.client.hgetall(key))

    def missing(self, key: str, hint: str) -> ReferenceUnavailable:
        return ReferenceUnavailable(f"{self.name}: key {key} is missing; {hint}")

    def _lookup(self, what: str, operation):
        try:
            return operation()
        except redis.RedisError as error:
            waited = f" (timeout {self.timeout_s:g} s)" if isinstance(error, redis.TimeoutError) else ""
            raise ReferenceUnavailable(f"{self.name}: {what} failed: {type(error).__name__}: {error}{waited}") from None

    def close(self) -> None:
        self.client.close()


def store_name(url: str) -> str:
    """`Redis at redis://host:port/db`, without the password."""
    parts = urlsplit(url)
    address = parts.hostname or parts.path
    if parts.port:
        address += f":{parts.port}"
    return f"Redis at {parts.scheme}://{address}{parts.path if parts.hostname else ''}"

"""The local redis-server behind `deliberate up --state redis` and the Redis tests: a real one, on loopback."""

from __future__ import annotations

import pytest
import redis

from deliberate.cli.local_redis import LocalRedis
from deliberate.cli.stack import Stack
from tests.redis_server import skip_without_redis


def test_data_survives_a_stop_and_start_on_the_same_directory(redis_server):
    redis.Redis.from_url(redis_server.url).set("weights", "kept")
    assert redis_server.stop() == 0  # SIGTERM: a clean exit that flushes the append-only file
    assert not redis_server.answers_ping()
    redis_server.start()
    assert redis.Redis.from_url(redis_server.url).get("weights") == b"kept"


def test_a_missing_redis_server_says_how_to_install_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="apt-get install redis-server"):
        LocalRedis(tmp_path, executable="no-such-redis-server").start()


def test_a_port_in_use_fails_with_the_servers_own_words(redis_server, tmp_path):
    with pytest.raises(RuntimeError, match=f"redis-server on port {redis_server.port} did not start: .*"):
        LocalRedis(tmp_path / "second", port=redis_server.port).start(timeout_s=5)


def test_stack_with_redis_state_starts_one_and_points_the_scheduler_at_it(tmp_path):
    skip_without_redis()
    stack = Stack(state="redis", state_dir=tmp_path)
    stack.start_state_store()
    try:
        assert stack.redis.answers_ping() and stack.redis.data_dir == tmp_path / "redis"
        command = stack.command("scheduler")
        assert command[command.index("--state-url") + 1] == stack.redis.url
    finally:
        assert stack.down() == {"redis": 0}
    assert not stack.redis.answers_ping()


def test_stack_keeps_a_redis_it_was_given_and_refuses_an_unknown_state(redis_server, tmp_path):
    stack = Stack(state="redis", redis=redis_server, state_dir=tmp_path)
    stack.start_state_store()
    assert stack.down() == {} and redis_server.answers_ping()
    assert "--state-url" not in Stack(state_dir=tmp_path).command("scheduler")
    with pytest.raises(ValueError, match="state must be file or redis"):
        Stack(state="etcd").start_state_store()

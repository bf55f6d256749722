"""Engines are plugins: found under the `deliberate.engines` entry points, imported only once chosen, each given
its own settings; `Engine.generate` is the template every engine's `decode` runs in."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from importlib.metadata import EntryPoint

import pytest

from deliberate import engines
from deliberate.core.config import parse_settings
from deliberate.drafter.settings import DrafterSettings
from deliberate.engines import Engine, SamplingParams, TextDelta, load_engine
from deliberate.engines.base import Batch, Completion
from deliberate.engines.remote_engine import RemoteEngine, RemoteSettings


class EchoEngine(Engine):
    """A third-party engine: echoes each prompt back as two deltas, one decoding step each."""

    name = "echo"
    settings_class = RemoteSettings  # any settings class: the loader hands over the part it declares
    loaded_with: tuple = ()

    @classmethod
    def from_settings(cls, model: str, threads: int, settings: RemoteSettings) -> EchoEngine:
        engine = cls()
        engine.loaded_with = (model, threads, settings)
        return engine

    def format_chat(self, system: str, user: str) -> str:
        return f"{system}|{user}"

    def decode(self, batch: Batch) -> list[Completion]:
        completions = []
        for index, prompt in enumerate(batch.prompts):
            half = len(prompt) // 2
            for piece in (prompt[:half], prompt[half:]):
                batch.emit(TextDelta(index, piece))
                batch.step_times.append(batch.started + len(batch.step_times))  # one "second" a step
            completion = Completion(index, prompt, 1, 2, "stop", 0.0)
            batch.emit(completion)
            completions.append(completion)
        return completions


@pytest.fixture
def with_echo(monkeypatch):
    """The installed engines plus EchoEngine, as if a user's package declared it."""
    installed = dict(engines.installed_engines())
    installed["echo"] = EntryPoint("echo", f"{__name__}:EchoEngine", engines.ENTRY_POINT_GROUP)
    monkeypatch.setattr(engines, "installed_engines", lambda: installed)
    return installed


def test_the_five_engines_are_installed_under_the_entry_point_group():
    assert set(engines.ENGINES) == {"llamacpp", "transformers", "vllm", "remote", "recorded"}
    assert engines.engine_class("remote") is RemoteEngine


def test_listing_the_engines_and_loading_one_imports_no_other_engine(tmp_path):
    recorded = tmp_path / "drafts.jsonl"
    recorded.write_text(json.dumps({"question": "q", "strategy": "s", "text": "t"}) + "\n")
    script = f"""
import json, sys
from deliberate.engines import ENGINES, load_engine
import deliberate.drafter.settings
before = sorted(m for m in sys.modules if m.endswith("_engine") or m in ("torch", "vllm", "xllamacpp"))
load_engine("recorded", {str(recorded)!r})
after = sorted(m for m in sys.modules if m.endswith("_engine") or m in ("torch", "vllm", "xllamacpp"))
print(json.dumps([list(ENGINES), before, after]))
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    listed, before, after = json.loads(out)
    assert len(listed) == 5
    assert before == ["deliberate.engines.remote_engine"]  # its settings class is composed into the services'
    assert after == ["deliberate.engines.recorded_engine", "deliberate.engines.remote_engine"]


def test_an_unknown_engine_is_refused_naming_the_installed_ones():
    with pytest.raises(ValueError, match=r"unknown engine 'nope'; installed engines: .*llamacpp.*recorded"):
        load_engine("nope")


def test_an_entry_point_that_is_no_engine_is_refused(monkeypatch):
    not_an_engine = EntryPoint("broken", "deliberate.engines.base:Batch", engines.ENTRY_POINT_GROUP)
    monkeypatch.setattr(engines, "installed_engines", lambda: {"broken": not_an_engine})
    with pytest.raises(TypeError, match="no Engine subclass"):
        engines.engine_class("broken")


def test_a_users_engine_loads_by_name_with_its_own_part_of_the_service_settings(with_echo, monkeypatch):
    monkeypatch.setenv("DELIBERATE_REMOTE_URL", "http://env:8000/v1")
    settings = parse_settings(DrafterSettings, ["--engine", "echo", "--remote-retries", "5", "--engine-threads", "2"])
    engine = load_engine(settings.engine, "a-model", settings.engine_threads, settings)
    model, threads, own = engine.loaded_with
    assert (type(engine), model, threads) == (EchoEngine, "a-model", 2)
    assert type(own) is RemoteSettings  # only what the engine declared, not the Drafter's settings
    assert (own.remote_url, own.remote_retries) == ("http://env:8000/v1", 5)
    defaults = load_engine("echo").loaded_with[2]
    assert defaults == RemoteSettings()


class EchoSettings(RemoteSettings):
    echo_suffix: str = "!"  # a field no service declares


def test_a_users_engine_reads_settings_the_service_lacks_from_the_environment(with_echo, monkeypatch):
    monkeypatch.setattr(EchoEngine, "settings_class", EchoSettings)
    monkeypatch.setenv("DELIBERATE_ECHO_SUFFIX", "?")
    settings = parse_settings(DrafterSettings, ["--engine", "echo", "--remote-retries", "4"])
    own = load_engine(settings.engine, "m", 1, settings).loaded_with[2]
    assert type(own) is EchoSettings and (own.echo_suffix, own.remote_retries) == ("?", 4)


def test_the_remote_engine_wants_its_url():
    with pytest.raises(ValueError, match="--remote-url / DELIBERATE_REMOTE_URL"):
        load_engine("remote")


def test_generate_opens_and_closes_every_engines_batch(with_echo):
    engine = load_engine("echo")
    events = []
    assert engine.generate([], SamplingParams(), events.append, threading.Event()) == []
    assert engine.tokens_per_second is None and events == []

    completions = engine.generate(["abcd", "xy"], SamplingParams(seed=7), events.append, threading.Event())
    assert [c.text for c in completions] == ["abcd", "xy"]
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["ab", "cd", "x", "y"]
    assert engine.tokens_per_second == pytest.approx(1.0)  # 4 steps, one "second" apart


def test_generate_hands_decode_the_seeds_and_a_serialized_sink(with_echo, monkeypatch):
    engine = load_engine("echo")
    seen: list[Batch] = []
    monkeypatch.setattr(engine, "decode", lambda batch: seen.append(batch) or [])
    sink = []
    engine.generate(["a", "b", "c"], SamplingParams(seed=10), sink.append, threading.Event(), output_schema={})
    (batch,) = seen
    assert batch.seeds == [10, 11, 12] and batch.output_schema == {}
    assert batch.emit is not sink.append  # behind a lock: engines emitting from several threads stay safe

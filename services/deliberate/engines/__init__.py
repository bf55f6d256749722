"""LLM engines behind one interface (`interface.py`), installed as plugins: `load_engine` picks one by name.

Engines are found under the `deliberate.engines` entry-point group (`name = module:EngineClass`, pyproject.toml),
as rule packs are under `deliberate.rule_packs`; a user's package declares its own the same way. Listing them
imports no engine: an engine's module (and with it torch, vLLM or llama.cpp) is imported only once that engine is
chosen — except `remote_engine`, light, whose settings every engine-backed service composes (`settings.py`).
"""

from __future__ import annotations

import os
from functools import cache
from importlib.metadata import EntryPoint, entry_points
from typing import TYPE_CHECKING

from ..core.config import env_name
from .base import Completion, Engine, GenerationEvent, SamplingParams, TextDelta

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = [
    "ENGINES",
    "Completion",
    "Engine",
    "GenerationEvent",
    "SamplingParams",
    "TextDelta",
    "engine_class",
    "installed_engines",
    "load_engine",
]

ENTRY_POINT_GROUP = "deliberate.engines"


@cache
def installed_engines() -> dict[str, EntryPoint]:
    """The engines installed under the entry-point group, by name, none of them imported."""
    return {entry.name: entry for entry in entry_points(group=ENTRY_POINT_GROUP)}


def __getattr__(name: str) -> tuple[str, ...]:
    if name == "ENGINES":  # the installed engines' names, read on first use (it reads every package's metadata)
        return tuple(installed_engines())
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def engine_class(name: str) -> type[Engine]:
    """The Engine subclass installed as `name`, its module imported now."""
    installed = installed_engines()
    if name not in installed:
        available = ", ".join(installed) or "none (is deliberate installed? `make install` registers them)"
        raise ValueError(f"unknown engine {name!r}; installed engines: {available}")
    loaded = installed[name].load()
    if not (isinstance(loaded, type) and issubclass(loaded, Engine)):
        raise TypeError(f"engine {name!r} ({installed[name].value}) is no Engine subclass")
    return loaded


def load_engine(name: str, model: str = "embedded", threads: int = 0, settings: BaseModel | None = None) -> Engine:
    """Builds the engine `name` (one of the installed engines) on `model` (an embedded model's name or a local path).

    llamacpp runs GGUF files; transformers GGUF or HF-format directories (the `transformers` extra);
    vllm needs an HF-format model directory (see `deliberate.engines.vllm_engine`). `threads` (CPU engines):
    0 means every CPU the process may use. remote talks to the OpenAI-compatible server its settings name
    (`deliberate.engines.remote_engine`); `model` is unused then. recorded generates nothing: it answers the drafts
    recorded in the JSONL file `model` (tests and replays; `deliberate.engines.recorded_engine`).
    `settings`: the service's settings (EngineSettings), which hold each engine's own; None: the engine's defaults.
    """
    chosen = engine_class(name)
    return chosen.from_settings(model, threads, own_settings(chosen, settings))


def own_settings(chosen: type[Engine], settings: BaseModel | None) -> BaseModel | None:
    """The engine's own settings (its `settings_class`; its defaults without `settings`): each field the service's
    settings declare, and a plugin's fields the service does not know from their DELIBERATE_* variables (the
    service's flags cannot name them)."""
    if chosen.settings_class is None:
        return None
    if settings is None:
        return chosen.settings_class()
    values = {}
    for name in chosen.settings_class.model_fields:
        if hasattr(settings, name):
            values[name] = getattr(settings, name)
        elif (raw := os.environ.get(env_name(name))) is not None:
            values[name] = raw
    return chosen.settings_class.model_validate(values)

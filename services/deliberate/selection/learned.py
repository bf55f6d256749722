"""The learned selection policy's weights: a logistic regression of "this valid draft's answer is right" on the
selection signals, fitted on labelled drafts by `make learned-policy` (`deliberate bench fit-policy`) and shipped
as a small versioned file beside this module (`learned_policy.json`: the weights, the training command, the runs
file it was fitted on with its SHA-256, how many problems and drafts).

The `learned` policy ranks like `weighted` with these weights. They are fixed per release; the online feedback
learner keeps updating the `weighted` policy's weights as before.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

ARTEFACT = Path(__file__).with_name("learned_policy.json")
SCHEMA_VERSION = 1


@dataclass(frozen=True)
class LearnedWeights:
    version: str  # the artefact's own version: the date it was fitted and the runs' hash prefix
    weights: Mapping[str, float]
    trained_on: Mapping[str, object]
    command: str


def parse(document: Mapping) -> LearnedWeights:
    """An artefact's content; ValueError naming what is wrong."""
    if document.get("schema") != SCHEMA_VERSION:
        raise ValueError(f"learned policy: schema {document.get('schema')!r}, this code reads {SCHEMA_VERSION}")
    weights = document.get("weights")
    if not isinstance(weights, dict) or not weights or not all(isinstance(v, int | float) for v in weights.values()):
        raise ValueError("learned policy: `weights` must map signal names to numbers")
    return LearnedWeights(str(document["version"]), dict(weights), document.get("trained_on", {}), document["command"])


@functools.cache
def shipped() -> LearnedWeights:
    """The artefact shipped with this release."""
    return parse(json.loads(ARTEFACT.read_text()))

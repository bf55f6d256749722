"""The `recorded` engine: replays recorded drafts instead of generating; for tests and replays, never for answers.

`DELIBERATE_ENGINE=recorded` with `DELIBERATE_MODEL` naming a JSONL file, one recorded draft a line:
`{"question": str, "strategy": str, "text": str}`. For each prompt it answers the text of the first record whose
question and strategy hint both occur in the prompt (the Drafter renders both into each draft's prompt); a prompt
no record matches so (the Refiner's) gets the first record whose question occurs in it, else `FALLBACK_TEXT`.
So the real services can be run on drafts a model wrote once (`bench/studies/<study>/*.runs.jsonl`), in seconds and with
the same texts every time: `tests/integration/test_selection_identity.py` checks with it that the Scheduler ranks
drafts exactly as `bench/deliberate_bench/eval/replay.py` does.

Like a real engine it streams each text as a few deltas, counts whitespace-separated words as tokens, stops at
`max_new_tokens` of them ("length"), and stops a cancelled sequence between two deltas ("aborted").

A record may also hold the draft's token confidence as `deliberate bench eval` records it (`"confidence"` with
`token_logprobs`, `token_confidences` and `token_ends`, offsets in the record's text): a request that asks for
log-probabilities (`top_logprobs` > 0) gets it back as the Completion's trace, cut to the tokens of the text it
was answered (whatever top-k it asks: the recorded numbers are replayed as they are). Without one, or when the
request does not ask, the trace is None.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

from ..selection.confidence import TokenTrace
from .base import (
    Batch,
    Completion,
    Engine,
    EngineCapabilities,
    EngineError,
    TextDelta,
    sequence_cancelled,
)

FALLBACK_TEXT = "No recorded draft for this prompt.\nFinal answer: 0"
CHUNKS = 4  # deltas per text, so streaming verification sees prefixes
# Where a text may be cut: after the whitespace that follows a word, so the pieces join to the text exactly.
WORD_BOUNDARY = re.compile(r"(?<=\s)(?=\S)")


class RecordedEngine(Engine):
    name = "recorded"
    capabilities = EngineCapabilities(cancel_one_sequence=True)  # nothing random to seed

    def __init__(self, records: list[dict]) -> None:
        self.records = records

    @classmethod
    def load(cls, path: str) -> RecordedEngine:
        """Reads the recorded drafts of the JSONL file at `path`."""
        try:
            lines = Path(path).read_text().splitlines()
            records = [_record(json.loads(line)) for line in lines if line.strip()]
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise EngineError(
                f"the recorded engine needs DELIBERATE_MODEL to name a JSONL file of "
                f'{{"question", "strategy", "text"}} records (and optionally "confidence"): {path}: {error}',
                "FAILED_PRECONDITION",
            ) from None
        return cls(records)

    @classmethod
    def from_settings(cls, model: str, threads: int, settings: object) -> RecordedEngine:
        return cls.load(model)

    @property
    def capacity(self) -> int:
        return 16

    def format_chat(self, system: str, user: str) -> str:
        return f"{system}\n\n{user}\n\n"

    def record_for(self, prompt: str) -> dict | None:
        """The record of the prompt's question and strategy hint, else the first of its question, else None."""
        asked = [r for r in self.records if r["question"] in prompt]
        return next((r for r in asked if r["strategy"] in prompt), asked[0] if asked else None)

    def text_for(self, prompt: str) -> str:
        """The recorded text of the prompt's question and strategy hint, else of its question, else the fallback."""
        matched = self.record_for(prompt)
        return matched["text"] if matched else FALLBACK_TEXT

    def decode(self, batch: Batch) -> list[Completion]:
        prompts, params, on_event, cancel = batch.prompts, batch.params, batch.emit, batch.cancel
        matched = [self.record_for(p) for p in prompts]
        pieces = [WORD_BOUNDARY.split(r["text"] if r else FALLBACK_TEXT) for r in matched]
        traces = [r["trace"] if r and params.top_logprobs > 0 else None for r in matched]
        reasons = ["stop"] * len(prompts)
        for i, words in enumerate(pieces):
            if len(words) > params.max_new_tokens:
                pieces[i], reasons[i] = words[: params.max_new_tokens], "length"
        sent = [0] * len(prompts)  # pieces streamed per sequence
        done: dict[int, Completion] = {}
        batch.step_times.append(time.perf_counter())
        while len(done) < len(prompts):  # one "decoding step" streams the next chunk of every running sequence
            for i, words in enumerate(pieces):
                if i in done:
                    continue
                stopped = sequence_cancelled(cancel, i)
                if not stopped and sent[i] < len(words):
                    size = max(1, -(-len(words) // CHUNKS))
                    on_event(TextDelta(i, "".join(words[sent[i] : sent[i] + size])))
                    sent[i] += size
                if stopped or sent[i] >= len(words):
                    text = "".join(words[: sent[i]])
                    done[i] = Completion(
                        index=i,
                        text=text,
                        prompt_tokens=len(prompts[i].split()),
                        completion_tokens=len(text.split()),
                        finish_reason="aborted" if stopped else reasons[i],
                        latency_s=time.perf_counter() - batch.started,
                        trace=replayed_trace(traces[i], text),
                    )
                    on_event(done[i])
            batch.step_times.append(time.perf_counter())
        return [done[i] for i in range(len(prompts))]


def _record(raw: dict) -> dict:
    """One line's record: its question, strategy and text (stripped), and its recorded trace or None."""
    record = {key: str(raw[key]).strip() for key in ("question", "strategy", "text")}
    record["trace"] = recorded_trace(raw.get("confidence"), str(raw["text"]))
    return record


def recorded_trace(confidence: dict | None, raw_text: str) -> TokenTrace | None:
    """The trace of a record's `confidence` (`deliberate bench eval`'s series), on the record's text once stripped;
    None without a series. Raises ValueError, TypeError or KeyError on a malformed one."""
    if confidence is None:
        return None
    if not isinstance(confidence, dict):
        raise TypeError(f"a confidence that is no object: {confidence!r:.40}")
    if not confidence.get("token_logprobs"):
        return None
    logprobs = tuple(float(x) for x in confidence["token_logprobs"])
    confidences = tuple(float(x) for x in confidence["token_confidences"])
    ends = [int(x) for x in confidence["token_ends"]]
    if not len(logprobs) == len(confidences) == len(ends):
        raise ValueError(f"a confidence series of {len(logprobs)}, {len(confidences)} and {len(ends)} tokens")
    if ends != sorted(ends):
        raise ValueError("token_ends that go back")
    text = raw_text.strip()
    lead = len(raw_text) - len(raw_text.lstrip())  # the offsets are on the text before its whitespace was stripped
    return TokenTrace(logprobs, confidences, tuple(min(max(end - lead, 0), len(text)) for end in ends))


def replayed_trace(trace: TokenTrace | None, text: str) -> TokenTrace | None:
    """`trace` cut to the tokens that end within `text` (a prefix of the recorded text); None when none do."""
    if trace is None:
        return None
    kept = next((i for i, end in enumerate(trace.ends) if end > len(text)), len(trace.ends))
    if not kept:
        return None
    return TokenTrace(trace.logprobs[:kept], trace.confidences[:kept], trace.ends[:kept])

"""The GSM8K problems an evaluation runs: a fixed sample of a JSONL split, lines never sampled left out, or a
judge dataset's validation problems."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

from deliberate.selection.answers import parse_gold
from deliberate_bench.inputs import SHARED_GSM8K
from deliberate_bench.results import ROOT, read_runs

DEFAULT_DATA = SHARED_GSM8K


DEFAULT_EXCLUDE = ROOT / "bench/eval/tuning_problems.txt"


DEFAULT_SEED = 2026


@dataclass(frozen=True)
class Problem:
    id: str  # "<file stem>:<0-based line>", stable across runs
    line: int
    question: str
    gold: str  # the number after "####", as written


def read_exclusions(path: Path | None) -> set[int]:
    """0-based line numbers, one per line or as ranges `a-b` (inclusive); `#` starts a comment."""
    if path is None or not path.exists():
        return set()
    excluded: set[int] = set()
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if "-" in line:
            low, high = (int(part) for part in line.split("-", 1))
            excluded.update(range(low, high + 1))
        else:
            excluded.add(int(line))
    return excluded


def load_problems(
    path: Path, limit: int, seed: int, exclude: set[int], pass_over: frozenset[int] = frozenset()
) -> list[Problem]:
    """A fixed random sample: the non-excluded lines shuffled with `seed`, the first `limit` taken — so a
    larger limit extends a smaller one's sample instead of redrawing it. Lines in `pass_over` are skipped after the
    shuffle, not left out of it: a sample that never held them stays the same, and one that grows fills up past
    them (the tuning blocks, `tuning_block_lines`)."""
    with path.open() as lines:
        rows = [(i, json.loads(line)) for i, line in enumerate(lines) if line.strip()]
    candidates = [(i, row) for i, row in rows if i not in exclude]
    random.Random(seed).shuffle(candidates)
    problems = []
    for i, row in [(i, row) for i, row in candidates if i not in pass_over][:limit]:
        gold = row["answer"].rsplit("####", 1)[-1].strip()
        parse_gold(row["answer"])  # refuse a malformed gold answer before spending model time on it
        problems.append(Problem(f"{path.stem}:{i}", i, row["question"], gold))
    return problems


# The tuning blocks: each file excludes every line but its block's (make eval-tuning, eval-tuning-2, eval-tuning-3).
TUNING_BLOCK_FILES = tuple(ROOT / f"bench/eval/tuning_block{block}_only.txt" for block in ("", "_2", "_3"))


def tuning_block_lines(total_lines: int) -> frozenset[int]:
    """Every line of the first `total_lines` that a tuning block holds: what defaults are chosen on, never scored."""
    every = set(range(total_lines))
    return frozenset().union(*(every - read_exclusions(path) for path in TUNING_BLOCK_FILES))


def validation_problems(dataset: Path, data: Path, limit: int) -> list[Problem]:
    """The first `limit` GSM8K problems of a dataset's validation split, in the order they were written (the file
    only grows, so the same limit names the same problems later), read from `data`."""
    metas = [record["meta"] for record in read_runs(dataset / "validation.jsonl")]
    lines = [int(meta["problem_id"].split(":", 1)[1]) for meta in metas if meta.get("source") == "gsm8k"]
    wanted = list(dict.fromkeys(lines))[:limit]
    with data.open() as rows:
        by_line = {i: json.loads(row) for i, row in enumerate(rows) if i in set(wanted)}
    return [Problem(f"{data.stem}:{i}", i, by_line[i]["question"], by_line[i]["answer"].rsplit("####", 1)[-1].strip())
            for i in wanted]  # fmt: skip

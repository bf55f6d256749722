"""Refinement with the consensus prefix against without it: same drafts, same seed, in one run.

    python bench/consensus.py [--questions 8] [--drafts 5] [--tokens 96] [--min-support 3]

For each GSM8K question the drafts are generated once; then the refinement runs twice on the same engine
with the same seed — once continuing after the drafts' consensus prefix, once from scratch. Writes
bench/results/consensus.json with `token_ratio` and `latency_ratio` (with / without, over all questions)
and `prefix_share` (the share of questions where a prefix was found).
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import add_data_argument, load_questions, write_result  # noqa: E402

from deliberate.drafter.prompts import SYSTEM_PROMPT as DRAFT_SYSTEM  # noqa: E402
from deliberate.drafter.prompts import draft_user_message, strategies_for  # noqa: E402
from deliberate.engines.base import SamplingParams  # noqa: E402
from deliberate.engines.transformers_engine import TransformersEngine  # noqa: E402
from deliberate.refiner.consensus import consensus_prefix  # noqa: E402
from deliberate.refiner.prompts import SYSTEM_PROMPT as REFINE_SYSTEM  # noqa: E402
from deliberate.refiner.prompts import SelectedDraft, refine_user_message  # noqa: E402


def refine(engine: TransformersEngine, question: str, best: str, prefix: str, tokens: int, seed: int):
    selected = [SelectedDraft(0, best, 1.0, True, (), ())]
    prompt = engine.format_chat(REFINE_SYSTEM, refine_user_message(question, selected, None)) + prefix
    started = time.perf_counter()
    (completion,) = engine.generate(
        [prompt], SamplingParams(temperature=0.7, max_new_tokens=tokens, seed=seed), lambda e: None, threading.Event()
    )
    return completion.completion_tokens, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=8)
    parser.add_argument("--drafts", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=96)
    parser.add_argument("--min-support", type=int, default=3)
    add_data_argument(parser)
    args = parser.parse_args()
    questions = load_questions(args.data, args.questions)

    engine = TransformersEngine.load("embedded")
    with_tokens = without_tokens = 0
    with_s = without_s = 0.0
    found = 0
    for seed, question in enumerate(questions, start=1):
        prompts = [engine.format_chat(DRAFT_SYSTEM, draft_user_message(question, s, None))
                   for s in strategies_for(args.drafts, [])]  # fmt: skip
        drafts = engine.generate(prompts, SamplingParams(max_new_tokens=args.tokens, seed=seed), lambda e: None,
                                 threading.Event())  # fmt: skip
        texts = [d.text for d in drafts]
        prefix = consensus_prefix(texts, args.min_support)
        found += bool(prefix)
        tokens, seconds = refine(engine, question, texts[0], prefix, args.tokens, seed)
        with_tokens, with_s = with_tokens + tokens, with_s + seconds
        tokens, seconds = refine(engine, question, texts[0], "", args.tokens, seed)
        without_tokens, without_s = without_tokens + tokens, without_s + seconds
        print(f"question {seed}: prefix {len(prefix.splitlines())} lines")
    figures = {
        "token_ratio": round(with_tokens / without_tokens, 3),
        "latency_ratio": round(with_s / without_s, 3),
        "prefix_share": round(found / len(questions), 3),
        "tokens_with": with_tokens,
        "tokens_without": without_tokens,
        "seconds_with": round(with_s, 2),
        "seconds_without": round(without_s, 2),
        "questions": len(questions),
        "drafts": args.drafts,
        "min_support": args.min_support,
    }
    print(json.dumps(figures, indent=2))
    print(f"wrote {write_result('consensus', figures)}")


if __name__ == "__main__":
    main()

"""Refinement with the consensus prefix against without it: same drafts, same seed, in one run.

    deliberate bench consensus [--questions 20] [--drafts 5] [--draft-tokens 160] [--tokens 256] [--min-support 3]
                              [--engine llamacpp] [--model embedded]
                              [--runs bench/studies/refinement/consensus.runs.jsonl]
                              [--fresh]

For each GSM8K question (a fixed random sample of the training split, `deliberate bench eval`'s sampling) the N drafts
are generated once, with the Drafter's prompts, strategy hints and default temperature, on the services' default engine
and model (llama.cpp, Qwen2.5-Coder-0.5B). They are verified and ranked as the Scheduler does it for a plain question
(the arithmetic pack, the default selection policy: `deliberate_bench.in_process`). The consensus prefix is found as
the Scheduler finds it (`selection.consensus`: normalized lines or the computations `verifier.arithmetic` recomputes,
`--min-support` drafts agreeing, in the best-ranked supporter's words). Then the best draft is refined twice on the
same engine with the same seed — once continuing after the prefix, once from scratch — and each answer is checked
against the gold answer.

Each question's outcome is appended to `--runs` as it finishes, so an interrupted run resumes where it stopped
(`--fresh` starts over; a different configuration never mixes with the stored one). Writes consensus.json beside it:
`token_ratio` and `latency_ratio` (with / without, over all questions), `prefix_share` (questions with a prefix),
`accuracy_with` and `accuracy_without`, the basis counts, and `questions` (n).
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from pathlib import Path

from deliberate.drafter.prompts import SYSTEM_PROMPT as DRAFT_SYSTEM
from deliberate.drafter.prompts import draft_user_message, strategies_for
from deliberate.engines import Engine, SamplingParams, load_engine
from deliberate.refiner.prompts import SYSTEM_PROMPT as REFINE_SYSTEM
from deliberate.refiner.prompts import SelectedDraft, refine_user_message
from deliberate.selection import same_answer
from deliberate.selection.consensus import Step, consensus
from deliberate.verifier.arithmetic import computations
from deliberate.verifier.parsing import extract_final_answer
from deliberate_bench.eval.problems import load_problems
from deliberate_bench.in_process import select_drafts, verify_drafts
from deliberate_bench.inputs import add_data_argument
from deliberate_bench.results import LAB_FILES, append_run, read_runs, write_result

DRAFT_TEMPERATURE = 0.3  # the Drafter's default (DELIBERATE_TEMPERATURE)
REFINE_TEMPERATURE = 0.7  # the Refiner's default
SAMPLE_SEED = 0  # which training questions: `deliberate bench eval`'s default sample


def refine(engine: Engine, question: str, best: str, prefix: str, tokens: int, seed: int) -> dict:
    selected = [SelectedDraft(0, best, 1.0, True, (), ())]
    prompt = engine.format_chat(REFINE_SYSTEM, refine_user_message(question, selected, None)) + prefix
    params = SamplingParams(temperature=REFINE_TEMPERATURE, max_new_tokens=tokens, seed=seed)
    started = time.perf_counter()
    (completion,) = engine.generate([prompt], params, lambda e: None, threading.Event())
    return {
        "tokens": completion.completion_tokens,
        "seconds": round(time.perf_counter() - started, 3),
        "answer": extract_final_answer(prefix + completion.text),
        "text": completion.text,  # what the model wrote after the prefix, kept to read the figures by
    }


def run_question(engine, problem, args) -> dict:
    seed = problem.line + 1
    prompts = [engine.format_chat(DRAFT_SYSTEM, draft_user_message(problem.question, s, None))
               for s in strategies_for(args.drafts, [])]  # fmt: skip
    params = SamplingParams(temperature=DRAFT_TEMPERATURE, max_new_tokens=args.draft_tokens, seed=seed)
    completions = engine.generate(prompts, params, lambda e: None, threading.Event())
    texts = [c.text for c in completions]
    ranking = [int(draft_id) for draft_id in select_drafts(completions, verify_drafts(completions)).ranking]
    steps = [[Step(c.key, c.line) for c in computations(text)] for text in texts]
    found = consensus(texts, args.min_support, steps=steps, ranking=ranking)
    best = texts[ranking[0]]
    with_prefix = refine(engine, problem.question, best, found.text, args.tokens, seed)
    without = refine(engine, problem.question, best, "", args.tokens, seed)
    return {
        "id": problem.id,
        "basis": found.basis,
        "prefix_lines": found.lines,
        "prefix_computations": found.computations,
        "support": len(found.supporters),
        "prefix": found.text,
        "with": {**with_prefix, "correct": same_answer(with_prefix["answer"], problem.gold)},
        "without": {**without, "correct": same_answer(without["answer"], problem.gold)},
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=20)
    parser.add_argument("--drafts", type=int, default=5)
    parser.add_argument("--draft-tokens", type=int, default=160)
    parser.add_argument("--tokens", type=int, default=256, help="the refinement's new-token budget")
    parser.add_argument("--min-support", type=int, default=3)
    parser.add_argument("--engine", default="llamacpp", help="the services' default engine (llamacpp)")
    parser.add_argument("--model", default="embedded", help="the default embedded model (Qwen2.5-Coder-0.5B)")
    parser.add_argument("--runs", type=Path, default=LAB_FILES / "consensus.runs.jsonl")
    parser.add_argument("--fresh", action="store_true", help="discard the stored runs and start over")
    add_data_argument(parser)
    args = parser.parse_args(argv)
    config = {k: getattr(args, k) for k in ("drafts", "draft_tokens", "tokens", "min_support", "engine", "model")}
    config["data"] = args.data.name

    if args.fresh:
        args.runs.unlink(missing_ok=True)
    done = {record["id"]: record for record in read_runs(args.runs) if record.get("config") == config}
    problems = load_problems(args.data, args.questions, SAMPLE_SEED, set())
    todo = [p for p in problems if p.id not in done]
    print(f"{len(problems) - len(todo)} of {len(problems)} questions already done ({args.runs})")

    if todo:
        engine = load_engine(args.engine, args.model)
        for problem in todo:
            record = {**run_question(engine, problem, args), "config": config}
            append_run(args.runs, record)
            done[problem.id] = record
            print(f"{problem.id}: prefix {record['prefix_lines']} lines ({record['basis'] or 'none'}), "
                  f"tokens {record['with']['tokens']} vs {record['without']['tokens']}")  # fmt: skip

    records = [done[p.id] for p in problems]
    total = {side: {k: sum(r[side][k] for r in records) for k in ("tokens", "seconds", "correct")}
             for side in ("with", "without")}  # fmt: skip
    n = len(records)
    figures = {
        "token_ratio": round(total["with"]["tokens"] / max(total["without"]["tokens"], 1), 3),
        "latency_ratio": round(total["with"]["seconds"] / max(total["without"]["seconds"], 1e-9), 3),
        "prefix_share": round(sum(bool(r["basis"]) for r in records) / n, 3),
        "accuracy_with": round(total["with"]["correct"] / n, 3),
        "accuracy_without": round(total["without"]["correct"] / n, 3),
        "prefix_by_lines": sum(r["basis"] == "lines" for r in records),
        "prefix_by_computations": sum(r["basis"] == "computations" for r in records),
        "tokens_with": total["with"]["tokens"],
        "tokens_without": total["without"]["tokens"],
        "seconds_with": round(total["with"]["seconds"], 2),
        "seconds_without": round(total["without"]["seconds"], 2),
        "questions": n,
        **config,
    }
    print(json.dumps(figures, indent=2))
    print(f"wrote {write_result('consensus', figures)}")


if __name__ == "__main__":
    main()

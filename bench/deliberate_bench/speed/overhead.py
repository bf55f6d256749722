"""Orchestration overhead: Solve through the four service processes against an in-process pipeline that runs
the same stages with the same engine, prompts, rules and seeds, in one run.

    deliberate bench overhead [--questions 3] [--drafts 3] [--tokens 48]

Both sides draft N continuations in one batched generation on the same engine and model (the services' default,
llama.cpp and the embedded Qwen2.5-Coder-0.5B), verify them with the same compiled rules (the arithmetic pack the
Scheduler adds by default), select with the same formula and refine with the same prompt; re-drafting and early
stopping are off on the services' side so the work is equal.
The two sides alternate question by question. Writes bench/studies/speed/overhead.json (key `ratio` =
services / in-process wall time; the goal is ≤ 1.05).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from pathlib import Path

from deliberate.cli.stack import Ports, Stack
from deliberate.drafter.prompts import SYSTEM_PROMPT as DRAFT_SYSTEM
from deliberate.drafter.prompts import draft_user_message, strategies_for
from deliberate.engines import Engine, load_engine
from deliberate.engines.base import Completion, SamplingParams, TextDelta
from deliberate.refiner.prompts import SYSTEM_PROMPT as REFINE_SYSTEM
from deliberate.refiner.prompts import SelectedDraft, refine_user_message, thinking_trace_of
from deliberate_bench.in_process import select_drafts, verify_drafts
from deliberate_bench.inputs import add_data_argument, load_questions
from deliberate_bench.results import write_result
from deliberate_client.client import DeliberateClient, build_request


def in_process_solve(engine: Engine, question: str, drafts: int, tokens: int, seed: int) -> str:
    """The pipeline's stages as plain function calls in one process."""
    strategies = strategies_for(drafts, [])
    prompts = [engine.format_chat(DRAFT_SYSTEM, draft_user_message(question, s, None)) for s in strategies]
    draft_params = SamplingParams(max_new_tokens=tokens, seed=seed)
    completions = engine.generate(prompts, draft_params, lambda event: None, threading.Event())
    verdicts = verify_drafts(completions)
    selection = select_drafts(completions, verdicts)
    chosen = [
        SelectedDraft(
            int(d.draft_id),
            completions[int(d.draft_id)].text,
            d.score,
            d.valid,
            tuple(o.rule_id for o in verdicts[int(d.draft_id)].outcomes if o.passed and not o.abstained),
            tuple(o.rule_id for o in verdicts[int(d.draft_id)].outcomes if not o.passed),
        )
        for d in selection.selected
    ]
    prompt = engine.format_chat(REFINE_SYSTEM, refine_user_message(question, chosen, None))
    refine_params = SamplingParams(temperature=0.7, max_new_tokens=tokens, seed=seed)
    text = []
    completion = engine.generate([prompt], refine_params, lambda e: isinstance(e, TextDelta) and text.append(e.text),
                                 threading.Event())[0]  # fmt: skip
    assert isinstance(completion, Completion)
    return f"{thinking_trace_of(chosen[0])}\n{''.join(text)}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=3)
    parser.add_argument("--drafts", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--engine", default="llamacpp", help="both sides' engine (the services' default: llamacpp)")
    add_data_argument(parser)
    args = parser.parse_args(argv)
    questions = load_questions(args.data, args.questions)

    engine = load_engine(args.engine, "embedded")
    log_dir = Path(tempfile.mkdtemp(prefix="deliberate-overhead-"))
    stack = Stack(
        ports=Ports.free(), log_dir=log_dir, state_dir=log_dir, scheduler_args=["--max-redrafts", "0"],
        env={"DELIBERATE_ENGINE": args.engine},
    )  # fmt: skip
    services_s, in_process_s = [], []
    with stack, DeliberateClient(stack.address) as client:
        in_process_solve(engine, "What is 2 + 3?", args.drafts, 8, 0)  # warm-up, both sides
        client.solve(build_request("What is 2 + 3?", num_drafts=args.drafts, max_new_tokens=8, refine_max_new_tokens=8))
        for seed, question in enumerate(questions, start=1):
            started = time.perf_counter()
            in_process_solve(engine, question, args.drafts, args.tokens, seed)
            in_process_s.append(time.perf_counter() - started)
            request = build_request(question, num_drafts=args.drafts, max_new_tokens=args.tokens,
                                    refine_max_new_tokens=args.tokens, seed=seed)  # fmt: skip
            request.refine_sampling.seed = seed
            # The plain round, as in process: every draft generated to its end, then verified.
            request.disable_streaming_verification = request.disable_quorum = True
            request.confidence_stop = False
            started = time.perf_counter()
            client.solve(request, timeout=600)
            services_s.append(time.perf_counter() - started)
            print(f"question {seed}: services {services_s[-1]:.2f}s, in-process {in_process_s[-1]:.2f}s")
    figures = {
        "ratio": round(sum(services_s) / sum(in_process_s), 3),
        "services_s": [round(s, 3) for s in services_s],
        "in_process_s": [round(s, 3) for s in in_process_s],
        "questions": len(questions),
        "drafts": args.drafts,
        "tokens": args.tokens,
    }
    print(json.dumps(figures, indent=2))
    print(f"wrote {write_result('overhead', figures)}")


if __name__ == "__main__":
    main()

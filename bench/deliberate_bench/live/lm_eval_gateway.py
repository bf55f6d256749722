"""lm-eval's `local-chat-completions` model through the OpenAI-compatible gateway, on GSM8K from a local JSONL.

    deliberate bench lm-eval-gateway --lm-eval .venv-lmeval/bin/lm_eval [--limit 20]

Starts the local stack (the model from DELIBERATE_MODEL, as every stack), runs lm-eval against its gateway with the task
in bench/lm_eval/gsm8k_local.yaml (tests/data/gsm8k_sample.jsonl, 20 problems), prints lm-eval's table and writes its
results under bench/studies/unfiled/lm-eval-gsm8k/ (no study keeps it yet). `make eval-lm-harness`; not part of `make
test`.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from deliberate.cli.stack import Ports, Stack
from deliberate_bench.results import LAB_FILES, ROOT

TASKS = ROOT / "bench/lm_eval"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lm-eval", default="lm_eval", help="the lm_eval command (its own venv: make eval-lm-harness)")
    parser.add_argument("--limit", type=int, default=20)
    parser.add_argument("--output", type=Path, default=LAB_FILES / "lm-eval-gsm8k")
    args = parser.parse_args(argv)
    log_dir = Path(tempfile.mkdtemp(prefix="deliberate-lm-eval-"))
    with Stack(ports=Ports.free(), log_dir=log_dir, state_dir=log_dir) as stack:
        print(f"stack up, gateway {stack.gateway_url}; service logs in {log_dir}", flush=True)
        model_args = ",".join(
            [
                "model=deliberate",
                f"base_url={stack.gateway_url}/v1/chat/completions",
                "num_concurrent=1",
                "max_retries=1",
                "tokenized_requests=False",
                "timeout=900",
            ]
        )
        command = [
            args.lm_eval, "--model", "local-chat-completions", "--model_args", model_args,
            "--tasks", "gsm8k_local", "--include_path", str(TASKS), "--apply_chat_template",
            "--limit", str(args.limit), "--output_path", str(args.output), "--log_samples",
        ]  # fmt: skip
        print(" ".join(command), flush=True)
        return subprocess.run(command, cwd=ROOT).returncode


if __name__ == "__main__":
    sys.exit(main())

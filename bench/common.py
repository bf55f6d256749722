"""Helpers shared by the benchmarks: where results go and what machine produced them."""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def machine() -> dict:
    import torch

    return {
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
    }


def write_result(name: str, figures: dict) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    payload = {
        **figures,
        "machine": machine(),
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    path.write_text(json.dumps(payload, indent=2) + "\n")
    return path


ROOT = Path(__file__).resolve().parents[1]
SHARED_GSM8K = ROOT.parent / "shared/data/gsm8k/train.jsonl"
SAMPLE_GSM8K = ROOT / "tests/data/gsm8k_sample.jsonl"


def add_data_argument(parser) -> None:
    """`--data`: any JSONL file shaped like GSM8K (a "question" per line); the shared split by default."""
    default = SHARED_GSM8K if SHARED_GSM8K.exists() else SAMPLE_GSM8K
    parser.add_argument("--data", type=Path, default=default, help=f"JSONL questions (default: {default})")


def load_questions(path: Path, count: int) -> list[str]:
    with path.open() as lines:
        return [json.loads(line)["question"] for _, line in zip(range(count), lines, strict=False)]

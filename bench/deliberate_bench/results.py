"""The one way to write a result and read recorded runs.

Recorded inputs (`*.runs.jsonl`, judge datasets, the drafts behind shipped weights) and the summaries read from them
(JSON, Markdown, plots) live in the folder of the study that declares them (`studies.LAB_FILES / name`); each
study's README says which command writes each file and which page cites it (`deliberate bench index`).
"""

from __future__ import annotations

import gzip
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from functools import cache
from pathlib import Path

from deliberate_bench.studies import LAB_FILES, ROOT, LabFiles

# The runs defaults are chosen on: the tuning blocks (make eval-tuning, eval-tuning-2, eval-tuning-3), never scored.
TUNING_RUNS = tuple(LAB_FILES / f"eval-tuning{block}.runs.jsonl" for block in ("", "-2", "-3"))


def runs_directory(results_dir: Path | LabFiles, runs_dir: Path | None = None) -> Path | LabFiles:
    """Where a command's runs file goes: `runs_dir` when given, else beside its summaries."""
    return runs_dir if runs_dir is not None else results_dir


def runs_parts(path: Path) -> list[Path]:
    """A runs file on disk: its compressed part (`<name>.gz`: the records of a finished run, compressed by
    `deliberate bench compress-runs`) then its plain part (records appended since, by a run resumed); either may be
    absent."""
    return [part for part in (path.with_name(path.name + ".gz"), path) if part.exists()]


def runs_present(path: Path) -> bool:
    return bool(runs_parts(path))


def remove_runs(path: Path) -> None:
    """`--fresh`: both parts go."""
    for part in runs_parts(path):
        part.unlink()


def runs_lines(path: Path) -> list[str]:
    """The lines of a runs file, its compressed part's first."""
    lines = []
    for part in runs_parts(path):
        text = gzip.decompress(part.read_bytes()).decode() if part.suffix == ".gz" else part.read_text()
        lines += text.splitlines()
    return lines


def read_runs(path: Path) -> list[dict]:
    """Every complete record of a runs file (one JSON object a line; `runs_parts`); [] before the first. A line cut
    short by an interrupted write, and a blank one, are skipped."""
    records = []
    for line in runs_lines(path):
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return [record for record in records if record]


def read_runs_by_id(path: Path) -> dict[str, dict]:
    """A resumable benchmark's per-problem records by problem id; {} before the first."""
    return {record["id"]: record for record in read_runs(path)}


def append_run(path: Path, record: dict) -> None:
    """One finished problem's record, on disk at once, so a rerun resumes after it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as out:
        out.write(json.dumps(record) + "\n")
        out.flush()
        os.fsync(out.fileno())


def write_result(name: str, figures: dict, directory: Path | LabFiles = LAB_FILES) -> Path:
    """`<directory>/<name>.json`: the figures and their provenance (`write_json`)."""
    return write_json(directory / f"{name}.json", figures)


def write_json(path: Path, figures: dict) -> Path:
    """A results file: the figures, then what produced them — the commit and whether the tree was dirty, the command
    line, the model files this checkout pins, the machine and when (lm-evaluation-harness's `git_hash` and
    `config`). A key the figures hold already is theirs (a summary's own `command` stays)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    produced_by = provenance()
    payload = {**figures, **{key: value for key, value in produced_by.items() if key not in figures}}
    path.write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n")
    return path


def provenance() -> dict:
    return {
        "code": code_version(),
        "command": " ".join([sys.argv[0], shlex.join(sys.argv[1:])]).strip(),  # argv[0]: `deliberate bench <name>`
        "models": pinned_models(),
        "machine": machine(),
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def pinned_models() -> dict[str, str]:
    """The embedded models as this checkout pins them: each GGUF's sha256 where it is pinned, else its package."""
    from deliberate.engines.models import EMBEDDED_MODELS

    return {
        name: model.sha256 or ", ".join(part.distribution for part in model.parts)
        for name, model in EMBEDDED_MODELS.items()
    }


@cache
def code_version() -> dict:
    """The commit the lab runs at and whether the tree differs from it (lm-evaluation-harness's `git_hash`): what a
    result or a recorded problem was produced by. Empty outside a git checkout."""

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10, check=False)
        return done.stdout.strip() if done.returncode == 0 else ""

    commit = git("rev-parse", "HEAD")
    if not commit:
        return {}
    return {"commit": commit, "dirty": bool(git("status", "--porcelain", "--untracked-files=no"))}


def machine() -> dict:
    facts = {
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "load_average_1m": round(os.getloadavg()[0], 2),  # other work on the machine while measuring
        **cpu_model(),
        "reference_workload_ms": reference_workload_ms(),
    }
    try:  # torch is the optional `transformers` extra
        import torch
    except ImportError:
        return facts
    return {**facts, "torch_threads": torch.get_num_threads(), "torch": torch.__version__}


def cpu_model() -> dict:
    """The CPU's model name and clock as /proc/cpuinfo gives them (Linux; empty elsewhere)."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return {}
    fields = dict(line.split(":", 1) for line in lines if ":" in line)
    fields = {key.strip(): value.strip() for key, value in fields.items()}
    return {"cpu_model": fields.get("model name", ""), "cpu_mhz": fields.get("cpu MHz", "")}


def reference_workload_ms() -> float:
    """Milliseconds one core takes for a fixed pure-Python workload (dicts, strings, a sort), best of 5: the same
    Verifier code ran 2.6 times faster on one 2-core machine than on the one before it, so figures from two machines
    compare only through this."""
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        table = {f"key{n}": n * 7 % 1000 for n in range(20_000)}
        sorted(table.items(), key=lambda item: (item[1], item[0]))
        best = min(best, time.perf_counter() - started)
    return round(best * 1e3, 2)

"""Compress finished runs files in place: a study's `<name>` becomes `<name>.gz`, read back transparently by every
reader of runs (`results.read_runs`), and a run resumed later appends to a plain `<name>` beside it.

    deliberate bench compress-runs eval-gsm8k-200.runs.jsonl …   # names of declared runs files, or paths

Deterministic (no name or time in the gzip header), so compressing the same records twice gives the same bytes.
"""

from __future__ import annotations

import gzip
from pathlib import Path

from deliberate_bench.command import parser_for
from deliberate_bench.results import LAB_FILES, runs_lines


def compress(path: Path) -> Path:
    """`path`'s records, its compressed part's and its plain tail's, as one `<path>.gz`; the plain part removed."""
    packed = path.with_name(path.name + ".gz")
    text = "".join(line + "\n" for line in runs_lines(path))
    packed.write_bytes(gzip.compress(text.encode(), compresslevel=9, mtime=0))
    path.unlink(missing_ok=True)
    return packed


def main(argv: list[str] | None = None) -> int:
    parser = parser_for("compress-runs", __doc__)
    parser.add_argument("names", nargs="+", help="runs files: names a study declares, or paths")
    args = parser.parse_args(argv)
    for name in args.names:
        path = Path(name) if "/" in name else LAB_FILES / name
        before = path.stat().st_size if path.exists() else 0
        packed = compress(path)
        print(f"{packed}: {before:,} → {packed.stat().st_size:,} bytes")
    return 0

"""The indexes generated from the lab's studies (`deliberate_bench.studies`: one folder per study, its manifest
`study.toml` and its files beside it). From the manifests alone:

- `bench/studies/README.md`: every study, its question and verdict;
- `bench/studies/<study>/README.md`: the study's one summary table, a row per variant with its command, the commit
  that produced it (read from its results file) and its files.

Plots are drawn on demand by the summaries that write them; only the headline figures the docs show are declared and
kept (.gitignore keeps the others out of git).

    deliberate bench index [--write]     # prints what is out of date, or writes every index (make bench-index)

tests/bench/test_index.py fails when a file in a study's folder is declared by no variant of it (or sits in
bench/studies/unfiled/), a declared file is missing, or an index is out of date.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from deliberate_bench.command import parser_for
from deliberate_bench.results import ROOT, runs_parts, runs_present
from deliberate_bench.studies import MANIFEST, STUDIES, UNFILED, Study, Variant, home, studies

OWN = {MANIFEST, "README.md"}  # in a study's folder, not declared files


def undeclared() -> list[str]:
    """Files in the studies' folders that no variant of their study names (a compressed runs file, `<name>.gz`, goes
    by its name; a plot no study keeps is drawn on demand, not committed)."""
    stray = []
    for study in studies():
        names = {name for variant in study.variants for name in variant.files}
        for path in study.folder.iterdir():
            name = path.name
            if name not in OWN and name.removesuffix(".gz") not in names and not name.endswith(".png"):
                stray.append(f"{study.name}/{name}")
    return sorted(stray)


def missing() -> list[str]:
    return sorted(f"{s.name}/{name}" for s in studies() for v in s.variants for name in v.files
                  if not runs_present(s.folder / name))  # fmt: skip


def unfiled() -> list[Path]:
    """What the lab wrote into bench/studies/unfiled/ (not committed) before a study declared it."""
    return sorted(UNFILED.iterdir()) if UNFILED.is_dir() else []


def file_declared() -> list[str]:
    """Moves each unfiled file a study now declares into that study's folder."""
    moved = []
    for path in unfiled():
        if (folder := home(path.name)) != UNFILED:
            path.rename(folder / path.name)
            moved.append(f"{folder.name}/{path.name}")
    return moved


def stored(study: Study, name: str) -> list[str]:
    """The names a declared file has on disk: `<name>.gz` once compressed, then any plain tail
    (`results.runs_parts`)."""
    return [part.name for part in runs_parts(study.folder / name)] or [name]


def doc_link(cited: str, up: str) -> str:
    page, _, section = cited.partition("#")
    return f"[{cited}]({up}docs/{page}{'#' + section if section else ''})"


def studies_readme() -> str:
    lines = ["# bench/studies", "",
             "What the lab asked, one folder per study: its manifest (`study.toml`: the question, the rule fixed",
             "before scoring, the verdict, the pages that cite it, its variants and their files), its summary table",
             "(`README.md`), and the files: recorded runs (`*.runs.jsonl`, read by every summary and replay) and",
             "the summaries read from them (JSON, Markdown, plots). Written by",
             "`deliberate bench index --write` from the manifests; a test fails when it is out of date.", "",
             "| study | question | verdict | variants |", "|---|---|---|---:|"]  # fmt: skip
    for study in studies():
        lines.append(f"| [{study.name}]({study.name}/README.md) | {study.question} | {study.verdict} | "
                     f"{len(study.variants)} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def study_readme(study: Study) -> str:
    cited = ", ".join(doc_link(page, "../../../") for page in study.cited)
    lines = [f"# {study.name}", "", f"**Question.** {study.question}", "", f"**Rule.** {study.rule}", "",
             f"**Verdict.** {study.verdict}", "", f"**Cited in** {cited}.", "",
             "Written by `deliberate bench index --write` from `study.toml`; one row per variant.", "",
             "| variant | written by | commit | files |", "|---|---|---|---|"]  # fmt: skip
    for v in study.variants:
        files = [f"[`{n}`]({n})" for name in v.files for n in stored(study, name)]
        lines.append(f"| {v.name} | `{v.command}` | {commit_of(study, v)} | {'<br>'.join(files)} |")
    return "\n".join(lines) + "\n"


def commit_of(study: Study, variant: Variant) -> str:
    """The commit its first JSON result records (`code.commit`, or `code.committed_in` for a file written before
    results recorded it, marked "in"); "—" for a variant with no JSON result."""
    for name in variant.results:
        path = study.folder / name
        if name.endswith(".json") and path.is_file():
            code = json.loads(path.read_text()).get("code") or {}
            if code.get("commit"):
                return f"`{code['commit'][:7]}`" + (" (dirty)" if code.get("dirty") else "")
            if code.get("committed_in"):
                return f"in `{code['committed_in'][:7]}`"
    return "—"


def indexes() -> dict[Path, str]:
    """Every generated index: path → the text it must hold."""
    written = {STUDIES / "README.md": studies_readme()}
    written |= {STUDIES / study.name / "README.md": study_readme(study) for study in studies()}
    return written


def main(argv: list[str] | None = None) -> int:
    parser = parser_for("index", __doc__)
    parser.add_argument("--write", action="store_true", help="write every index")
    args = parser.parse_args(argv)
    if args.write:
        for name in file_declared():
            print(f"filed: bench/studies/{name}")
    for name in undeclared():
        print(f"bench/studies/{name}: declared by no variant of its study ({MANIFEST})", file=sys.stderr)
    for path in unfiled():
        why = "a plot drawn on demand" if path.suffix == ".png" else "no study declares it yet"
        print(f"bench/studies/unfiled/{path.name}: {why} (not committed)", file=sys.stderr)
    stale = []
    for path, text in indexes().items():
        if args.write:
            path.write_text(text)
        elif not path.exists() or path.read_text() != text:
            stale.append(str(path.relative_to(ROOT)))
    if stale:
        print(f"out of date: {', '.join(stale)} (deliberate bench index --write)", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The lab's studies and the indexes generated from them.

A study is a folder `bench/studies/<study>/` with a manifest, `study.toml`: the question it asks, the rule fixed
before scoring (or that it is a measurement), its verdict (kept or not) and the docs pages that cite it, then one
`[[variants]]` table per variant — its name, the command that writes it, the page that cites it, and its files in
`bench/runs/` (`runs`) and `bench/results/` (`results`). From the manifests alone:

- `bench/studies/README.md`: every study, its question and verdict;
- `bench/studies/<study>/README.md`: the study's one summary table, a row per variant with its command, the commit
  that produced it (read from its results file) and its files;
- `bench/runs/README.md` and `bench/results/README.md`: every file, the command that writes it, the page that cites it.

Plots are drawn on demand by the summaries that write them; only the headline figures the docs show are declared and
kept (.gitignore keeps the others out of git).

    deliberate bench index [--write]     # prints what is out of date, or writes every index (make bench-index)

tests/bench/test_index.py fails when a file of bench/runs or bench/results belongs to no study, a declared file is
missing, or an index is out of date.
"""

from __future__ import annotations

import json
import sys
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from deliberate_bench.command import parser_for
from deliberate_bench.results import RESULTS, ROOT, RUNS, runs_parts, runs_present

STUDIES = ROOT / "bench/studies"
MANIFEST = "study.toml"
TITLES = {
    RUNS: "Recorded runs: the inputs every summary and replay is read from (resumable; no summary rewrites them).",
    RESULTS: "The summaries (JSON, Markdown, plots) read from the recorded runs in [bench/runs](../runs/README.md).",
}
KEEP = {"README.md", ".gitkeep"}  # in a files directory, not results


@dataclass(frozen=True)
class Variant:
    name: str
    command: str  # what writes its files
    cited: str  # the docs page and section that cite it, relative to docs/
    runs: tuple[str, ...] = ()  # names in bench/runs (a folder counts as one)
    results: tuple[str, ...] = ()  # names in bench/results

    def files(self, directory: Path) -> tuple[str, ...]:
        return self.runs if directory == RUNS else self.results


@dataclass(frozen=True)
class Study:
    name: str
    question: str
    rule: str  # fixed before scoring, or why there is none
    verdict: str
    cited: tuple[str, ...]
    variants: tuple[Variant, ...]


def read_study(folder: Path) -> Study:
    manifest = tomllib.loads((folder / MANIFEST).read_text())
    variants = tuple(
        Variant(v["name"], v["command"], v["cited"], tuple(v.get("runs", ())), tuple(v.get("results", ())))
        for v in manifest["variants"]
    )
    return Study(folder.name, manifest["question"], manifest["rule"], manifest["verdict"], tuple(manifest["cited"]),
                 variants)  # fmt: skip


@cache
def studies(root: Path = STUDIES) -> tuple[Study, ...]:
    return tuple(read_study(folder) for folder in sorted(root.iterdir()) if (folder / MANIFEST).is_file())


def declared(directory: Path) -> dict[str, tuple[Study, Variant]]:
    """Each file of a files directory (bench/runs or bench/results) → the study and variant that declare it."""
    return {name: (s, v) for s in studies() for v in s.variants for name in v.files(directory)}


def undeclared(directory: Path) -> list[str]:
    """Files in the directory that no study names (a compressed runs file, `<name>.gz`, goes by its name)."""
    names = set(declared(directory))
    present = {path.name for path in directory.iterdir()} - KEEP
    drawn_on_demand = {name for name in present if name.endswith(".png") and name not in names}  # not kept (.gitignore)
    return sorted(name for name in present - drawn_on_demand if name.removesuffix(".gz") not in names)


def missing(directory: Path) -> list[str]:
    return sorted(name for name in declared(directory) if not runs_present(directory / name))


def stored(directory: Path, name: str) -> str:
    """The name a declared file has on disk: `<name>.gz` once compressed (`results.runs_parts`)."""
    return " + ".join(part.name for part in runs_parts(directory / name)) or name


def doc_link(cited: str, up: str) -> str:
    page, _, section = cited.partition("#")
    return f"[{cited}]({up}docs/{page}{'#' + section if section else ''})"


def files_readme(directory: Path) -> str:
    lines = [f"# bench/{directory.name}", "", TITLES[directory], "",
             "Written by `deliberate bench index --write` (`make bench-index`) from the studies' manifests",
             "(`bench/studies/<study>/study.toml`); a test fails when it is out of date.", "",
             "| file | study | written by | cited in |", "|---|---|---|---|"]  # fmt: skip
    for study in studies():
        for variant in study.variants:
            if names := variant.files(directory):
                files = "<br>".join(f"`{stored(directory, name)}`" for name in names)
                where = f"[{study.name}](../studies/{study.name}/README.md)"
                lines.append(f"| {files} | {where} | `{variant.command}` | {doc_link(variant.cited, '../../')} |")
    return "\n".join(lines) + "\n"


def studies_readme() -> str:
    lines = ["# bench/studies", "",
             "What the lab asked, one folder per study: its manifest (`study.toml`: the question, the rule fixed",
             "before scoring, the verdict, the pages that cite it, its variants and their files in",
             "[bench/runs](../runs/README.md) and [bench/results](../results/README.md)) and its summary table",
             "(`README.md`). Written by",
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
        files = [f"[`{n}`](../../runs/{n})" for name in v.runs for n in stored(RUNS, name).split(" + ")]
        files += [f"[`{n}`](../../results/{n})" for n in v.results]
        lines.append(f"| {v.name} | `{v.command}` | {commit_of(v)} | {'<br>'.join(files)} |")
    return "\n".join(lines) + "\n"


def commit_of(variant: Variant) -> str:
    """The commit its first JSON result records (`code.commit`, or `code.committed_in` for a file written before
    results recorded it, marked "in"); "—" for a variant with no JSON result."""
    for name in variant.results:
        path = RESULTS / name
        if name.endswith(".json") and path.is_file():
            code = json.loads(path.read_text()).get("code") or {}
            if code.get("commit"):
                return f"`{code['commit'][:7]}`" + (" (dirty)" if code.get("dirty") else "")
            if code.get("committed_in"):
                return f"in `{code['committed_in'][:7]}`"
    return "—"


def indexes() -> dict[Path, str]:
    """Every generated index: path → the text it must hold."""
    written = {directory / "README.md": files_readme(directory) for directory in TITLES}
    written[STUDIES / "README.md"] = studies_readme()
    written |= {STUDIES / study.name / "README.md": study_readme(study) for study in studies()}
    return written


def main(argv: list[str] | None = None) -> int:
    parser = parser_for("index", __doc__)
    parser.add_argument("--write", action="store_true", help="write every index")
    args = parser.parse_args(argv)
    for directory in TITLES:
        for name in undeclared(directory):
            print(f"{directory.name}/{name}: in no study (bench/studies/<study>/{MANIFEST})", file=sys.stderr)
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

"""The lab's studies and the files each one owns.

A study is a folder `bench/studies/<study>/` holding its manifest, `study.toml` — the question it asks, the rule
fixed before scoring (or that it is a measurement), its verdict (kept or not) and the docs pages that cite it, then
one `[[variants]]` table per variant: its name, the command that writes it, the page that cites it, its recorded runs
(`runs`: the inputs every summary and replay reads) and its summaries (`results`: JSON, Markdown, plots) — and
those files themselves, beside the manifest. The lab finds a file by its name alone (`LAB_FILES / "cascade.json"`),
so a command writes into the folder of the study that declares what it writes.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository
STUDIES = ROOT / "bench/studies"
# Where the lab writes a file no manifest declares (a quick look, a new measurement): kept out of git (.gitignore)
# until a study declares it and `deliberate bench index --write` files it in that study's folder.
UNFILED = STUDIES / "unfiled"
MANIFEST = "study.toml"


@dataclass(frozen=True)
class Variant:
    name: str
    command: str  # what writes its files
    cited: str  # the docs page and section that cite it, relative to docs/
    runs: tuple[str, ...] = ()  # recorded runs (a folder counts as one)
    results: tuple[str, ...] = ()  # the summaries read from them

    @property
    def files(self) -> tuple[str, ...]:
        return self.runs + self.results


@dataclass(frozen=True)
class Study:
    name: str
    question: str
    rule: str  # fixed before scoring, or why there is none
    verdict: str
    cited: tuple[str, ...]
    variants: tuple[Variant, ...]

    @property
    def folder(self) -> Path:
        return STUDIES / self.name


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


def declared() -> dict[str, tuple[Study, Variant]]:
    """Each declared file's name → the study and variant that declare it."""
    return {name: (s, v) for s in studies() for v in s.variants for name in v.files}


def home(name: str) -> Path:
    """The folder a file of this name lives in: its study's, or bench/studies/unfiled/ when no study declares it
    (a compressed runs file, `<name>.gz`, goes by its name)."""
    owner = declared().get(name.removesuffix(".gz"))
    return owner[0].folder if owner else UNFILED


class LabFiles:
    """The lab's files by name, each in its study's folder: `LAB_FILES / "eval-gsm8k.json"` is a path. Stands where a
    command takes a results or runs directory; a directory given instead (a test's) is used as it is."""

    def __truediv__(self, name: str) -> Path:
        folder = home(name)
        folder.mkdir(exist_ok=True)  # bench/studies/unfiled/ is made when first written to
        return folder / name

    def mkdir(self, parents: bool = False, exist_ok: bool = False) -> None:
        """Nothing to make: each file's folder is made as the file is written."""

    def __str__(self) -> str:
        return "bench/studies/<study>"

    __repr__ = __str__


LAB_FILES = LabFiles()

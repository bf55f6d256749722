"""Each study's folder under bench/studies/ holds its manifest, its generated summary table and only the files its
variants declare, each with the command that writes it and the page that cites it; the indexes are the tables written
from that declaration (bench/deliberate_bench/index.py, studies.py)."""

from __future__ import annotations

import json
from pathlib import Path

from deliberate_bench import index, studies

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_every_file_is_in_its_study_and_every_declared_file_exists():
    assert not index.undeclared(), "name them in their study's study.toml, or remove them"
    assert not index.missing()


def test_every_index_is_up_to_date():
    stale = [str(path) for path, text in index.indexes().items() if not path.exists() or path.read_text() != text]
    assert not stale, "deliberate bench index --write"


def test_every_study_has_a_manifest_that_says_what_it_asked_and_decided():
    folders = [p for p in studies.STUDIES.iterdir() if p.is_dir() and p != studies.UNFILED]
    assert len(folders) >= 10 and all((folder / studies.MANIFEST).is_file() for folder in folders)
    for study in studies.studies():
        assert study.question and study.rule and study.verdict and study.variants, study.name
        assert len({v.name for v in study.variants}) == len(study.variants), f"{study.name}: a variant named twice"
        assert {v.cited for v in study.variants} <= set(study.cited), f"{study.name}: a variant's page not cited"


def test_no_file_belongs_to_two_variants():
    names = [name for s in studies.studies() for v in s.variants for name in v.files]
    assert len(names) == len(set(names))


def test_every_citation_is_a_docs_page():
    pages = {page.partition("#")[0] for study in studies.studies() for page in study.cited}
    assert not [page for page in pages if not (DOCS / page).exists()]


def test_a_stray_file_is_reported_and_the_lab_writes_a_declared_name_into_its_study(tmp_path, monkeypatch):
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "stray.json").write_text("{}")
    study = studies.Study(
        "s", "q", "r", "v", ("eval.md",), (studies.Variant("kept", "make x", "eval.md", (), ("kept.json",)),)
    )
    monkeypatch.setattr(studies, "STUDIES", tmp_path)
    monkeypatch.setattr(studies, "UNFILED", tmp_path / "unfiled")
    monkeypatch.setattr(studies, "studies", lambda: (study,))
    monkeypatch.setattr(index, "studies", lambda: (study,))
    assert index.undeclared() == ["s/stray.json"] and index.missing() == ["s/kept.json"]
    assert studies.LAB_FILES / "kept.json" == tmp_path / "s" / "kept.json"
    assert studies.LAB_FILES / "new.json" == tmp_path / "unfiled" / "new.json"  # until a study declares it
    (tmp_path / "unfiled" / "kept.json").write_text("{}")
    monkeypatch.setattr(index, "UNFILED", tmp_path / "unfiled")
    assert index.file_declared() == ["s/kept.json"] and not index.missing()


def test_every_results_file_says_which_commit_and_command_produced_it():
    unstamped = []
    for path in sorted(studies.STUDIES.glob("*/*.json")):
        result = json.loads(path.read_text())
        code = result.get("code") or {}
        if not (code.get("commit") or code.get("committed_in")) or not (
            result.get("command") or result.get("commands")
        ):
            unstamped.append(path.name)
    assert not unstamped, "results without their commit or command (write them with results.write_json)"


def test_a_written_result_carries_its_provenance(tmp_path, monkeypatch):
    from deliberate_bench import results

    monkeypatch.setattr("sys.argv", ["deliberate bench load", "--quick"])
    written = json.loads(results.write_json(tmp_path / "r.json", {"ratio": 0.5, "command": "its own"}).read_text())
    assert written["ratio"] == 0.5 and written["command"] == "its own"  # the figures' keys are theirs
    assert written["code"]["commit"] and "dirty" in written["code"]
    assert written["models"]["qwen2.5-coder-1.5b"] == "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
    assert set(written) >= {"machine", "measured_at"}
    plain = json.loads(results.write_json(tmp_path / "p.json", {}).read_text())
    assert plain["command"] == "deliberate bench load --quick"


# bench/ in git was 49.2 MB when the studies began (issue 57); finished runs files are compressed (compress-runs).
BENCH_MAX_MB = 35


def test_bench_stays_under_its_stated_size():
    import subprocess

    root = index.ROOT
    tracked = subprocess.run(["git", "ls-files", "bench"], cwd=root, capture_output=True, text=True, check=True)
    size = sum((root / name).stat().st_size for name in tracked.stdout.splitlines() if (root / name).is_file())
    assert size <= BENCH_MAX_MB * 1e6, f"bench/ holds {size / 1e6:.1f} MB: compress finished runs (compress-runs)"


def test_a_compressed_runs_file_reads_as_the_plain_one_and_a_resumed_run_appends_beside_it(tmp_path):
    from deliberate_bench.compress_runs import compress
    from deliberate_bench.results import append_run, read_runs, remove_runs, runs_parts

    runs = tmp_path / "x.runs.jsonl"
    for n in range(3):
        append_run(runs, {"id": n})
    assert compress(runs).name == "x.runs.jsonl.gz" and not runs.exists()
    append_run(runs, {"id": 3})  # resumed
    assert [r["id"] for r in read_runs(runs)] == [0, 1, 2, 3]
    assert compress(runs).read_bytes() == compress(runs).read_bytes()  # deterministic
    assert [r["id"] for r in read_runs(runs)] == [0, 1, 2, 3] and [p.name for p in runs_parts(runs)] == [
        "x.runs.jsonl.gz"
    ]
    remove_runs(runs)
    assert read_runs(runs) == []

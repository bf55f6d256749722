"""Rule packs are plugins: the Verifier finds every pack but `arithmetic` through the `deliberate.rule_packs`
entry point — the ad-selection and promotion packs shipped with deliberate exactly like a user's — and imports
none."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from deliberate.decisions.packs import ENTRY_POINT_GROUP
from deliberate.decisions.reference import ReferenceStore
from deliberate.rule_packs.ad_selection import catalog
from deliberate.rule_packs.ad_selection.__main__ import main as ad_selection_command
from deliberate_client.examples import ads
from tests.import_graph import imported_names

VERIFIER = Path(__file__).resolve().parents[3] / "services/deliberate/verifier"
SERVERS = VERIFIER.parent


def run_python(code: str, extra_path: Path | None = None) -> dict:
    """Runs `code` in a fresh interpreter (nothing imported yet) and returns the JSON it prints."""
    env = dict(os.environ)
    if extra_path is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(extra_path), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def imported_modules(path: Path) -> set[str]:
    """Absolute names of the modules `path` imports, relative imports resolved."""
    return imported_names(path, ".".join(["deliberate", *path.relative_to(VERIFIER.parent).parent.parts]))


def test_no_verifier_module_imports_the_examples_or_a_pack_plugin():
    sources = [p for p in VERIFIER.rglob("*.py") if "v1" not in p.parts]
    assert len(sources) > 10
    offending = {
        str(path.relative_to(VERIFIER)): sorted(
            name
            for name in imported_modules(path)
            if name.startswith(("deliberate.examples", "deliberate.rule_packs", "deliberate_client"))
        )
        for path in sources
    }
    assert {path: names for path, names in offending.items() if names} == {}


def test_no_server_module_imports_the_client_package():
    """A server image needs no client wheel: the packs carry their own data. Only the commands that plug into the
    client's `deliberate` command (cli/) may import it."""
    sources = [p for p in SERVERS.rglob("*.py") if p.relative_to(SERVERS).parts[0] != "cli"]
    assert len(sources) > 50
    offending = {
        str(path.relative_to(SERVERS)): sorted(n for n in imported_modules(path) if n.startswith("deliberate_client"))
        for path in sources
    }
    assert {path: names for path, names in offending.items() if names} == {}


def test_the_ad_selection_pack_ships_the_client_examples_catalog_and_budget():
    """Two copies of one catalog: the client's prompt lists the ads the pack checks against."""
    shipped = Path(catalog.__file__).with_name(catalog.CATALOG_FILE)
    assert shipped.read_bytes() == ads.CATALOG_PATH.read_bytes(), f"copy {ads.CATALOG_PATH} to {shipped}"
    assert [ad.model_dump() for ad in catalog.shipped_catalog()] == [ad.to_dict() for ad in ads.load_catalog()]
    assert catalog.BUDGET == ads.BUDGET


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("ad_selection", "deliberate.rule_packs.ad_selection:AdSelectionPack"),
        ("credit", "deliberate.rule_packs.credit.pack:CreditPack"),
        ("promotion", "deliberate.rule_packs.promotion.pack:PromotionPack"),
    ],
)
def test_the_shipped_packs_are_declared_under_the_entry_point_group(name, value):
    declared = {entry.name: entry.value for entry in entry_points(group=ENTRY_POINT_GROUP)}
    assert declared.get(name) == value, (
        "the installed metadata lacks the entry point: reinstall the project (pip install -e .)"
    )
    assert not entry_points(group="deliberate.decision_prompts"), "one entry point per pack: its prompt is its own"


def test_the_verifier_finds_ad_selection_through_the_entry_point_not_by_import():
    found = run_python(
        """
        import json, sys
        import deliberate.verifier.__main__, deliberate.verifier.server, deliberate.verifier.constraints
        before = any(name.startswith("deliberate.rule_packs.") for name in sys.modules)
        from deliberate.decisions.packs import load_registry
        registry = load_registry()
        print(json.dumps({"imported_by_the_verifier": before, "packs": sorted(registry),
                          "modules": [registry[name].__module__ for name in ("ad_selection", "credit", "promotion")]}))
        """
    )
    assert found == {
        "imported_by_the_verifier": False,
        "packs": ["ad_selection", "arithmetic", "credit", "promotion"],
        "modules": [
            "deliberate.rule_packs.ad_selection.pack",
            "deliberate.rule_packs.credit.pack",
            "deliberate.rule_packs.promotion.pack",
        ],
    }


def test_a_user_pack_installed_under_the_entry_point_is_loaded_and_run(tmp_path):
    """A distribution on the path (its dist-info declares the entry points), as `pip install` leaves one."""
    (tmp_path / "shouting_pack.py").write_text(
        textwrap.dedent(
            """
            from pydantic import BaseModel
            from deliberate.decisions.packs import RulePack, check

            class NoParams(BaseModel):
                pass

            class ShoutPack(RulePack):
                name = "shout"
                params_model = NoParams

                @check("all_caps")
                def all_caps(self, text):
                    return text.isupper(), "capitals" if text.isupper() else "lower-case letters"
            """
        )
    )
    dist_info = tmp_path / "shouting_pack-1.0.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: shouting-pack\nVersion: 1.0\n")
    (dist_info / "entry_points.txt").write_text(
        "[deliberate.rule_packs]\nshout = shouting_pack:ShoutPack\nbroken = shouting_pack:NoSuchPack\n"
    )
    result = run_python(
        """
        import json
        from deliberate.verifier.constraints import ConstraintSpec, compile_rules
        from deliberate.decisions.packs import load_registry
        from deliberate.verifier.rules import verify
        rules = compile_rules("", [ConstraintSpec(0, "rule_pack", "shout")], {}).rules
        verdicts = {text: [o.message for o in verify(text, rules, "stop", None, {}).outcomes if o.rule_id == "all_caps"]
                    for text in ("THE ANSWER IS 4", "the answer is 4")}
        print(json.dumps({"packs": sorted(load_registry()), "verdicts": verdicts}))
        """,
        extra_path=tmp_path,
    )
    assert result["packs"] == ["ad_selection", "arithmetic", "credit", "promotion", "shout"], (
        "the broken entry point is skipped"
    )
    assert result["verdicts"] == {
        "THE ANSWER IS 4": ["all_caps passed: capitals"],
        "the answer is 4": ["all_caps failed: lower-case letters"],
    }


def test_the_reference_store_is_named_without_its_password():
    store = ReferenceStore("redis://:s3cret@127.0.0.1:6390/2", timeout_s=0.1)
    assert store.name == "Redis at redis://127.0.0.1:6390/2"
    assert "s3cret" not in ReferenceStore("unix:///run/redis.sock", timeout_s=0.1).name + store.name


def test_the_load_command_refuses_a_catalog_with_repeated_ids(tmp_path, capsys):
    path = tmp_path / "ads.json"
    path.write_text(json.dumps([{"id": 1, "cost": 10, "ctr": 0.01, "category": "food"}] * 2))
    with pytest.raises(SystemExit) as exit_:
        ad_selection_command(["load", "--url", "redis://127.0.0.1:1/0", "--catalog", str(path)])
    assert exit_.value.code == 2
    assert "--catalog: ids listed more than once: [1]" in capsys.readouterr().err


def test_the_load_command_names_the_store_it_cannot_reach(capsys, monkeypatch):
    monkeypatch.delenv("DELIBERATE_REFERENCE_URL", raising=False)
    assert ad_selection_command(["load", "--url", "redis://127.0.0.1:1/0"]) == 1
    assert capsys.readouterr().err.startswith("error: Redis at redis://127.0.0.1:1/0: ConnectionError:")


def test_the_drafter_reads_a_pack_s_decision_prompt_from_the_pack_alone():
    """The Drafter's image lacks the Verifier's dependencies (Redis, SciPy, the sandbox): a request's pack is loaded
    through its one entry point — that pack only — with none of them installed, and gives its prompt."""
    found = run_python(
        """
        import json, sys
        sys.modules.update(redis=None, scipy=None)  # as in the Drafter's image: importing either fails
        from deliberate.decisions.prompts import decision_prompt_of
        prompt = decision_prompt_of(["ad_selection", "credit"])
        loaded = sorted(m for m in sys.modules if m.startswith(("deliberate.verifier", "deliberate.rule_packs.")))
        print(json.dumps({"help": prompt.help[:12], "loaded": loaded}))
        """
    )
    assert found["help"] == "`score_offer"  # the ad pack has none: the credit pack's is the first
    assert not [m for m in found["loaded"] if m.startswith("deliberate.verifier")]
    assert "deliberate.rule_packs.promotion.pack" not in found["loaded"]

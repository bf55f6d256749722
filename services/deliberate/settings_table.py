"""docs/configuration.md's table of every setting, from the settings models: `python -m deliberate.settings_table
--write` (`make config-table`) writes it into the page; without --write it prints the table.
tests/repo/test_config_table.py fails when the page is out of date."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from .core.config import CommonSettings, markdown_table, with_block, write_generated_pages
from .drafter.settings import DrafterSettings
from .gateway.settings import GatewaySettings
from .refiner.settings import RefinerSettings
from .risk.settings import RiskSettings
from .scheduler.settings import SchedulerSettings
from .verifier.settings import VerifierSettings

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "configuration.md"
TABLE_START, TABLE_END = "<!-- config-table: start (make config-table) -->", "<!-- config-table: end -->"
SETTINGS: dict[str, type[BaseModel]] = {
    "all": CommonSettings,
    "scheduler": SchedulerSettings,
    "drafter": DrafterSettings,
    "verifier": VerifierSettings,
    "refiner": RefinerSettings,
    "gateway": GatewaySettings,
    "risk": RiskSettings,
}


def table() -> str:
    return markdown_table(SETTINGS)


def written() -> dict[Path, str]:
    """The file the settings write, with the content it should have."""
    return {PAGE: with_block(PAGE.read_text(), TABLE_START, TABLE_END, table())}


def main() -> None:
    write_generated_pages(
        "python -m deliberate.settings_table",
        __doc__,
        "rewrite the table in docs/configuration.md",
        table,
        written,
        ROOT,
    )


if __name__ == "__main__":
    main()

"""docs/configuration.md's table is what the settings models write (`make config-table`), and it fails loudly."""

from __future__ import annotations

import pytest
from pydantic import Field

from deliberate import settings_table
from deliberate.core.config import with_block
from deliberate.scheduler.settings import SchedulerSettings


def test_the_configuration_page_holds_what_the_settings_write():
    stale = [
        str(path.relative_to(settings_table.ROOT))
        for path, text in settings_table.written().items()
        if path.read_text() != text
    ]
    assert not stale, f"out of date, run `make config-table`: {stale}"


def test_a_new_setting_makes_the_page_out_of_date_until_the_table_is_written(monkeypatch):
    class Changed(SchedulerSettings):
        brand_new_knob: int = Field(default=7, description="A setting added after the table was written.")

    monkeypatch.setitem(settings_table.SETTINGS, "scheduler", Changed)
    (path, text), *_ = settings_table.written().items()
    assert path == settings_table.ROOT / "docs" / "configuration.md"
    assert text != path.read_text()
    assert "| scheduler | `--brand-new-knob` | `DELIBERATE_BRAND_NEW_KNOB` | `7` | A setting added" in text


def test_the_tables_live_in_docs_not_in_the_readme():
    readme = (settings_table.ROOT / "README.md").read_text()
    assert settings_table.TABLE_START not in readme
    assert "| service | flag | environment variable |" not in readme
    assert "<!-- limits-table" not in readme


def test_writing_a_block_replaces_only_it_is_idempotent_and_refuses_a_page_without_markers():
    page = "intro\n<!-- s -->\nold\nrows\n<!-- e -->\noutro\n"
    once = with_block(page, "<!-- s -->", "<!-- e -->", "new")
    assert once == "intro\n<!-- s -->\nnew\n<!-- e -->\noutro\n"
    assert with_block(once, "<!-- s -->", "<!-- e -->", "new") == once
    with pytest.raises(ValueError, match="no '<!-- s -->'"):
        with_block("intro\noutro\n", "<!-- s -->", "<!-- e -->", "new")

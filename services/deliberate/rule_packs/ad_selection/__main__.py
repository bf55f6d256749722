"""`python -m deliberate.rule_packs.ad_selection load [--url redis://…] [--catalog ads.json]`: puts an ad
catalog into the reference store as a new version and makes it the one Verifiers read."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from pathlib import Path

import redis

from deliberate.decisions.reference import ReferenceStore

from . import catalog_store
from .catalog import ADS, Ad, shipped_catalog

URL_ENV = "DELIBERATE_REFERENCE_URL"
LOAD_TIMEOUT_S = 10.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m deliberate.rule_packs.ad_selection", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    load = commands.add_parser("load", help="load a catalog into the reference store and make it current")
    load.add_argument("--url", default=os.environ.get(URL_ENV), help=f"the store's Redis URL (env {URL_ENV})")
    load.add_argument(
        "--catalog", type=Path, help="a JSON list of ads ({id, cost, ctr, category}); default: the shipped catalog"
    )
    args = parser.parse_args(argv)
    if not args.url:
        parser.error(f"--url or {URL_ENV} is required")
    try:
        ads = read_catalog(args.catalog) if args.catalog else list(shipped_catalog())
    except (OSError, ValueError) as error:  # ValidationError and JSONDecodeError are ValueErrors
        parser.error(f"--catalog: {error}")
    store = ReferenceStore(args.url, LOAD_TIMEOUT_S)
    try:
        version = catalog_store.load(store, ads)
    except redis.RedisError as error:  # say which store, no traceback
        print(f"error: {store.name}: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    finally:
        store.close()
    print(f"loaded {len(ads)} ads into {store.name} as version {version}; it is now current")
    return 0


def read_catalog(path: Path) -> list[Ad]:
    ads = ADS.validate_python(json.loads(path.read_text()))
    duplicated = sorted(ad_id for ad_id, count in Counter(ad.id for ad in ads).items() if count > 1)
    if duplicated:
        raise ValueError(f"ids listed more than once: {duplicated}")
    return ads


if __name__ == "__main__":
    sys.exit(main())

"""The ad catalog in the reference store, versioned so that a verification never mixes two catalogs.

Layout: `load` writes the whole catalog under a new version, `…:catalog:v<version>` (a hash, ad id → the ad
as JSON), and only then points `…:catalog:current` at it, with one atomic SET. A verification reads the
pointer once and then only that version, which never changes — so each version is fetched from Redis once
per Verifier process and every later verification costs one GET. A version is `<N>-<random>`: a Redis that
restarted empty counts from 1 again, and its new version 1 must not be taken for the old one. The version
replaced by a load expires after `REPLACED_VERSION_TTL_S`, long after any verification that read the old
pointer has finished.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

from pydantic import ValidationError

from deliberate.decisions.packs import ReferenceUnavailable

if TYPE_CHECKING:  # the store's module needs Redis; the pack loads without it
    from deliberate.decisions.reference import ReferenceStore

from .catalog import Ad

PREFIX = "deliberate:ad_selection:catalog"
CURRENT = f"{PREFIX}:current"  # the version verifications read
LAST_VERSION = f"{PREFIX}:last_version"  # the last version number handed out
REPLACED_VERSION_TTL_S = 600
LOAD_HINT = "load a catalog with `python -m deliberate.rule_packs.ad_selection load`"


def version_key(version: str) -> str:
    return f"{PREFIX}:v{version}"


def current_catalog(store: ReferenceStore) -> dict[int, Ad]:
    """The catalog as of now: the pointer read once, then that version. Raises ReferenceUnavailable."""
    pointer = store.get(CURRENT)
    if pointer is None:
        raise store.missing(CURRENT, f"no ad catalog has been loaded; {LOAD_HINT}")
    return catalog_version(store, pointer.decode())


@lru_cache(maxsize=4)  # a version's contents never change; a failed read is not cached
def catalog_version(store: ReferenceStore, version: str) -> dict[int, Ad]:
    key = version_key(version)
    rows = store.hgetall(key)
    if not rows:
        raise store.missing(key, f"the current version is gone; {LOAD_HINT}")
    try:
        return {int(ad_id): Ad.model_validate_json(row) for ad_id, row in rows.items()}
    except (ValueError, ValidationError) as error:
        raise ReferenceUnavailable(f"{store.name}: {key} is not an ad catalog: {error}") from None


def load(store: ReferenceStore, ads: Sequence[Ad]) -> str:
    """Writes `ads` as a new version, then makes it current; returns the version."""
    if not ads:
        raise ValueError("the catalog is empty")
    client = store.client
    version = f"{client.incr(LAST_VERSION)}-{secrets.token_hex(4)}"
    key = version_key(version)
    with client.pipeline(transaction=True) as write:
        write.delete(key)
        write.hset(key, mapping={str(ad.id): ad.model_dump_json() for ad in ads})
        write.execute()
    replaced = client.set(CURRENT, version, get=True)
    if replaced is not None:
        client.expire(version_key(replaced.decode()), REPLACED_VERSION_TTL_S)
    return version

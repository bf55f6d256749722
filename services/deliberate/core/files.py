"""Files written so that a reader sees the old content or the new, never a part: a temporary file in the same
directory, fsynced, renamed over the target."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomically(path: Path, payload: bytes) -> None:
    """Write a temp file in `path`'s directory, fsync it, then rename it over `path`.

    A failure at any step leaves `path` as it was and removes the temp file.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as temp:
            temp.write(payload)
            temp.flush()
            os.fsync(temp.fileno())
        os.replace(temp_name, path)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise
    _fsync_directory(path.parent)


def _fsync_directory(directory: Path) -> None:
    # Makes the rename itself durable across power loss; not every platform can open a directory.
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)

"""The Go client's contract code (clients/go/gen) is exactly what `make proto-go` generates from protos/ with the
pinned plugins (Debian's protoc-gen-go and protoc-gen-go-grpc; clients/go/generate.sh). Skipped, saying why,
where those plugins are not installed (.ci/run installs them)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GO_CLIENT = ROOT / "clients/go"
BUF = shutil.which("buf", path=str(Path(sys.executable).parent)) or shutil.which("buf")
PLUGINS_MISSING = 3  # generate.sh's exit status when a plugin is absent or another version


def generated_files(root: Path) -> dict[str, str]:
    return {str(path.relative_to(root)): path.read_text() for path in sorted(root.glob("gen/**/*.go"))}


@pytest.mark.skipif(BUF is None, reason="buf is not installed (make install)")
def test_committed_go_code_matches_the_protos(tmp_path):
    done = subprocess.run(
        ["bash", str(GO_CLIENT / "generate.sh"), str(tmp_path)],
        capture_output=True,
        text=True,
        env={**os.environ, "BUF": BUF},
    )
    if done.returncode == PLUGINS_MISSING:
        pytest.skip(done.stderr.strip())
    assert done.returncode == 0, done.stderr
    fresh, committed = generated_files(tmp_path), generated_files(GO_CLIENT)
    assert fresh, "the generator produced nothing"
    assert sorted(fresh) == sorted(committed), "Go files added or removed: run `make proto-go`"
    drifted = [name for name in fresh if fresh[name] != committed[name]]
    assert not drifted, f"Go code drifted from the protos, run `make proto-go`: {drifted}"


def test_every_proto_has_its_go_package():
    """Managed mode names each package after its proto package: deliberate/scheduler/v1 -> schedulerv1."""
    for proto in sorted((ROOT / "protos").glob("deliberate/*/v1/*.proto")):
        service = proto.parent.parent.name
        go_file = GO_CLIENT / "gen" / proto.relative_to(ROOT / "protos").with_suffix(".pb.go")
        assert go_file.exists(), f"{go_file} missing: run `make proto-go`"
        assert f"\npackage {service}v1\n" in go_file.read_text()

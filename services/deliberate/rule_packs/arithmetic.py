"""The arithmetic pack: every `a op b = c` the draft writes is recomputed exactly; a draft without one abstains. It
reads the draft's text with the Verifier's equation parser (`verifier.arithmetic`), and is installed under the
`deliberate.rule_packs` entry point like every other pack."""

from __future__ import annotations

from pydantic import BaseModel

from deliberate.decisions.packs import Abstained, CheckResult, RulePack, check
from deliberate.verifier.arithmetic import check_arithmetic, format_wrong

MAX_REPORTED = 5


class NoParams(BaseModel):
    pass


class ArithmeticPack(RulePack):
    name = "arithmetic"
    answer_model = None  # reads the draft's text
    params_model = NoParams

    @check("arithmetic")
    def recompute(self, text: str) -> CheckResult:
        report = check_arithmetic(text)
        if report.checked == 0:
            return Abstained("no equation to recompute")
        if report.wrong:
            shown = "; ".join(format_wrong(w) for w in report.wrong[:MAX_REPORTED])
            more = f" (+{len(report.wrong) - MAX_REPORTED} more)" if len(report.wrong) > MAX_REPORTED else ""
            return False, f"{len(report.wrong)} of {report.checked} equations wrong: {shown}{more}"
        return True, f"{report.checked} equations recomputed, all correct"

"""`deliberate bench eval --judges`: the settings parsed, one row per judge read from its runs, and the table."""

from __future__ import annotations

from deliberate.selection import same_answer
from deliberate_bench.eval.stats import percentile


def parse_judges(text: str) -> list[tuple[str, str]]:
    """`rules=off,trained=DIR` -> [("rules", "off"), ("trained", "DIR")]."""
    pairs = []
    for item in text.split(","):
        label, sep, setting = item.strip().partition("=")
        if not sep or not label.strip() or not setting.strip():
            raise ValueError(f"--judges: {item!r} is not label=setting")
        pairs.append((label.strip(), setting.strip()))
    if len({label for label, _ in pairs}) != len(pairs):
        raise ValueError("--judges: a label is given twice")
    return pairs


def judge_row(label: str, judge: str, records: list[dict]) -> dict:
    """One judge setting's row: accuracy, latency and what the judge said, from its runs' GSM8K records."""
    solved = [r["solve"] for r in records]
    latencies = [x["latency_s"] for x in solved]
    drafts = [d for x in solved for d in x.get("drafts", [])]
    judged = [d["judge"] for d in drafts if "judge" in d]
    return {
        "label": label,
        "judge": judge,
        "problems": len(records),
        "correct": sum(same_answer(r["solve"].get("answer"), r["gold"]) for r in records),
        "verified": sum(x.get("status") == "VERIFIED" for x in solved),
        "mean_latency_s": round(sum(latencies) / len(latencies), 2) if latencies else None,
        "p95_latency_s": round(percentile(latencies, 0.95), 2) if latencies else None,
        "mean_verify_s": round(sum(x["timings"]["verify"] for x in solved) / len(solved), 2) if solved else None,
        "drafts": len(drafts),
        "drafts_judged": len(judged),
        "judge_said_valid": sum(j["valid"] for j in judged if not j["error"].startswith("judge ")),
        "judge_unusable": sum(j["error"].startswith("judge ") for j in judged),
        "errors": sum(1 for x in solved if x.get("error")),
    }  # fmt: skip


def judges_markdown(result: dict) -> str:
    lines = [
        f"Judges compared on the same {result['judges'][0]['problems']} GSM8K problems: accuracy of the pipeline's "
        "final answer, latency of the whole Solve.",
        "",
        "`" + " ".join(f"{k}={v}" for k, v in result.get("environment", {}).items()) + f" {result['command']}`",
        "",
        "| setting | --judge | accuracy | VERIFIED | mean latency | p95 latency | mean verify stage "
        "| drafts judged | judge said valid | judge unusable |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in result["judges"]:
        accuracy = "—" if r["accuracy"] is None else f"{r['correct']}/{r['problems']} = {100 * r['accuracy']:.0f} %"
        lines.append(
            f"| {r['label']} | `{r['judge']}` | {accuracy} | {r['verified']} | {r['mean_latency_s']} s "
            f"| {r['p95_latency_s']} s | {r['mean_verify_s']} s | {r['drafts_judged']}/{r['drafts']} "
            f"| {r['judge_said_valid']} | {r['judge_unusable']} |"
        )
    return "\n".join(lines) + "\n"

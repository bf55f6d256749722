"""`deliberate bench eval`'s pure parts: answers, gold parsing, voting, the replay of recorded drafts, statistics, the
sample, and the summary built from runs records."""

from __future__ import annotations

import json
from fractions import Fraction

import pytest

from deliberate.selection import answer_value, majority, same_answer
from deliberate.selection.answers import parse_gold
from deliberate_bench.eval import outcomes, report, summary
from deliberate_bench.eval.ads import check_ad_plan
from deliberate_bench.eval.calls import Settings, gsm8k_request, without_early_stop
from deliberate_bench.eval.problems import Problem, load_problems, read_exclusions
from deliberate_bench.eval.replay import ABLATIONS, live_check, replay
from deliberate_bench.eval.stats import paired_bootstrap, percentile, wilson
from deliberate_bench.results import LAB_FILES, read_runs

# --- answers -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "value"),
    [
        ("72", Fraction(72)),
        ("72.0", Fraction(72)),
        ("$1,200.50", Fraction(2401, 2)),
        ("\\boxed{72}", Fraction(72)),
        ("The total is \\boxed{\\$1{,}200}", Fraction(1200)),
        ("\\frac{3}{4}", Fraction(3, 4)),
        ("\\dfrac{10}{4} \\text{ hours}", Fraction(5, 2)),
        ("72 clips", Fraction(72)),
        ("48 + 24 = 72", Fraction(72)),
        ("-5 degrees", Fraction(-5)),
        ("15%", Fraction(15)),
        ("no idea", None),
        ("", None),
        (None, None),
    ],
)
def test_answer_value_reads_numbers_latex_and_units(answer, value):
    assert answer_value(answer) == value


def test_the_gold_check_is_the_one_answer_identity():
    assert same_answer("72.00", "72")
    assert same_answer("$72", "72")
    assert same_answer("\\frac{1}{4}", "0.25")
    assert not same_answer("73", "72")
    assert not same_answer(None, "72")
    assert not same_answer("0.33", "1/3")  # exact: no tolerance


def test_parse_gold_takes_the_number_after_the_last_marker():
    assert parse_gold("48/2 = 24 clips in May.\n#### 72") == "72"
    assert answer_value(parse_gold("Weng earns 12/60 = $0.2 per minute.\n#### 1,000")) == 1000
    assert parse_gold("#### -3") == "-3"
    with pytest.raises(ValueError, match="####"):
        parse_gold("72")
    with pytest.raises(ValueError, match="no number"):
        parse_gold("#### many")


def test_majority_counts_values_ignores_missing_answers_and_breaks_ties_by_first():
    assert majority(["72", "72.00", "5", None, "5", "$72"]) == "72"
    assert majority(["5", "72", "72", "5"]) == "5"  # tie: the answer given first
    assert majority([None, "", "  "]) is None
    assert majority(["seven", "Seven", "8"]) == "seven"


# --- replay: the selection package on recorded drafts ------------------------------------------------


def recorded(index, valid, score, answer, latency=0.0, evidence=(), share=None, round_=0, selected=False):
    """One draft record as `deliberate bench eval` writes it (components as the Scheduler reported them)."""
    components = {"latency": latency, "alpha": 1.0, "beta": 0.3, "gamma": 0.5, "delta": 0.3}
    if share is not None:
        components["answer_share"] = share
    return {"round": round_, "index": index, "valid": valid, "score": score, "answer": answer,
            "evidence": list(evidence), "components": components, "selected": selected}  # fmt: skip


def test_each_ablation_term_can_change_the_pick():
    drafts = [
        recorded(0, True, 0.90, "10", latency=1.0),  # best score, slow verification
        recorded(1, True, 0.80, "12"),
        recorded(2, True, 0.80, "12.0"),  # agrees with draft 1 by value
        recorded(3, True, 0.85, "11"),
        recorded(4, False, 1.0, "3"),  # invalid drafts do not compete
    ]
    picks = {}
    for name, terms in ABLATIONS.items():
        weights = {"score": 1.0, "agreement": 0.3, "latency": -0.5, "answer_share": 0.3}
        picks[name] = replay(drafts, "weighted", {t: w for t, w in weights.items() if t in terms}).selected[0].index
    assert picks == {
        "select:score": 0,
        "select:score+stddev": 0,  # one value per request: never reorders
        "select:score+stddev+latency": 3,  # 0.90 − 0.5 < 0.85
        "select:score+stddev+latency+agreement": 1,  # share 0.5 lifts 0.80 to 0.95 over 0.85 + 0.075
    }


def test_without_a_valid_draft_the_best_score_comes_first():
    drafts = [recorded(0, False, 0.2, "1"), recorded(1, False, 0.4, "2", latency=0.9)]
    assert replay(drafts, "weighted").selected[0].index == 1
    assert replay(drafts, "best_of").selected[0].index == 1


def test_the_replay_ranks_checked_drafts_first_as_the_scheduler_does():
    drafts = [recorded(0, True, 1.0, "90"), recorded(1, True, 1.0, "20", latency=0.5, evidence=["arithmetic"])]
    assert [c.index for c in replay(drafts, "weighted").selected] == [1, 0]


def test_recorded_shares_reproduce_the_old_scheduler_and_the_live_check_sees_it():
    # The old Scheduler compared "12 apples" and "12" as different answers: shares 1/3 each.
    drafts = [
        recorded(0, True, 0.9, "15", share=1 / 3, evidence=["arithmetic"], selected=True),
        recorded(1, True, 0.8, "12 apples", share=1 / 3, evidence=["arithmetic"], selected=True),
        recorded(2, True, 0.8, "12", share=1 / 3, evidence=["arithmetic"]),
    ]
    record = {"id": "p", "gold": "12", "solve": {"drafts": drafts}}
    assert live_check([record]) == {"problems": 1, "same_selection": 1, "differing": []}
    assert replay(drafts, "weighted").selected[0].index == 1  # the one identity: 12 apples and 12 agree
    # Recorded with the signals map, the run claims the one identity: then the replay recomputes the shares, and
    # a Scheduler that had still selected drafts 0 and 1 is caught disagreeing.
    drafts[2]["components"]["signals"] = {"answer_share": 2 / 3}
    assert live_check([record]) == {"problems": 1, "same_selection": 0, "differing": ["p"]}


# --- statistics -----------------------------------------------------------------------------------


def test_wilson_interval_matches_known_values():
    low, high = wilson(81, 100)
    assert low == pytest.approx(0.7222, abs=1e-4)
    assert high == pytest.approx(0.8749, abs=1e-4)
    assert wilson(0, 10) == (0.0, pytest.approx(0.2775, abs=1e-4))
    assert wilson(10, 10)[0] == pytest.approx(0.7225, abs=1e-4)
    assert wilson(0, 0) == (0.0, 1.0)


def test_paired_bootstrap_difference_and_interval():
    assert paired_bootstrap([True] * 20, [True] * 20) == (0.0, 0.0, 0.0)
    assert paired_bootstrap([True] * 20, [False] * 20) == (1.0, 1.0, 1.0)
    better = [True] * 30 + [False] * 70
    worse = [False] * 10 + [True] * 10 + [False] * 10 + [True] * 10 + [False] * 60  # 20 gains, 10 losses
    diff, low, high = paired_bootstrap(better, worse, seed=7, resamples=4000)
    assert diff == pytest.approx(0.10)
    assert low < diff < high
    assert -0.1 < low < 0.1 < high < 0.3
    assert paired_bootstrap(better, worse, seed=7, resamples=4000) == (diff, low, high)  # fixed seed
    with pytest.raises(ValueError):
        paired_bootstrap([True], [True, False])


def test_percentiles_interpolate_linearly():
    values = list(range(1, 101))
    assert percentile(values, 0.50) == pytest.approx(50.5)
    assert percentile(values, 0.95) == pytest.approx(95.05)
    assert percentile(values, 0.99) == pytest.approx(99.01)
    assert percentile([], 0.5) is None


# --- the sample -----------------------------------------------------------------------------------


def test_sample_excludes_tuning_lines_and_grows_by_prefix(tmp_path):
    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps({"question": f"q{i}", "answer": f"… #### {i}"}) + "\n" for i in range(40)))
    exclude = tmp_path / "tuning.txt"
    exclude.write_text("# tuned on these\n0-9\n15  # and this one\n")
    excluded = read_exclusions(exclude)
    assert excluded == set(range(10)) | {15}
    small = load_problems(data, 5, 2026, excluded)
    large = load_problems(data, 20, 2026, excluded)
    assert [p.id for p in large[:5]] == [p.id for p in small]
    every = load_problems(data, 100, 2026, excluded)
    assert len(every) == 29 and not {p.line for p in every} & excluded
    assert {p.gold for p in every} == {str(p.line) for p in every}


def test_committed_tuning_list_excludes_the_first_50_lines():
    from deliberate_bench.eval.problems import DEFAULT_EXCLUDE

    assert set(range(50)) <= read_exclusions(DEFAULT_EXCLUDE)


# --- ad plans -------------------------------------------------------------------------------------


def test_ad_plans_are_checked_against_the_catalog():
    from deliberate_client.examples.ads import Ad

    catalog = [Ad(id=i, cost=900, ctr=0.01 * i, category=f"c{i}") for i in range(1, 8)]
    catalog.append(Ad(id=8, cost=900, ctr=0.05, category="c1"))
    assert check_ad_plan('{"selected_ids": [1, 2, 3, 4, 5]}', catalog) == (True, "cost 4500, ctr 0.1500")
    assert check_ad_plan('{"selected_ids": [1, 2, 3, 4, 8]}', catalog)[1] == "two ads of one category"
    assert check_ad_plan('{"selected_ids": [1, 2, 3, 4, 99]}', catalog)[1] == "ids not in the catalog: [99]"
    assert not check_ad_plan('{"selected_ids": [1, 2, 3, 4]}', catalog)[0]
    assert not check_ad_plan('{"selected_ids": [1, 1, 2, 3, 4]}', catalog)[0]
    assert not check_ad_plan("I pick the best ones.", catalog)[0]
    pricey = [Ad(id=i, cost=1500, ctr=0.01, category=f"c{i}") for i in range(1, 6)]
    assert check_ad_plan('{"selected_ids": [1, 2, 3, 4, 5]}', pricey)[1] == "cost 7500 > 5000"


# --- the summary ----------------------------------------------------------------------------------


def draft(index, answer, valid=True, score=1.0, **extra):
    components = {"score": score, "agreement": 1.0, "latency": 0.0, "answer_share": 0.0, "final": score}
    components |= {"alpha": 1.0, "beta": 0.3, "gamma": 0.02}
    return {
        "round": 0,
        "index": index,
        "answer": answer,
        "valid": valid,
        "score": score,
        "finish_reason": "STOP",
        "completion_tokens": 10,
        "generation_latency_s": 1.0 + index,
        "verify_latency_s": 0.5,
        "components": components,
        "evidence": ["arithmetic"] if valid else [],
    } | extra


def record(i, gold, single, drafts, final, status, subset=None):
    return {
        "task": "gsm8k",
        "id": f"train:{i}",
        "gold": gold,
        "settings": {"sizes": [2, 3], "seed": 2026, "engine": "llamacpp", "model": "m"},
        "single": {"answer": single, "finish_reason": "STOP", "completion_tokens": 10, "latency_s": 2.0},
        "solve": {
            "answer": final,
            "status": status,
            "latency_s": 8.0,
            "completion_tokens": 40,
            "refine_tokens": 10,
            "refine_token_budget": 64,
            "drafts": drafts,
        },
        "subsets": {"2": subset} if subset else {},
        "rss_mb": {"drafter": 500.0, "verifier": 50.0, "refiner": 400.0, "scheduler": 40.0},
    }


RECORDS = [
    # single wrong; drafts 7, 7, 9 (draft 2 scores best) — majority right, best_of@3 wrong, pipeline right
    record(
        0,
        "7",
        "8",
        [draft(0, "7", score=0.5), draft(1, "7", score=0.5), draft(2, "9", score=0.9)],
        "7",
        "VERIFIED",
        {"answer": "7", "status": "VERIFIED", "latency_s": 5.0, "completion_tokens": 30},
    ),
    # everything right
    record(
        1,
        "3",
        "3",
        [draft(0, "3"), draft(1, "3"), draft(2, "3")],
        "3",
        "VERIFIED",
        {"answer": "3", "status": "VERIFIED", "latency_s": 5.0, "completion_tokens": 30},
    ),
    # nothing valid, no answer anywhere
    record(
        2,
        "4",
        None,
        [draft(0, None, valid=False, score=0.0), draft(1, "5", valid=False, score=0.2), draft(2, None, valid=False)],
        "5",
        "UNVERIFIED",
    ),
]


def test_summary_counts_add_up_and_pairs_problems():
    result = summary.summary(RECORDS)
    assert result["problems"] == 3 and result["engine"] == "llamacpp" and result["seed"] == 2026
    configs = {c["name"]: c for c in result["configs"]}
    assert list(configs)[:3] == ["single", "majority@2", "majority@3"]
    assert set(outcomes.ABLATION_NAMES) <= set(configs)
    partial = configs.pop("pipeline@2")  # run on 2 of the 3 problems only: reported, but not paired
    assert partial["problems"] == 2 and partial["correct"] == 2 and partial["diff_vs_single"] is None
    for c in configs.values():
        assert c["problems"] == 3
        assert c["correct"] + sum(c["failures"].values()) == 3
    assert configs["single"]["correct"] == 1 and configs["single"]["failures"] == {"no_answer": 1, "wrong": 1}
    assert configs["majority@3"]["correct"] == 2
    assert configs["best_of@3"]["correct"] == 1
    assert configs["select:score"]["correct"] == configs["best_of@3"]["correct"]
    pipeline = configs["pipeline@3"]
    assert pipeline["correct"] == 2 and pipeline["failures"] == {"flagged": 1}
    assert pipeline["verified_precision"] == 1.0 and pipeline["unverified_accuracy"] == 0.0
    assert pipeline["statuses"] == {"UNVERIFIED": 1, "VERIFIED": 2}
    assert pipeline["diff_vs_single"] == pytest.approx(1 / 3, abs=1e-4)
    assert pipeline["peak_rss_mb"] == 990.0 and configs["single"]["peak_rss_mb"] == 500.0
    assert configs["majority@3"]["tokens_per_problem"] == 30.0
    assert configs["majority@3"]["latency_p50_s"] == 3.0  # the slowest of the 3 drafts
    assert configs["best_of@3"]["latency_p50_s"] == 3.5  # … plus its verification
    for key in ("accuracy", "ci_low", "ci_high", "diff_ci_low", "diff_ci_high", "latency_p95_s", "latency_p99_s"):
        assert key in pipeline
    table = report.markdown(result)
    assert "| `pipeline@3` | 3 |" in table and "VERIFIED 2: 100.0 % right" in table


def test_ad_selection_summary():
    ads = [
        {
            "task": "ads",
            "id": f"ads:{seed}",
            "catalog_seed": seed,
            "settings": {"sizes": [3, 5]},
            "single": {"satisfied": False, "latency_s": 3.0, "completion_tokens": 40},
            "solve": {"satisfied": seed % 2 == 0, "status": "VERIFIED", "latency_s": 9.0, "completion_tokens": 90},
        }
        for seed in range(2027, 2031)
    ]
    result = summary.summary(ads)["ad_selection"]
    assert result["instances"] == 4 and result["catalog_seeds"] == [2027, 2028, 2029, 2030]
    single, pipeline = result["configs"]
    assert single["name"] == "single" and single["satisfied"] == 0
    assert pipeline["name"] == "pipeline@5" and pipeline["satisfied_share"] == 0.5
    assert pipeline["verified"] == 4 and pipeline["verified_satisfied"] == 2


def test_the_pipeline_is_reported_both_ways_on_the_problems_solved_both_ways():
    def both(base: dict, answer, latency, tokens, **extra) -> dict:
        return base | {"solve_without_early_stop": {"answer": answer, "status": "VERIFIED", "latency_s": latency,
                                                    "completion_tokens": tokens} | extra}  # fmt: skip

    with_stops = {"aborted": 2, "cancelled": 1, "reached": True}
    gsm8k = [
        # with: right, 8 s, 40 tokens (record's defaults); without: wrong, 16 s, 100 tokens
        both(RECORDS[0] | {"solve": RECORDS[0]["solve"] | {"early_stop": with_stops}}, "9", 16.0, 100),
        both(RECORDS[1], "3", 8.0, 60),  # right both ways
        RECORDS[2],  # solved one way only: left out of the comparison
    ]
    ad = {
        "task": "ads",
        "id": "ads:7",
        "catalog_seed": 7,
        "settings": {"sizes": [2, 3]},
        "single": {"satisfied": False, "latency_s": 1.0, "completion_tokens": 5},
        "solve": {"satisfied": False, "status": "UNVERIFIED", "latency_s": 4.0, "completion_tokens": 20},
        "solve_without_early_stop": {
            "satisfied": True,
            "status": "VERIFIED",
            "latency_s": 8.0,
            "completion_tokens": 40,
        },
    }
    result = summary.summary(gsm8k + [ad])
    comparison = result["early_stop"]
    assert (comparison["n"], comparison["n_gsm8k"], comparison["n_ads"]) == (3, 2, 1)
    assert comparison["latency_ratio"] == pytest.approx((8 + 8 + 4) / (16 + 8 + 8), abs=1e-3)
    assert comparison["token_ratio"] == pytest.approx((40 + 40 + 20) / (100 + 60 + 40), abs=1e-3)
    assert comparison["accuracy_with"] == 1.0 and comparison["accuracy_without"] == 0.5
    assert comparison["valid_rate_with"] == 0.0 and comparison["valid_rate_without"] == 1.0
    assert (comparison["aborted"], comparison["cancelled"], comparison["quorum_reached"]) == (2, 1, 1)
    assert comparison["with"]["verified"] == 2 and comparison["without"]["verified"] == 3
    table = report.markdown(result)
    assert "latency ratio 0.625" in table and "| off | 1/2 | 1/1 | 3 | 32.0 s | 200 | 0 |" in table
    assert summary.summary(RECORDS)["early_stop"] is None


def test_without_early_stop_switches_off_streaming_verification_the_quorum_and_the_confidence_stop_only():
    s = Settings(sizes=[5], max_new_tokens=64, refine_max_new_tokens=None, temperature=None, seed=3,
                 check_arithmetic=True, refine_subsets=False, ads_catalog_size=100, timeout_s=1.0,
                 engine="llamacpp", model="m")  # fmt: skip
    request = gsm8k_request(Problem("train:1", 1, "What is 2 + 2?", "4"), s)
    plain = without_early_stop(request)
    assert plain.disable_streaming_verification and plain.disable_quorum
    assert plain.HasField("confidence_stop") and not plain.confidence_stop, "said, not left to the deployment"
    assert not request.disable_streaming_verification and not request.disable_quorum
    assert not request.HasField("confidence_stop")
    assert plain.request_id == request.request_id + "-without-early-stop"
    plain.request_id, plain.disable_streaming_verification, plain.disable_quorum = request.request_id, False, False
    plain.ClearField("confidence_stop")
    assert plain == request  # nothing else differs: same prompt, drafts, seed and budgets
    assert s.fingerprint().get("early_stop") is None  # "on" keeps runs files made before the option readable
    assert Settings(**{**s.__dict__, "early_stop": "both"}).fingerprint()["early_stop"] == "both"


def test_results_name_the_embedded_model_it_stood_for():
    """Runs made before issue 40 recorded `embedded` for the 0.5B model; runs since spell the model out."""
    from deliberate_bench.eval.outcomes import model_name

    assert model_name("embedded") == "qwen2.5-coder-0.5b (embedded)"
    assert model_name("/models/mine.gguf") == "/models/mine.gguf"


def test_draft_analysis_by_position_and_headroom():
    from deliberate.drafter.prompts import DEFAULT_STRATEGIES
    from deliberate_bench.eval.summary import draft_analysis

    analysis = draft_analysis(RECORDS, 3)
    first, _, third = analysis["by_position"]
    assert first["strategy"] == DEFAULT_STRATEGIES[0] and first["drafts"] == 3
    assert first["correct_share"] == round(2 / 3, 4)  # right on problems 0 and 1
    assert third["correct_share"] == round(1 / 3, 4)  # "9" on problem 0 is wrong
    assert first["checked_share"] == round(2 / 3, 4) and first["valid_share"] == round(2 / 3, 4)
    assert analysis["any_draft_right_share"] == round(2 / 3, 4)  # nothing right on problem 2


def test_the_replay_reproduces_the_committed_evaluation(tmp_path):
    """The committed 100-problem runs, replayed by the selection package: every selection row of the committed
    table comes out again, and the live policy selects what the live Scheduler selected on every problem."""
    from deliberate_bench.eval.evaluation import replay_runs

    committed = {c["name"]: c for c in json.loads((LAB_FILES / "eval-gsm8k-100.json").read_text())["configs"]}
    assert replay_runs(LAB_FILES / "eval-gsm8k-100.runs.jsonl", tmp_path) == 0
    replayed = json.loads((tmp_path / "eval-gsm8k-100.replay.json").read_text())
    by_name = {c["name"]: c for c in replayed["configs"]}
    for name in ["majority@3", "majority@5", "best_of@3", "best_of@5", "pipeline@5", *ABLATIONS]:
        for field in ("correct", "diff_ci_low", "diff_ci_high", "tokens_per_problem"):
            assert by_name[name][field] == committed[name][field], (name, field)
    assert replayed["replay"]["live_check"] == {"problems": 100, "same_selection": 100, "differing": []}
    assert "weighted@5" in by_name and (tmp_path / "eval-gsm8k-100.replay.md").read_text().startswith("GSM8K, 100")


def test_a_learned_policy_never_sees_the_labels_of_the_problems_it_ranks():
    """Cross-validation by problem: relabelling one problem changes the weights of the other folds only."""
    from deliberate_bench.eval.replay import FOLDS, cross_validated

    records = read_runs(LAB_FILES / "eval-gsm8k-100.runs.jsonl")
    records = [r for r in records if r["task"] == "gsm8k"][:40]
    best, weights = cross_validated(records, 5, same_answer)
    assert len(weights) == FOLDS and all("score" in fold for fold in weights)
    i = next(i for i, r in enumerate(records) if any(d["valid"] and same_answer(d["answer"], r["gold"])
                                                     for d in r["solve"]["drafts"]))  # fmt: skip
    relabelled = [dict(r) for r in records]
    relabelled[i]["gold"] = "123456789"  # its right drafts become wrong ones
    best_after, weights_after = cross_validated(relabelled, 5, same_answer)
    fold = i % FOLDS
    assert weights_after[fold] == weights[fold]  # the weights that rank problem i never read its label
    assert all(weights_after[f] != weights[f] for f in range(FOLDS) if f != fold)  # the other folds did
    assert best_after[i].draft_id == best[i].draft_id


def test_a_mixed_round_is_also_replayed_kind_by_kind_with_an_oracle_row():
    drafts = [
        recorded(0, True, 1.0, "70", evidence=["arithmetic"]) | {"kind": "prose"},
        recorded(1, True, 1.0, "70", evidence=["arithmetic"]) | {"kind": "prose"},
        recorded(2, True, 1.0, "72", evidence=["program"]) | {"kind": "program"},
        recorded(3, False, 0.0, "12") | {"kind": "program"},
    ]
    for d in drafts:
        d |= {"generation_latency_s": 1.0, "verify_latency_s": 0.0, "completion_tokens": 10, "finish_reason": "STOP"}
    record = {"gold": "72", "single": {"answer": "70"}, "solve": {"drafts": drafts, "answer": "70"}}
    found = outcomes.outcomes(record, [4])
    assert found["majority@4"].correct is False  # 70 twice, 72 once
    assert found["best_of@2:program"].correct and not found["best_of@2:prose"].correct
    assert found["pass@4"].correct and found["pass@2:program"].correct and not found["pass@2:prose"].correct
    assert outcomes.order_key("majority@2:program") < outcomes.order_key("majority@2:prose")
    assert summary.config_summary("majority@2:program", [found["majority@2:program"]], [], None, 4)["n"] == 2
    assert found["single:program"].correct  # the round's first program alone
    assert summary.config_summary("single:program", [found["single:program"]], [], None, 4)["n"] == 1


def test_a_round_of_four_prose_drafts_and_four_programs_is_replayed_in_every_mix_of_five():
    from deliberate_bench.eval.replay import first_of_kinds, mixes

    prose = [recorded(i, True, 1.0, "70", evidence=["arithmetic"]) | {"kind": "prose"} for i in range(4)]
    programs = [recorded(4 + i, True, 1.0, "72", evidence=["program"]) | {"kind": "program"} for i in range(4)]
    solve = {"drafts": prose + programs, "answer": "70"}
    assert mixes(solve) == [(4, 1), (3, 2), (2, 3), (1, 4)]
    assert [d["index"] for d in first_of_kinds(solve, 3, 2)] == [0, 1, 2, 4, 5]
    for d in solve["drafts"]:
        d |= {"generation_latency_s": 1.0, "verify_latency_s": 0.0, "completion_tokens": 10, "finish_reason": "STOP"}
    found = outcomes.outcomes({"gold": "72", "single": {"answer": "70"}, "solve": solve}, [8])
    assert not found["majority@5:3+2"].correct and found["majority@5:2+3"].correct  # the vote follows the mix
    assert found["pass@5:4+1"].correct and not found["pass@4:prose"].correct


def test_the_headline_reads_recorded_drafts_as_the_default_round_and_scores_the_targets():
    from deliberate_bench.eval.headline import PROGRAM_DRAFTS, headline, headline_rows
    from deliberate_bench.eval.replay import mix_suffix

    records = read_runs(LAB_FILES / "eval-tuning.runs.jsonl")  # 4 prose drafts + 4 programs each
    result = headline(records, "eval-tuning.runs.jsonl")
    by_name = {c["name"]: c for c in result["configs"]}
    assert result["problems"] == len(records) and result["default_round"]["programs"] == PROGRAM_DRAFTS
    assert {"single", "single:program", "majority@5", "pipeline@5", "pass@5", "pipeline@8:live"} <= set(by_name)
    assert headline_rows()["pipeline@5"] == "weighted" + mix_suffix(5 - PROGRAM_DRAFTS, PROGRAM_DRAFTS)
    replayed = {c["name"]: c for c in summary.summary(records)["configs"]}
    assert by_name["pipeline@5"]["correct"] == replayed[headline_rows()["pipeline@5"]]["correct"]
    assert by_name["pass@5"]["correct"] >= max(by_name[name]["correct"] for name in ("pipeline@5", "majority@5"))
    pipeline = by_name["pipeline@5"]
    assert pipeline["verified"] + sum(n for s, n in pipeline["statuses"].items() if s != "VERIFIED") == len(records)
    assert [type(t["met"]) for t in result["targets"]] == [bool] * 4
    by_evidence = result["verified_by_evidence"]
    assert sum(g["problems"] for g in by_evidence.values()) == len(records)
    assert sum(g["right"] for g in by_evidence.values()) == pipeline["correct"]
    missed = result["missed_by_selection"]  # every problem the oracle has and the pick lacks, in exactly one shape
    assert missed["problems"] == by_name["pass@5"]["correct"] - pipeline["correct"]
    shapes = ("right_led", "right_tied", "right_minority", "right_alone")
    assert sum(missed[shape] for shape in shapes) == missed["problems"]
    assert all(0 <= n <= missed["problems"] for n in missed["with_a_right_draft_that_is"].values())

"""The replay behind `deliberate bench early-stop-bound`: decoding on paper follows the Scheduler's rules."""

from deliberate.selection import majority
from deliberate_bench.replays.early_stop_bound import Draft, prefix_stop_share, replay

# One step takes 1 s whatever the number of sequences: tokens and seconds then count the same steps.
FLAT = [1.0] * 8


def test_without_early_stopping_every_draft_runs_to_its_end():
    drafts = [Draft(10, True, "4", None), Draft(30, False, "5", 0.5)]
    cost = replay(drafts, FLAT, quorum=0, clairvoyant=False)
    assert (cost.tokens, cost.seconds, cost.answers, cost.quorum) == (40, 30, ["4"], False)


def test_a_draft_stops_where_its_prefix_failed_and_the_quorum_cuts_the_stragglers():
    drafts = [
        Draft(10, True, "4", None),
        Draft(12, True, "4.0", None),  # the same answer by value: the quorum of 2 is reached at step 12
        Draft(40, False, "9", 0.25),  # stopped after 10 of its 40 tokens
        Draft(50, True, "7", None),  # a straggler, cut at step 12
    ]
    cost = replay(drafts, FLAT, quorum=2, clairvoyant=False)
    assert cost.quorum and cost.seconds == 12
    assert cost.tokens == 10 + 12 + 10 + 12
    assert cost.answers == ["4", "4.0"]


def test_the_clairvoyant_bound_drops_every_failing_draft_before_its_first_token():
    drafts = [Draft(10, True, "4", None), Draft(40, False, "9", 0.9), Draft(20, False, "3", None)]
    cost = replay(drafts, FLAT, quorum=2, clairvoyant=True)
    assert (cost.tokens, cost.seconds) == (10, 10)


def test_steps_take_the_time_measured_for_that_many_sequences():
    drafts = [Draft(2, True, "1", None), Draft(4, True, "2", None)]
    cost = replay(drafts, [1.0, 3.0], quorum=0, clairvoyant=False)
    assert cost.seconds == 2 * 3.0 + 2 * 1.0


def test_the_prefix_share_is_where_the_wrong_equation_line_ends():
    text = "First 2 + 2 = 4\nThen 3 * 3 = 10\nSo the answer is 10.\n"
    assert prefix_stop_share(text) == text.index("So") / len(text)
    assert prefix_stop_share("2 + 2 = 4\nFinal answer: 4\n") is None


def test_the_vote_is_the_most_common_answer_ties_to_the_first_finished():
    """The replay votes as the evaluation's majority@N does, over the answers in the order their drafts finished."""
    assert majority(["3", "5", "5.0"]) == "5"
    assert majority(["3", "5"]) == "3"
    assert majority([]) is None


def test_a_judge_dataset_gives_rounds_of_its_first_drafts_per_problem():
    from deliberate_bench.replays.early_stop_bound import rounds_of_judge_dataset
    from deliberate_bench.results import LAB_FILES

    rounds = rounds_of_judge_dataset(LAB_FILES / "judge-dataset", drafts_per_round=5)
    assert len(rounds) > 200 and all(1 <= len(r.drafts) <= 5 and r.gold for r in rounds)
    assert any(d.stop_share is not None for r in rounds for d in r.drafts)  # SmolLM2 writes wrong equations


def test_the_drafts_that_finished_whole_are_listed_in_the_order_they_finished():
    drafts = [Draft(30, True, "4", None), Draft(10, False, "5", None), Draft(40, False, "9", 0.25)]
    cost = replay(drafts, FLAT, quorum=3, clairvoyant=False)
    assert cost.finished == (1, 0)  # the third was stopped by its prefix check: not whole, never ranked
    assert cost.answers == ["4"]  # only drafts that passed vote


def mixed_record(gold: str, prose: list[tuple[str, int]], programs: list[tuple[str, int]]) -> dict:
    """A recorded round of 4 prose drafts and 4 programs, as `make eval-200` writes them."""

    def draft(index: int, kind: str, answer: str, tokens: int) -> dict:
        recorded = {"round": 0, "index": index, "kind": kind, "answer": answer, "completion_tokens": tokens}
        return {**recorded, "valid": True, "score": 1.0, "text": f"{answer}\n", "evidence": [], "finish_reason": "STOP"}

    drafts = [draft(i, "prose", a, t) for i, (a, t) in enumerate(prose)]
    drafts += [draft(len(prose) + i, "program", a, t) for i, (a, t) in enumerate(programs)]
    return {"task": "gsm8k", "gold": gold, "solve": {"drafts": drafts}}


def test_each_mix_is_costed_and_scored_against_the_previous_round_on_the_same_drafts():
    from deliberate_bench.replays.early_stop_bound import cheapest_within_allowance, mix_rows

    # Programs are short and agree on the right answer; the prose drafts split and the first three are wrong.
    programs = [("7", 20), ("7", 20), ("7", 40), ("7", 10)]
    programs_right = mixed_record("7", [("3", 100), ("3", 100), ("5", 100), ("7", 100)], programs)
    rows = mix_rows([programs_right], FLAT)
    names = {"4+1", "3+2", "2+3", "1+4", "4+1+x", "3+2+x", "2+3+x", "1+4+x"}
    assert set(rows) == names | {f"{name}+c" for name in names}
    assert rows["1+4+c"] == rows["1+4"], "drafts recorded without confidence are never stopped on it"
    previous = rows["4+1"]
    assert previous["right_before"] == 0 and previous["tokens_per_problem"] <= 420  # the vote of two wrong ones
    # 1 prose + 4 programs: three programs agree at token 20 and end the round, cutting the prose draft and the
    # third program; 2 + 3 waits for its third program, at token 40.
    assert rows["1+4"]["tokens_per_problem"] == 10 + 4 * 20 and rows["1+4"]["quorum_reached"] == 1
    assert rows["2+3"]["tokens_per_problem"] == 20 + 20 + 3 * 40
    assert rows["1+4"]["token_ratio"] == round(90 / (4 * 100 + 20), 3)
    assert rows["1+4"]["right_with"] == 1 and rows["1+4"]["accuracy_change_points"] == 100.0
    assert cheapest_within_allowance(rows) == "1+4"


def test_a_valid_prose_draft_agreeing_with_a_valid_program_ends_the_round_only_with_the_cross_modal_quorum():
    from deliberate_bench.replays.early_stop_bound import mix_rows

    # 4 + 1: the program (7, 20 tokens) and the first prose draft to finish (7, 50 tokens) agree at token 50.
    record = mixed_record("7", [("7", 50), ("3", 100), ("5", 100), ("9", 100)], [("7", 20)] * 4)
    rows = mix_rows([record], FLAT)
    assert rows["4+1"]["quorum_reached"] == 0 and rows["4+1"]["tokens_per_problem"] == 20 + 50 + 3 * 100
    assert rows["4+1+x"]["quorum_reached"] == 1 and rows["4+1+x"]["tokens_per_problem"] == 20 + 4 * 50
    assert rows["4+1+x"]["right_with"] == 1


def test_the_cheapest_mix_must_keep_the_accuracy_within_the_allowance():
    from deliberate_bench.replays.early_stop_bound import cheapest_within_allowance

    rows = {
        "4+1": {"token_ratio": 0.95, "accuracy_change_points": 0.0},
        "2+3": {"token_ratio": 0.6, "accuracy_change_points": -0.5},
        "1+4": {"token_ratio": 0.5, "accuracy_change_points": -1.5},
    }
    assert cheapest_within_allowance(rows, max_loss_points=1.0) == "2+3"
    assert cheapest_within_allowance(rows, max_loss_points=2.0) == "1+4"
    assert cheapest_within_allowance({"4+1": {"token_ratio": 1.0, "accuracy_change_points": -3.0}}) is None


def test_the_schedulers_default_mix_is_the_one_chosen_on_the_tuning_problems():
    """The committed replay (make bench-early-stop-bound) chose the default round's mix on the tuning blocks."""
    import json

    from deliberate_bench.eval.replay import DEFAULT_MIX
    from deliberate_bench.replays.early_stop_bound import DEFAULT_CONFIDENCE_STOP, DEFAULT_CROSS_MODAL, mix_name
    from deliberate_bench.results import LAB_FILES

    mix = json.loads((LAB_FILES / "early_stop_bound.json").read_text())["mix"]
    default = mix_name(DEFAULT_MIX, DEFAULT_CROSS_MODAL, DEFAULT_CONFIDENCE_STOP)
    assert mix["default"] == default == mix["chosen_on_calibration"]


def test_a_draft_whose_confidence_falls_stops_there_and_leaves_the_vote():
    from deliberate_bench.replays.early_stop_bound import CONFIDENCE_FLOORS

    floor = CONFIDENCE_FLOORS["prose"]
    hesitant = [floor + 2] * 40 + [floor - 2] * 60  # the window falls below the floor within 16 tokens of token 40
    confident = [floor + 2] * 100
    drafts = [
        Draft(100, True, "5", None, {"kind": "prose", "confidence": {"token_confidences": hesitant}}),
        Draft(100, True, "7", None, {"kind": "prose", "confidence": {"token_confidences": confident}}),
    ]
    stop = drafts[0].confidence_stop
    assert stop is not None and 40 < stop <= 56 and drafts[1].confidence_stop is None
    without = replay(drafts, FLAT, quorum=2, clairvoyant=False)
    cut = replay(drafts, FLAT, quorum=2, clairvoyant=False, confidence=True)
    assert (without.tokens, without.answers) == (200, ["5", "7"])
    assert (cut.tokens, cut.answers) == (stop + 100, ["7"])

"""The opening drafts agree on, by lines (properties against a brute-force oracle) and by computations."""

from itertools import combinations

from hypothesis import given, settings
from hypothesis import strategies as st

from deliberate.selection.consensus import MAX_LINES, Step, consensus, content_lines, normalize_line
from deliberate.verifier.arithmetic import computations

# Few distinct line texts, so drafts share openings often; some differ only in whitespace or are blank.
LINES = st.sampled_from(["a = 1", "  a  =  1 ", "a =\t1", "b = 2", "b=2", "c", "", "   ", "Final answer: 3"])
DRAFT = st.lists(LINES, max_size=6).map("\n".join)
DRAFTS = st.lists(DRAFT, max_size=6)


def by_lines(drafts: list[str], min_support: int = 3) -> str:
    """The consensus prefix by lines alone, in draft order: the Refiner's for a caller of its own."""
    return consensus(drafts, min_support).text


def keys(text: str) -> list[str]:
    return [line.key for line in content_lines(text)]


def oracle_length(drafts: list[str], support: int) -> int:
    """Largest L such that some `support` drafts share their first L normalized lines, by trying every group."""
    best = 0
    for group in combinations([keys(d) for d in drafts], support):
        length = 0
        while all(len(k) > length for k in group) and len({k[length] for k in group}) == 1:
            length += 1
        best = max(best, length)
    return best


def clamp(min_support: int, drafts: list[str]) -> int:
    return min(max(min_support, 1), len(drafts))


@settings(max_examples=300)
@given(DRAFTS, st.integers(-1, 8))
def test_the_prefix_is_the_longest_one_enough_drafts_share(drafts, min_support):
    prefix = keys(by_lines(drafts, min_support))
    if not drafts:
        assert prefix == []
        return
    support = clamp(min_support, drafts)
    assert len(prefix) == oracle_length(drafts, support)
    assert sum(keys(d)[: len(prefix)] == prefix for d in drafts) >= support


@settings(max_examples=200)
@given(DRAFTS, st.integers(1, 6), st.randoms(use_true_random=False))
def test_order_of_drafts_does_not_change_the_prefix(drafts, min_support, random):
    shuffled = list(drafts)
    random.shuffle(shuffled)
    before, after = keys(by_lines(drafts, min_support)), keys(by_lines(shuffled, min_support))
    assert len(before) == len(after)
    if 2 * clamp(min_support, drafts) > len(drafts):
        # Two disjoint groups of a majority cannot exist, so no tie for the order to break.
        assert before == after


@given(DRAFTS)
def test_with_support_of_one_the_longest_draft_comes_back_whole(drafts):
    prefix = keys(by_lines(drafts, 1))
    longest = max((keys(d) for d in drafts), key=len, default=[])
    assert prefix == longest


@given(DRAFTS, st.integers(7, 100))
def test_support_above_the_number_of_drafts_means_all_of_them(drafts, min_support):
    assert by_lines(drafts, min_support) == by_lines(drafts, len(drafts))


@given(st.lists(LINES, max_size=6), st.integers(2, 5))
def test_whitespace_and_blank_lines_do_not_break_agreement(lines, copies):
    plain = "\n".join(lines)
    messy = ["\n\n" + "\n\n".join("  " + line.replace(" ", "   ") + " \t" for line in lines) for _ in range(copies)]
    assert keys(by_lines([plain, *messy], copies + 1)) == keys(plain)


@given(st.lists(DRAFT, min_size=2, max_size=5))
def test_no_shared_first_line_means_no_prefix(tails):
    drafts = [f"opening {i}\n{tail}" for i, tail in enumerate(tails)]
    assert by_lines(drafts, 2) == ""


def test_three_of_four_agree_on_two_lines():
    drafts = [
        "Let x be the price.\nThen 2x = 10.\nSo x = 5.",
        "Let x be the price.\nThen 2x = 10.\nSo x = 5.\nDone.",
        "Let x be the price.\nThen  2x = 10.   \nHence x = 5.",
        "We guess.\nThen 2x = 10.",
    ]
    assert by_lines(drafts, 3) == "Let x be the price.\nThen 2x = 10.\n"
    assert by_lines(drafts, 2) == "Let x be the price.\nThen 2x = 10.\nSo x = 5.\n"
    assert by_lines(drafts, 4) == ""


def test_lines_come_back_as_written_in_the_best_ranked_supporting_draft():
    drafts = ["other\n", "\n  Step 1:  add \n\nStep 2\nx", "Step 1: add\nStep 2\ny", "Step 1: add\n\n\nStep 2"]
    assert by_lines(drafts, 3) == "  Step 1:  add \n\nStep 2\n"


def test_the_longest_run_wins_even_with_a_different_group():
    drafts = ["a\nb", "a\nc\nd\ne", "a\nc\nd\ne", "a\nb"]
    assert by_lines(drafts, 2) == "a\nc\nd\ne\n"
    assert by_lines(drafts, 3) == "a\n"


def test_ties_go_to_the_group_of_the_earliest_draft():
    assert by_lines(["x\n1", "y\n2", "y\n2", "x\n1"], 2) == "x\n1\n"
    assert by_lines(["y\n2", "x\n1", "y\n2", "x\n1"], 2) == "y\n2\n"


def test_edge_cases():
    assert by_lines([]) == ""
    assert by_lines(["", "  \n\n"], 1) == ""
    assert by_lines(["only\n"], 3) == "only\n"
    assert by_lines(["a\r\nb\r\n", "a\nb"], 2) == "a\nb\n"


def test_long_drafts_are_cut_at_the_line_cap():
    draft = "\n".join(f"line {i}" for i in range(1000))
    prefix = by_lines([draft] * 16, 3)
    assert prefix.splitlines() == [f"line {i}" for i in range(MAX_LINES)]


def test_lines_agree_whatever_their_case_punctuation_and_number_formatting():
    assert normalize_line("Total: $1,000.00.") == normalize_line("total   1000") == "total 1000"
    assert normalize_line("**Step 1:** 5.50 + 2 = 7.5") == normalize_line("step 1 5.5 + 2 = 7.50")
    assert normalize_line("5 + 3 = 8") != normalize_line("5 - 3 = 8")  # operators are content
    drafts = ["Total: $1,000.00.\nA", "total 1000\nB", "TOTAL 1,000!\nC"]
    assert by_lines(drafts, 3) == "Total: $1,000.00.\n"


def test_numbers_are_read_by_the_shared_parser():
    # The Unicode minus is a minus (before, "−3" and "-3" were different lines).
    assert normalize_line("x = −3.50") == normalize_line("x = -3.5") == "x = -3.5"
    # A percentage keeps its "%", a fraction its slash, a date stays as written (as before).
    assert normalize_line("15% of 80") == "15% of 80" != normalize_line("15 of 80")
    assert normalize_line("Step 1: $48/2 = $24.00") == "step 1 48/2 = 24"
    assert normalize_line("On 12/25/2024.") == "on 12/25/2024"
    # A number glued to a word, a "." or a "/" is not a number: its digits stay, its punctuation goes
    # (before: "v2", "x1000", "10/2.5"). Lines written the same way still agree.
    assert normalize_line("v2.0") == "v2 0"
    assert normalize_line("x1,000") == "x1 000"
    assert normalize_line("10/2.50 = 4") == "10/2 50 = 4"


def steps_of(draft: str) -> list[Step]:
    return [Step(c.key, c.line) for c in computations(draft)]


# Three drafts under different strategy hints: no shared first line, the same two computations.
HINTED = [
    "Known: 48 clips in April.\nMay: 48 / 2 = 24 clips.\nTotal: 48 + 24 = 72.\nFinal answer: 72",
    "Let's work backwards.\nIn May she sold 48 ÷ 2 = 24.0 clips.\nAltogether 24 + 48 = 72 clips.\nFinal answer: 72",
    "Step 1: $48/2 = $24\nStep 2: 48 + 24 = 72\nStep 3: 72 * 2 = 144\nFinal answer: 144",
    "I guess 100.\nFinal answer: 100",
]


def test_drafts_that_compute_the_same_steps_in_other_words_share_a_prefix():
    assert by_lines(HINTED, 3) == ""  # no shared line
    found = consensus(HINTED, 3, steps=[steps_of(d) for d in HINTED])
    assert found.basis == "computations" and found.computations == 2
    assert found.supporters == (0, 1, 2) and found.source == 0
    assert found.text == "Known: 48 clips in April.\nMay: 48 / 2 = 24 clips.\nTotal: 48 + 24 = 72.\n"


def test_the_prefix_is_in_the_wording_of_the_best_ranked_supporting_draft():
    found = consensus(HINTED, 3, steps=[steps_of(d) for d in HINTED], ranking=[3, 2, 1, 0])
    assert found.source == 2  # draft 3 ranks first but does not support the prefix
    # Its line 3 holds a computation the others do not share: the prefix stops before it.
    assert found.text == "Step 1: $48/2 = $24\nStep 2: 48 + 24 = 72\n"


def test_a_line_holding_an_unshared_computation_is_left_out():
    drafts = ["a 1 + 1 = 2\n2 + 2 = 4; 3 + 3 = 6", "1 + 1 = 2\n2 + 2 = 4", "b 1 + 1 = 2\nso 2 + 2 = 4\nc"]
    found = consensus(drafts, 3, steps=[steps_of(d) for d in drafts])
    assert found.text == "a 1 + 1 = 2\n" and found.computations == 1
    assert consensus(drafts, 3, steps=[steps_of(d) for d in drafts], ranking=[1]).text == "1 + 1 = 2\n2 + 2 = 4\n"


def test_without_shared_computations_the_line_prefix_stands():
    drafts = ["Same start.\n1 + 1 = 2", "same start\n2 + 2 = 4", "Same start!\n3 + 3 = 6"]
    found = consensus(drafts, 3, steps=[steps_of(d) for d in drafts])
    assert (found.basis, found.text) == ("lines", "Same start.\n")


def test_the_scheduler_looks_for_a_consensus_prefix_only_for_the_prefix_way():
    from deliberate.scheduler.drafter_load import Decision
    from deliberate.scheduler.round_plan import resolve
    from deliberate.scheduler.settings import SchedulerSettings
    from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb

    def plan(way: str, **request):
        settings = SchedulerSettings(final_text=way)
        return resolve(pb.SolveRequest(prompt="q", **request), settings, Decision(5, "", 0.0), 2, "", False)

    assert plan("refine").final_text == "refine"
    assert plan("refine", final_text=pb.FINAL_TEXT_CONSENSUS_PREFIX).final_text == "prefix"
    assert plan("prefix", final_text=pb.FINAL_TEXT_PASS_THROUGH).final_text == "pass_through"
    assert plan("prefix").consensus_prefix
    assert not any(plan(way).consensus_prefix for way in ("refine", "pass_through"))
    assert not plan("prefix", disable_consensus_prefix=True).consensus_prefix
    assert not plan("prefix", output_schema="{}").consensus_prefix

"""A draft's text as the answer a person reads: its final line in plain text, the trace marker beside it."""

from deliberate.selection.final_text import thinking_trace, with_plain_final_line


def test_a_boxed_final_line_is_rewritten_in_plain_text():
    text = "48 / 2 = 24\n48 + 24 = 72\nFinal answer: \\(\\boxed{72}\\)"
    assert with_plain_final_line(text, "\\boxed{72}") == "48 / 2 = 24\n48 + 24 = 72\n\nFinal answer: 72"


def test_markup_and_whatever_follows_the_last_final_line_are_dropped():
    text = "Step: 5 * 3 = 15\n**Final Answer:** $15$\nHope this helps!"
    assert with_plain_final_line(text, "15") == "Step: 5 * 3 = 15\n\nFinal answer: 15"


def test_a_text_without_a_final_line_gets_one_and_an_unread_answer_leaves_it_alone():
    assert with_plain_final_line("So he has 7 apples.", "7") == "So he has 7 apples.\n\nFinal answer: 7"
    assert with_plain_final_line("  No number here.  ", "") == "No number here."
    assert with_plain_final_line("Final answer: \\$1{,}200", "\\$1{,}200") == "Final answer: $1,200"


def test_the_trace_names_the_draft_its_score_and_the_rules_that_really_ran():
    assert thinking_trace(2, 0.875, ["arithmetic", "program"], []) == (
        "[THINKING_TRACE: Draft#2 scored 0.88, passed arithmetic and program]"
    )
    assert thinking_trace(0, 0.4, [], ["final_answer"]) == "[THINKING_TRACE: Draft#0 scored 0.40, failed final_answer]"


def test_an_abstained_rule_is_named_neither_passed_nor_failed():
    from types import SimpleNamespace as Result

    from deliberate.selection.final_text import passed_and_failed

    results = [Result(rule_id="arithmetic", passed=True, abstained=False),
               Result(rule_id="program", passed=True, abstained=True),
               Result(rule_id="final_answer", passed=False, abstained=False)]  # fmt: skip
    assert passed_and_failed(results) == (("arithmetic",), ("final_answer",))

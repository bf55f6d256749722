"""The adaptive round's policy: its name, the order of a round's kinds, and what settles a round."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from deliberate.scheduler.settings import SchedulerSettings
from deliberate.selection.adaptive import PROGRAM, PROSE, AdaptivePolicy, settled, trusted

POLICY = AdaptivePolicy.parse("ssscs/start1/q2+x")  # an example: the default before the third tuning block


def test_a_name_parses_to_the_policy_it_names_and_back():
    assert POLICY == AdaptivePolicy((PROSE, PROSE, PROSE, PROGRAM, PROSE), start=1, quorum=2, cross_modal=True)
    assert POLICY.name == "ssscs/start1/q2+x"
    assert AdaptivePolicy.parse("cs/start2/q3") == AdaptivePolicy((PROGRAM, PROSE), 2, 3, cross_modal=False)
    cascade = AdaptivePolicy.parse("cscs/start2/step2/q2+x/greedy")
    assert (cascade.step, cascade.greedy, cascade.start, cascade.quorum, cascade.cross_modal) == (2, True, 2, 2, True)
    assert cascade.name == "cscs/start2/step2/q2+x/greedy"
    sure = AdaptivePolicy.parse("cscs/start1/step2/q2/trust9.5/greedy")
    assert (sure.trust, sure.name) == (9.5, "cscs/start1/step2/q2/trust9.5/greedy")


def test_a_trusting_policy_settles_on_one_valid_draft_sure_enough_of_itself():
    sure = AdaptivePolicy.parse("cscs/start1/step2/q2/trust9.5/greedy")
    assert trusted([(PROGRAM, 9.7)], sure) == "a valid program draft's token confidence 9.70 ≥ 9.5"
    assert trusted([(PROGRAM, 9.4), (PROSE, None)], sure) == ""
    assert trusted([(PROGRAM, 99.0)], POLICY) == "", "a policy without trust settles on agreement only"


@pytest.mark.parametrize(
    "name", ["", "ssx/start1/q2", "ss/start0/q2", "ss/q2", "ss/start1/q2+y", "ss/start1/step0/q2", "ss/start1/q2/hot"]
)
def test_a_malformed_name_is_refused_at_start_up_saying_the_format(name):
    with pytest.raises(ValueError, match="ssscs/start1/q2"):
        AdaptivePolicy.parse(name)
    with pytest.raises(ValidationError, match="adaptive_policy"):
        SchedulerSettings(adaptive_policy=name)


@pytest.mark.parametrize(
    ("num_drafts", "programs", "kinds"),
    [
        (5, 1, "ssscs"),  # the order as it is
        (3, 1, "ssc"),  # prose runs out: the program comes next
        (5, 0, "sssss"),  # no program: prose fills its place
        (6, 2, "ssscsc"),  # more drafts than the order: the rest, prose first
        (2, 2, "cc"),
    ],
)
def test_a_round_takes_the_policys_order_as_far_as_its_kinds_allow(num_drafts, programs, kinds):
    letters = "".join("c" if kind == PROGRAM else "s" for kind in POLICY.kinds_for(num_drafts, programs))
    assert letters == kinds


def test_a_quorum_of_valid_drafts_agreeing_settles_the_round():
    assert settled([("72", PROSE)], POLICY) == ""
    assert settled([("72", PROSE), ("70", PROSE)], POLICY) == ""
    assert settled([("72", PROSE), ("$72.00", PROSE)], POLICY) == "2 valid drafts agree on 72"
    assert settled([("", PROSE), ("", PROSE)], POLICY) == "", "no answer agrees with nothing"


def test_a_prose_draft_and_a_program_agreeing_settle_only_a_cross_modal_policy():
    pair = [("72", PROSE), ("72", PROGRAM)]
    cross = settled(pair, AdaptivePolicy.parse("sc/start1/q3+x"))
    assert cross == "a valid prose draft and a valid program agree on 72"
    assert settled(pair, AdaptivePolicy.parse("sc/start1/q3")) == ""
    assert settled([("72", PROGRAM), ("72", PROGRAM)], AdaptivePolicy.parse("cc/start1/q3+x")) == ""

"""A request's round options as one message (`RoundOptions`): its grouped `round`, each field the group leaves unset
filled from the flat `SolveRequest` field it groups. The one place the flat fields are read; the Scheduler's edge
checks the result and `round_plan.resolve` turns it into the request's plan (docs/scheduler.md, "A request's plan").
"""

from __future__ import annotations

from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb


def round_options(request: pb.SolveRequest) -> pb.RoundOptions:
    """What the request says of its round, grouped; a field neither form sets stays unset (the settings decide)."""
    flat = pb.RoundOptions(
        draft_count=request.draft_count,
        max_drafts=request.num_drafts,
        selection_policy=request.selection_policy,
        final_text=request.final_text,
    )
    if request.HasField("program_drafts"):
        flat.program_drafts = request.program_drafts
    if request.disable_quorum:
        flat.quorum = 0
    elif request.quorum:
        flat.quorum = request.quorum
    if request.HasField("confidence_stop"):
        flat.confidence_stop = request.confidence_stop
    if request.replace_aborted_drafts:
        flat.replace_aborted_drafts = True
    # Each disable_* switch turns off what is on by default; left false it says nothing.
    for switch, option in DISABLED_BY.items():
        if getattr(request, switch):
            setattr(flat, option, False)
    flat.MergeFrom(request.round)  # the group wins: its set fields replace the flat ones
    return flat


DISABLED_BY = {
    "disable_streaming_verification": "streaming_verification",
    "disable_default_arithmetic": "default_arithmetic",
    "disable_consensus_prefix": "consensus_prefix",
    "disable_thinking_trace": "thinking_trace",
}


def grouped_field(request: pb.SolveRequest, option: str, flat: str) -> str:
    """The field a client set, for an error that names it: `round.<option>` where the group set it, else `flat`."""
    return f"round.{option}" if request.round.HasField(option) else flat

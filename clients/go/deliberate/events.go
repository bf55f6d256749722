package deliberate

import (
	"io"

	schedulerv1 "github.com/deliberate/deliberate/clients/go/gen/deliberate/scheduler/v1"
)

// Event is one stage event of a SolveStream, as the contract's oneof: RoundStarted, DraftGenerated,
// DraftVerified, DraftSelected, DraftDiscarded, ThinkingTrace, ConsensusPrefix, RefineChunk, Final, or UnknownEvent for an event newer than
// this client. Each embeds the generated message, so its fields read directly (event.Round, event.Draft.Text).
// The order they arrive in is documented in docs/scheduler.md ("SolveStream event order").
type Event interface {
	isEvent()
}

type (
	// RoundStarted: a drafting round begins (round 0, or a re-draft after no draft passed the hard rules).
	RoundStarted struct{ *schedulerv1.RoundStarted }
	// DraftGenerated: one draft is complete; its verification starts.
	DraftGenerated struct{ *schedulerv1.DraftGenerated }
	// DraftVerified: the Verifier's verdict on one draft.
	DraftVerified struct{ *schedulerv1.DraftVerified }
	// DraftSelected: a draft goes to refinement (rank 0 is the best).
	DraftSelected struct{ *schedulerv1.DraftSelected }
	// DraftDiscarded: a draft does not go to refinement, and why.
	DraftDiscarded struct{ *schedulerv1.DraftDiscarded }
	// ThinkingTrace: why this answer, sent once right after selection; beside the answer, never part of it.
	ThinkingTrace struct{ *schedulerv1.ThinkingTrace }
	// ConsensusPrefix: the opening enough drafts agree on, before refinement; the answer starts with it.
	ConsensusPrefix struct{ *schedulerv1.ConsensusPrefix }
	// RefineChunk: the next piece of the final answer's text.
	RefineChunk struct{ *schedulerv1.RefineChunk }
	// Final: the whole result, as Solve returns it; the last event.
	Final struct{ *schedulerv1.SolveResponse }
	// UnknownEvent: an event this client's contract does not know yet (a newer server); safe to ignore.
	UnknownEvent struct {
		*schedulerv1.SolveStreamResponse
	}
)

func (RoundStarted) isEvent()    {}
func (DraftGenerated) isEvent()  {}
func (DraftVerified) isEvent()   {}
func (DraftSelected) isEvent()   {}
func (DraftDiscarded) isEvent()  {}
func (ThinkingTrace) isEvent()   {}
func (ConsensusPrefix) isEvent() {}
func (RefineChunk) isEvent()     {}
func (Final) isEvent()           {}
func (UnknownEvent) isEvent()    {}

// Stream is a running SolveStream. Recv returns its events in order, then io.EOF after the Final event;
// a failed solve returns an *Error instead.
type Stream struct {
	events schedulerv1.SchedulerService_SolveStreamClient
	cancel func()
}

// Recv waits for the next event.
func (s *Stream) Recv() (Event, error) {
	message, err := s.events.Recv()
	if err == io.EOF {
		return nil, io.EOF
	}
	if err != nil {
		return nil, statusError(err)
	}
	return event(message), nil
}

// Close stops the solve if it is still running and releases the stream; call it when done (defer is fine).
func (s *Stream) Close() {
	s.cancel()
}

func event(message *schedulerv1.SolveStreamResponse) Event {
	switch e := message.Event.(type) {
	case *schedulerv1.SolveStreamResponse_RoundStarted:
		return RoundStarted{e.RoundStarted}
	case *schedulerv1.SolveStreamResponse_DraftGenerated:
		return DraftGenerated{e.DraftGenerated}
	case *schedulerv1.SolveStreamResponse_DraftVerified:
		return DraftVerified{e.DraftVerified}
	case *schedulerv1.SolveStreamResponse_DraftSelected:
		return DraftSelected{e.DraftSelected}
	case *schedulerv1.SolveStreamResponse_DraftDiscarded:
		return DraftDiscarded{e.DraftDiscarded}
	case *schedulerv1.SolveStreamResponse_ThinkingTrace:
		return ThinkingTrace{e.ThinkingTrace}
	case *schedulerv1.SolveStreamResponse_ConsensusPrefix:
		return ConsensusPrefix{e.ConsensusPrefix}
	case *schedulerv1.SolveStreamResponse_RefineChunk:
		return RefineChunk{e.RefineChunk}
	case *schedulerv1.SolveStreamResponse_Final:
		return Final{e.Final}
	default:
		return UnknownEvent{message}
	}
}

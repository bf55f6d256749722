package deliberate_test

import (
	"fmt"
	"strings"

	"github.com/deliberate/deliberate/clients/go/deliberate"
)

// orderCheck follows a SolveStream's events and says where they break the documented order (docs/scheduler.md,
// "SolveStream event order"):
//
//	per round: round_started (rounds 0, 1, … in turn), then its drafts' draft_generated and draft_verified,
//	interleaved, each draft generated before it is verified, all num_drafts of them verified before the next
//	round; then one draft_selected or draft_discarded per draft of every round (at least one selected, ranks
//	0..k-1); then the thinking trace; then refine_chunk events; then one final, the last event, agreeing with what
//	was streamed.
type orderCheck struct {
	phase               int
	rounds              int
	announced           int32           // drafts the current round's round_started announced
	generated, verified int             // in the current round
	drafts              map[string]bool // every round's drafts: id -> verified
	settled             map[string]bool // drafts selected or discarded
	selected            map[int32]string
	refined             strings.Builder
	consensus           bool
	trace               string // the thinking trace event's text
}

const (
	drafting = iota
	settling // selecting and discarding
	refining
	finished
)

func checkEventOrder(events []deliberate.Event) error {
	c := orderCheck{drafts: map[string]bool{}, settled: map[string]bool{}, selected: map[int32]string{}}
	for i, event := range events {
		if err := c.next(event); err != nil {
			return fmt.Errorf("event %d (%T): %w", i, event, err)
		}
	}
	if c.phase != finished {
		return fmt.Errorf("the stream ended without final")
	}
	return nil
}

func (c *orderCheck) next(event deliberate.Event) error {
	switch e := event.(type) {
	case deliberate.RoundStarted:
		if c.phase != drafting {
			return fmt.Errorf("a round after drafting ended")
		}
		if c.rounds > 0 {
			if err := c.roundComplete(); err != nil {
				return err
			}
		}
		if int(e.Round) != c.rounds {
			return fmt.Errorf("round %d, want round %d", e.Round, c.rounds)
		}
		c.rounds, c.announced, c.generated, c.verified = c.rounds+1, e.NumDrafts, 0, 0
	case deliberate.DraftGenerated:
		if _, seen := c.drafts[e.Draft.Id]; seen || c.phase != drafting || c.rounds == 0 {
			return fmt.Errorf("draft %s generated outside a round, or twice", e.Draft.Id)
		}
		c.drafts[e.Draft.Id] = false
		c.generated++
	case deliberate.DraftVerified:
		if verified, seen := c.drafts[e.Verdict.DraftId]; !seen || verified || c.phase != drafting {
			return fmt.Errorf("draft %s verified before it was generated, or twice", e.Verdict.DraftId)
		}
		c.drafts[e.Verdict.DraftId] = true
		c.verified++
	case deliberate.DraftSelected:
		if _, taken := c.selected[e.Rank]; taken {
			return fmt.Errorf("rank %d selected twice", e.Rank)
		}
		c.selected[e.Rank] = e.DraftId
		return c.settle(e.DraftId)
	case deliberate.DraftDiscarded:
		return c.settle(e.DraftId)
	case deliberate.ThinkingTrace:
		if c.phase != settling || len(c.settled) != len(c.drafts) || c.trace != "" || e.Text == "" {
			return fmt.Errorf("thinking trace before every draft was selected or discarded, after refinement began, twice or empty")
		}
		c.trace = e.Text
	case deliberate.ConsensusPrefix:
		if c.phase != settling || c.trace == "" || len(c.settled) != len(c.drafts) || c.consensus {
			return fmt.Errorf("consensus prefix before every draft was selected or discarded, after refinement began, or twice")
		}
		c.consensus = true
	case deliberate.RefineChunk:
		if c.phase == settling && len(c.settled) == len(c.drafts) {
			c.phase = refining
		}
		if c.phase != refining {
			return fmt.Errorf("refinement before every draft was selected or discarded")
		}
		c.refined.WriteString(e.Text)
	case deliberate.Final:
		if c.phase == drafting || c.phase == finished || len(c.settled) != len(c.drafts) {
			return fmt.Errorf("final before every draft was selected or discarded, or after final")
		}
		c.phase = finished
		return c.agrees(e.SolveResponse)
	default:
		return fmt.Errorf("not a SolveStream event")
	}
	return nil
}

func (c *orderCheck) roundComplete() error {
	if int32(c.generated) != c.announced || c.verified != c.generated {
		return fmt.Errorf("round %d: %d drafts announced, %d generated, %d verified", c.rounds-1, c.announced, c.generated, c.verified)
	}
	return nil
}

func (c *orderCheck) settle(id string) error {
	if c.phase == drafting {
		if err := c.roundComplete(); err != nil {
			return err
		}
		c.phase = settling
	}
	if _, generated := c.drafts[id]; c.phase != settling || !generated || c.settled[id] {
		return fmt.Errorf("draft %s selected or discarded after refinement began, before it was generated, or twice", id)
	}
	c.settled[id] = true
	return nil
}

// agrees: the final result says what the events before it said.
func (c *orderCheck) agrees(final *deliberate.SolveResponse) error {
	if int(final.Rounds) != c.rounds || len(final.Drafts) != len(c.drafts) {
		return fmt.Errorf("final says %d rounds, %d drafts; the stream had %d, %d", final.Rounds, len(final.Drafts), c.rounds, len(c.drafts))
	}
	if len(c.selected) == 0 || len(final.SelectedDraftIds) != len(c.selected) {
		return fmt.Errorf("final selected %v; the stream selected %v", final.SelectedDraftIds, c.selected)
	}
	for rank, id := range final.SelectedDraftIds {
		if c.selected[int32(rank)] != id {
			return fmt.Errorf("final ranks %s at %d; the stream ranked %v", id, rank, c.selected)
		}
	}
	if final.ThinkingTrace != c.trace || strings.Contains(final.Answer, "THINKING_TRACE") {
		return fmt.Errorf("final trace %q, streamed %q; the answer must not hold it", final.ThinkingTrace, c.trace)
	}
	// The refined text is the answer unless the re-check rejected it in favour of the best draft.
	if !strings.Contains(final.StatusReason, "refinement rejected") && final.Answer != c.refined.String() {
		return fmt.Errorf("final answer %q is not the refined text streamed, %q", final.Answer, c.refined.String())
	}
	return nil
}

package deliberate_test

import (
	"testing"

	"github.com/deliberate/deliberate/clients/go/deliberate"
	commonv1 "github.com/deliberate/deliberate/clients/go/gen/deliberate/common/v1"
	schedulerv1 "github.com/deliberate/deliberate/clients/go/gen/deliberate/scheduler/v1"
)

// A stream in the documented order: one round of two drafts, the second verified before the first, one selected.
func orderedEvents() []deliberate.Event {
	generated := func(id string) deliberate.Event {
		return deliberate.DraftGenerated{DraftGenerated: &schedulerv1.DraftGenerated{Draft: &commonv1.Draft{Id: id}}}
	}
	verified := func(id string) deliberate.Event {
		return deliberate.DraftVerified{DraftVerified: &schedulerv1.DraftVerified{Verdict: &commonv1.DraftVerdict{DraftId: id}}}
	}
	return []deliberate.Event{
		deliberate.RoundStarted{RoundStarted: &schedulerv1.RoundStarted{Round: 0, NumDrafts: 2}},
		generated("r-0-0"), generated("r-0-1"), verified("r-0-1"), verified("r-0-0"),
		deliberate.DraftDiscarded{DraftDiscarded: &schedulerv1.DraftDiscarded{DraftId: "r-0-0"}},
		deliberate.DraftSelected{DraftSelected: &schedulerv1.DraftSelected{DraftId: "r-0-1", Rank: 0}},
		deliberate.ThinkingTrace{ThinkingTrace: &schedulerv1.ThinkingTrace{Text: "[THINKING_TRACE: Draft#1 scored 0.90]"}},
		deliberate.RefineChunk{RefineChunk: &schedulerv1.RefineChunk{Text: "72"}},
		deliberate.Final{SolveResponse: &schedulerv1.SolveResponse{
			Answer: "72", ThinkingTrace: "[THINKING_TRACE: Draft#1 scored 0.90]", Rounds: 1, SelectedDraftIds: []string{"r-0-1"},
			Drafts: []*schedulerv1.DraftReport{{}, {}},
		}},
	}
}

func TestOrderCheckAcceptsTheDocumentedOrder(t *testing.T) {
	if err := checkEventOrder(orderedEvents()); err != nil {
		t.Fatal(err)
	}
}

// The check the stream test relies on must catch each way the order can break.
func TestOrderCheckRejectsEachBreak(t *testing.T) {
	swap := func(i, j int) []deliberate.Event {
		events := orderedEvents()
		events[i], events[j] = events[j], events[i]
		return events
	}
	without := func(i int) []deliberate.Event {
		events := orderedEvents()
		return append(events[:i], events[i+1:]...)
	}
	cases := map[string][]deliberate.Event{
		"verified before generated":     swap(2, 3),
		"selected before all verified":  swap(4, 5),
		"refine chunk before selection": swap(6, 8),
		"trace before selection":        swap(6, 7),
		"no final":                      without(9),
		"no round_started":              without(0),
		"a draft never verified":        without(3),
		"final before the refine chunk": swap(8, 9),
	}
	for name, events := range cases {
		if err := checkEventOrder(events); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

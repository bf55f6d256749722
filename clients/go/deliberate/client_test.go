package deliberate_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/deliberate/deliberate/clients/go/deliberate"
	schedulerv1 "github.com/deliberate/deliberate/clients/go/gen/deliberate/scheduler/v1"
)

const question = "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. " +
	"How many clips did Natalia sell altogether in April and May?"

// client connects to the stack at DELIBERATE_ADDRESS (`make test-clients` starts one); without it the test
// is skipped.
func client(t *testing.T) *deliberate.Client {
	t.Helper()
	addr := os.Getenv("DELIBERATE_ADDRESS")
	if addr == "" {
		t.Skip("DELIBERATE_ADDRESS is not set: these tests call a running Scheduler (make test-clients starts one)")
	}
	c, err := deliberate.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// smallRequest keeps a solve short on a CPU: two drafts, few tokens each.
func smallRequest() *deliberate.SolveRequest {
	return &deliberate.SolveRequest{
		Prompt:         question,
		NumDrafts:      2,
		Sampling:       &deliberate.SamplingParams{MaxNewTokens: proto.Int32(24), Seed: proto.Int64(7)},
		RefineSampling: &deliberate.SamplingParams{MaxNewTokens: proto.Int32(24)},
	}
}

func withTimeout(t *testing.T, timeout time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	return ctx
}

func TestSolveThenFeedback(t *testing.T) {
	c := client(t)
	response, err := c.Solve(withTimeout(t, 5*time.Minute), smallRequest())
	if err != nil {
		t.Fatal(err)
	}
	if response.Status == schedulerv1.SolveStatus_SOLVE_STATUS_UNSPECIFIED || response.Status == schedulerv1.SolveStatus_SOLVE_STATUS_FAILED {
		t.Fatalf("status %s: %s", response.Status, response.StatusReason)
	}
	if response.Answer == "" || response.RequestId == "" || response.TraceId == "" {
		t.Fatalf("answer %q, request id %q, trace id %q: all must be set", response.Answer, response.RequestId, response.TraceId)
	}
	if response.NumDrafts != 2 || len(response.Drafts) != 2*int(response.Rounds) {
		t.Fatalf("%d drafts per round asked, %d reported over %d rounds", response.NumDrafts, len(response.Drafts), response.Rounds)
	}

	feedback, err := c.SubmitFeedback(withTimeout(t, 30*time.Second), response.RequestId, deliberate.Accepted)
	if err != nil {
		t.Fatal(err)
	}
	if feedback.OutcomesUntilRefit <= 0 {
		t.Fatalf("outcomes until the next re-fit: %d", feedback.OutcomesUntilRefit)
	}
	// A decision takes one feedback: the second is NOT_FOUND.
	_, err = c.SubmitFeedback(withTimeout(t, 30*time.Second), response.RequestId, deliberate.Rejected)
	var failed *deliberate.Error
	if !errors.As(err, &failed) || failed.Code != codes.NotFound {
		t.Fatalf("second feedback: %v, want a NotFound *deliberate.Error", err)
	}
}

func TestSolveStreamFollowsTheDocumentedOrder(t *testing.T) {
	c := client(t)
	stream, err := c.SolveStream(withTimeout(t, 5*time.Minute), smallRequest())
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	var events []deliberate.Event
	for {
		event, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("after %d events: %v", len(events), err)
		}
		events = append(events, event)
	}
	if err := checkEventOrder(events); err != nil {
		t.Fatalf("%v\nevents: %s", err, describe(events))
	}
	t.Logf("%d events: %s", len(events), describe(events))
}

func TestExpiredDeadlineIsDeadlineExceeded(t *testing.T) {
	c := client(t)
	// Long enough to reach the Scheduler, far too short for a draft: the solve runs out of time mid-way.
	request := smallRequest()
	request.Sampling.MaxNewTokens = proto.Int32(256)
	_, err := c.Solve(withTimeout(t, 300*time.Millisecond), request)
	if code := status.Code(err); code != codes.DeadlineExceeded {
		t.Fatalf("got %v, want DeadlineExceeded", err)
	}
	var failed *deliberate.Error
	if !errors.As(err, &failed) || failed.Code != codes.DeadlineExceeded {
		t.Fatalf("got %#v, want a *deliberate.Error", err)
	}
}

func TestInvalidArgumentNamesTheField(t *testing.T) {
	c := client(t)
	tooMany := smallRequest()
	tooMany.NumDrafts = 99
	tooLong := smallRequest()
	tooLong.Sampling.MaxNewTokens = proto.Int32(100000)
	for field, request := range map[string]*deliberate.SolveRequest{"num_drafts": tooMany, "sampling.max_new_tokens": tooLong} {
		_, err := c.Solve(withTimeout(t, 30*time.Second), request)
		var failed *deliberate.Error
		if !errors.As(err, &failed) {
			t.Fatalf("%s: got %v, want a *deliberate.Error", field, err)
		}
		if failed.Code != codes.InvalidArgument || failed.Field != field {
			t.Fatalf("got %s naming %q (%s), want InvalidArgument naming %q", failed.Code, failed.Field, failed.Message, field)
		}
	}
}

// describe names the events in order, runs of one kind counted: "RoundStarted DraftGenerated … RefineChunk×12 Final".
func describe(events []deliberate.Event) string {
	var names []string
	run := 0
	for i, event := range events {
		run++
		name := strings.TrimPrefix(fmt.Sprintf("%T", event), "deliberate.")
		if i+1 < len(events) && fmt.Sprintf("%T", events[i+1]) == fmt.Sprintf("%T", event) {
			continue
		}
		if run > 1 {
			name = fmt.Sprintf("%s×%d", name, run)
		}
		names, run = append(names, name), 0
	}
	return strings.Join(names, " ")
}

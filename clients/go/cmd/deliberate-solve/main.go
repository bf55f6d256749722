// Command deliberate-solve asks deliberate's Scheduler one question and prints the answer; with -stream it
// prints every stage event as it arrives.
//
//	deliberate-solve -addr 127.0.0.1:50051 -n 3 -stream "What is 17 * 23?"
//
// The address also comes from DELIBERATE_ADDRESS. Exit status: 0 for an answer, 1 for a FAILED solve, 2 for an
// error (the gRPC code, and the field for INVALID_ARGUMENT).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/deliberate/deliberate/clients/go/deliberate"
	schedulerv1 "github.com/deliberate/deliberate/clients/go/gen/deliberate/scheduler/v1"
)

func main() {
	addr := flag.String("addr", envOr("DELIBERATE_ADDRESS", "127.0.0.1:50051"), "the Scheduler's host:port (env DELIBERATE_ADDRESS)")
	numDrafts := flag.Int("n", 0, "number of drafts; 0 lets the Scheduler choose")
	maxNewTokens := flag.Int("max-new-tokens", 0, "tokens per draft; 0 keeps the Drafter's default")
	refineMaxNewTokens := flag.Int("refine-max-new-tokens", 0, "tokens of the final answer; 0 keeps the Refiner's default")
	stream := flag.Bool("stream", false, "print each stage event as it arrives")
	timeout := flag.Duration("timeout", 5*time.Minute, "the request's deadline")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: %s [flags] QUESTION\n", os.Args[0])
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	request := &deliberate.SolveRequest{
		Prompt:         flag.Arg(0),
		NumDrafts:      int32(*numDrafts),
		Sampling:       &deliberate.SamplingParams{MaxNewTokens: positive(*maxNewTokens)},
		RefineSampling: &deliberate.SamplingParams{MaxNewTokens: positive(*refineMaxNewTokens)},
	}
	os.Exit(run(*addr, request, *stream, *timeout))
}

func run(addr string, request *deliberate.SolveRequest, stream bool, timeout time.Duration) int {
	client, err := deliberate.Dial(addr)
	if err != nil {
		return fail(err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var response *deliberate.SolveResponse
	if stream {
		response, err = solveStreaming(ctx, client, request)
	} else {
		response, err = client.Solve(ctx, request)
	}
	if err != nil {
		return fail(err)
	}
	if !stream {
		fmt.Println(response.Answer)
	}
	status := strings.TrimPrefix(response.Status.String(), "SOLVE_STATUS_")
	fmt.Printf("\n\nstatus  %s: %s\nrequest %s  trace %s\n", status, response.StatusReason, response.RequestId, response.TraceId)
	if response.Status == schedulerv1.SolveStatus_SOLVE_STATUS_FAILED {
		return 1
	}
	return 0
}

// solveStreaming prints the events as they arrive and returns the final result.
func solveStreaming(ctx context.Context, client *deliberate.Client, request *deliberate.SolveRequest) (*deliberate.SolveResponse, error) {
	events, err := client.SolveStream(ctx, request)
	if err != nil {
		return nil, err
	}
	defer events.Close()
	var final *deliberate.SolveResponse
	index := map[string]int32{} // draft id -> its position in the request, as the drafts are numbered
	for {
		event, err := events.Recv()
		if err == io.EOF {
			return final, nil
		}
		if err != nil {
			return nil, err
		}
		switch e := event.(type) {
		case deliberate.RoundStarted:
			fmt.Printf("round %d: %d drafts (%s)\n", e.Round, e.NumDrafts, e.Reason)
		case deliberate.DraftGenerated:
			index[e.Draft.Id] = e.Draft.Index
			fmt.Printf("  draft #%d generated  %d tokens  [%s]\n", e.Draft.Index, e.Draft.Usage.GetCompletionTokens(), e.Draft.Strategy)
		case deliberate.DraftVerified:
			fmt.Printf("  draft #%d verified   valid=%t score %.2f\n", index[e.Verdict.DraftId], e.Verdict.Valid, e.Verdict.Score)
		case deliberate.DraftSelected:
			fmt.Printf("  draft #%d selected   rank %d\n", index[e.DraftId], e.Rank)
		case deliberate.DraftDiscarded:
			fmt.Printf("  draft #%d discarded  %s\n", index[e.DraftId], e.Reason)
		case deliberate.ThinkingTrace:
			fmt.Println(e.Text)
		case deliberate.RefineChunk:
			fmt.Print(e.Text)
		case deliberate.Final:
			final = e.SolveResponse
		}
	}
}

func fail(err error) int {
	var failed *deliberate.Error
	if errors.As(err, &failed) && failed.Field != "" {
		fmt.Fprintf(os.Stderr, "error: %v (field %s)\n", err, failed.Field)
	} else {
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
	}
	return 2
}

// positive is nil for 0 (unset: the service's default) and the value otherwise.
func positive(n int) *int32 {
	if n == 0 {
		return nil
	}
	return proto.Int32(int32(n))
}

func envOr(name, fallback string) string {
	if value := os.Getenv(name); value != "" {
		return value
	}
	return fallback
}

package deliberate_test

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/deliberate/deliberate/clients/go/deliberate"
)

// docs/clients.md's example (section "Go"): compiled, not run (it needs a stack).
func streamAndAccept(ctx context.Context, question string) error {
	client, err := deliberate.Dial("127.0.0.1:50051") // plaintext; pass grpc.WithTransportCredentials for TLS
	if err != nil {
		return err
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute) // the request's deadline: it bounds every stage
	defer cancel()
	stream, err := client.SolveStream(ctx, &deliberate.SolveRequest{Prompt: question, NumDrafts: 3})
	if err != nil {
		return err
	}
	defer stream.Close() // stops the solve if it is still running
	for {
		event, err := stream.Recv() // io.EOF after the Final event
		if err == io.EOF {
			break
		} else if err != nil {
			return err
		}
		switch e := event.(type) { // RoundStarted, DraftGenerated, DraftVerified, DraftSelected, DraftDiscarded, …
		case deliberate.DraftVerified:
			fmt.Println(e.Verdict.DraftId, e.Verdict.Valid, e.Verdict.Score)
		case deliberate.RefineChunk:
			fmt.Print(e.Text)
		case deliberate.Final: // the whole SolveResponse, as client.Solve returns it
			if _, err := client.SubmitFeedback(ctx, e.RequestId, deliberate.Accepted); err != nil {
				return err
			}
		}
	}
	return nil
}

func ExampleClient_SolveStream() {
	if err := streamAndAccept(context.Background(), "What is 17 * 23?"); err != nil {
		fmt.Println(err)
	}
}

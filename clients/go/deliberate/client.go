// Package deliberate is a thin client of deliberate's Scheduler (deliberate.scheduler.v1): one question in,
// a staged answer out. Requests and responses are the generated contract types (aliased here); deadlines and
// cancellation come from the context; failed calls return an *Error with the gRPC code and, for
// INVALID_ARGUMENT, the request field at fault.
//
//	client, err := deliberate.Dial("127.0.0.1:50051")
//	...
//	defer client.Close()
//	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
//	defer cancel()
//	response, err := client.Solve(ctx, &deliberate.SolveRequest{Prompt: "What is 17 * 23?"})
package deliberate

import (
	"context"

	"google.golang.org/grpc"

	commonv1 "github.com/deliberate/deliberate/clients/go/gen/deliberate/common/v1"
	schedulerv1 "github.com/deliberate/deliberate/clients/go/gen/deliberate/scheduler/v1"
)

// The contract's messages under short names; they are the generated types themselves.
type (
	SolveRequest           = schedulerv1.SolveRequest
	SolveResponse          = schedulerv1.SolveResponse
	SamplingParams         = commonv1.SamplingParams
	Constraint             = commonv1.Constraint
	SubmitFeedbackResponse = schedulerv1.SubmitFeedbackResponse
	GetStateResponse       = schedulerv1.GetStateResponse
	Outcome                = schedulerv1.Outcome
)

// The outcomes SubmitFeedback records.
const (
	Accepted = schedulerv1.Outcome_OUTCOME_ACCEPTED
	Rejected = schedulerv1.Outcome_OUTCOME_REJECTED
)

// Client calls one Scheduler over one gRPC connection; it is safe for concurrent use.
type Client struct {
	conn      *grpc.ClientConn
	scheduler schedulerv1.SchedulerServiceClient
}

// Dial connects to the Scheduler at addr (host:port). Without options the connection is plaintext, as a
// local stack and an in-cluster Service serve; pass grpc.WithTransportCredentials(...) for TLS. The connection
// is made lazily: an unreachable address shows as UNAVAILABLE on the first call.
func Dial(addr string, opts ...grpc.DialOption) (*Client, error) {
	if len(opts) == 0 {
		// grpc.WithInsecure rather than credentials/insecure: the latter is newer than Debian's grpc-go 1.33.
		opts = []grpc.DialOption{grpc.WithInsecure()}
	}
	conn, err := grpc.Dial(addr, opts...)
	if err != nil {
		return nil, err
	}
	return &Client{conn: conn, scheduler: schedulerv1.NewSchedulerServiceClient(conn)}, nil
}

// Close closes the connection.
func (c *Client) Close() error {
	return c.conn.Close()
}

// Solve runs the whole pipeline (draft, verify, select, refine) and returns the result. The context's
// deadline is the request's deadline: the Scheduler bounds every stage by it.
func (c *Client) Solve(ctx context.Context, request *SolveRequest) (*SolveResponse, error) {
	response, err := c.scheduler.Solve(ctx, request)
	return response, statusError(err)
}

// SolveStream starts a solve whose stage events arrive as they happen (see Stream). Close the stream, or
// cancel ctx, to stop the solve early.
func (c *Client) SolveStream(ctx context.Context, request *SolveRequest) (*Stream, error) {
	ctx, cancel := context.WithCancel(ctx)
	events, err := c.scheduler.SolveStream(ctx, &schedulerv1.SolveStreamRequest{Request: request})
	if err != nil {
		cancel()
		return nil, statusError(err)
	}
	return &Stream{events: events, cancel: cancel}, nil
}

// SubmitFeedback records whether the answer of requestID was accepted; the Scheduler's selection weights learn
// from it. An unknown request id (or a second feedback for one) is an *Error with code NotFound.
func (c *Client) SubmitFeedback(ctx context.Context, requestID string, outcome Outcome) (*SubmitFeedbackResponse, error) {
	response, err := c.scheduler.SubmitFeedback(
		ctx, &schedulerv1.SubmitFeedbackRequest{RequestId: requestID, Outcome: outcome})
	return response, statusError(err)
}

// GetState returns the Scheduler's current weights, draft count, load, Verifier health and feedback counts.
func (c *Client) GetState(ctx context.Context) (*GetStateResponse, error) {
	response, err := c.scheduler.GetState(ctx, &schedulerv1.GetStateRequest{})
	return response, statusError(err)
}

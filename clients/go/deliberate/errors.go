package deliberate

import (
	"fmt"
	"regexp"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Error is a call that failed with a gRPC status. It implements GRPCStatus, so status.Code(err) and
// status.FromError(err) work on it as on any gRPC error.
type Error struct {
	Code    codes.Code
	Message string
	// Field is the request field an INVALID_ARGUMENT names ("num_drafts", "sampling.max_new_tokens",
	// "constraints[0].cel_expression"); empty for other codes.
	Field  string
	status *status.Status
}

func (e *Error) Error() string {
	return fmt.Sprintf("deliberate: %s: %s", e.Code, e.Message)
}

// GRPCStatus returns the status the server (or the gRPC runtime, for a local deadline) answered with.
func (e *Error) GRPCStatus() *status.Status {
	return e.status
}

// The services' INVALID_ARGUMENT messages begin with the field path: "sampling.temperature: must be in [0, 2]".
var fieldPrefix = regexp.MustCompile(`^([a-z_][a-z0-9_]*(?:\[\d+\])?(?:\.[a-z_][a-z0-9_]*(?:\[\d+\])?)*): `)

// statusError turns a gRPC error into an *Error (nil stays nil).
func statusError(err error) error {
	if err == nil {
		return nil
	}
	s, ok := status.FromError(err)
	if !ok {
		return err
	}
	return newError(s)
}

func newError(s *status.Status) *Error {
	e := &Error{Code: s.Code(), Message: s.Message(), status: s}
	if e.Code == codes.InvalidArgument {
		if match := fieldPrefix.FindStringSubmatch(e.Message); match != nil {
			e.Field = match[1]
		}
	}
	return e
}

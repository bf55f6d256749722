package deliberate

import (
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestErrorNamesTheFieldOfAnInvalidArgument(t *testing.T) {
	cases := map[string]string{
		"num_drafts: must be in [0, 8], got 99":                            "num_drafts",
		"sampling.max_new_tokens: must be in [1, 1024], got 5000":          "sampling.max_new_tokens",
		"constraints[0].cel_expression: has 3000 characters; the limit is": "constraints[0].cel_expression",
		"the request is wrong: somehow":                                    "",
		"prompt must not be empty":                                         "",
	}
	for message, field := range cases {
		got := newError(status.New(codes.InvalidArgument, message))
		if got.Field != field {
			t.Errorf("%q: field %q, want %q", message, got.Field, field)
		}
	}
	if got := newError(status.New(codes.NotFound, "request_id: unknown")); got.Field != "" {
		t.Errorf("a NOT_FOUND names no field, got %q", got.Field)
	}
}

func TestErrorKeepsTheStatusForGRPCHelpers(t *testing.T) {
	err := statusError(status.Error(codes.DeadlineExceeded, "deadline exceeded in refinement"))
	if code := status.Code(err); code != codes.DeadlineExceeded {
		t.Fatalf("status.Code = %s, want DeadlineExceeded", code)
	}
	if statusError(nil) != nil {
		t.Fatal("no error must stay no error")
	}
}

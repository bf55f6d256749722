// Command verifier-load measures a Verifier's VerifyDrafts throughput: it sends one request, read from a file of
// its serialized bytes, as fast as the server answers, with a fixed number of calls in flight spread over several
// connections, and prints one JSON line with the calls per second and its own CPU time.
//
//	verifier-load -addr 127.0.0.1:50053 -request request.bin -seconds 5 -channels 8 -in-flight 8
//
// `deliberate bench verifier` builds and runs it: a load generator in Go costs a fraction of the CPU a Python one does, so on
// a small machine the figure is the server's, not the client's.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	verifierv1 "github.com/deliberate/deliberate/clients/go/gen/deliberate/verifier/v1"
)

type result struct {
	Calls      int64   `json:"calls"`
	Errors     int64   `json:"errors"`
	Seconds    float64 `json:"seconds"`
	CallsPerS  float64 `json:"calls_per_s"`
	ClientCPUS float64 `json:"client_cpu_s"`
	FirstError string  `json:"first_error,omitempty"`
}

func main() {
	addr := flag.String("addr", "127.0.0.1:50053", "the Verifier's host:port")
	requestFile := flag.String("request", "", "a serialized deliberate.verifier.v1.VerifyDraftsRequest")
	seconds := flag.Float64("seconds", 5, "how long to measure, after the warm-up")
	channels := flag.Int("channels", 8, "connections, as separate clients would open")
	inFlight := flag.Int("in-flight", 8, "calls in flight at any time, spread over the connections")
	flag.Parse()
	if err := run(*addr, *requestFile, *seconds, *channels, *inFlight); err != nil {
		fmt.Fprintln(os.Stderr, "verifier-load:", err)
		os.Exit(2)
	}
}

func run(addr, requestFile string, seconds float64, channels, inFlight int) error {
	raw, err := os.ReadFile(requestFile)
	if err != nil {
		return err
	}
	request := &verifierv1.VerifyDraftsRequest{}
	if err := proto.Unmarshal(raw, request); err != nil {
		return fmt.Errorf("%s: %w", requestFile, err)
	}
	if channels < 1 || inFlight < 1 {
		return fmt.Errorf("-channels and -in-flight must be at least 1")
	}
	stubs := make([]verifierv1.VerifierServiceClient, channels)
	for i := range stubs {
		conn, err := grpc.Dial(addr, grpc.WithInsecure(), grpc.WithBlock())
		if err != nil {
			return err
		}
		defer conn.Close()
		stubs[i] = verifierv1.NewVerifierServiceClient(conn)
	}
	// Warm-up: every connection answers before the clock starts.
	for round := 0; round < 20; round++ {
		for _, stub := range stubs {
			if _, err := stub.VerifyDrafts(context.Background(), request); err != nil {
				return fmt.Errorf("warm-up call: %w", err)
			}
		}
	}
	var calls, errors int64
	var firstError atomic.Value
	cpuBefore := cpuSeconds()
	started := time.Now()
	deadline := started.Add(time.Duration(seconds * float64(time.Second)))
	var wg sync.WaitGroup
	for n := 0; n < inFlight; n++ {
		wg.Add(1)
		go func(stub verifierv1.VerifierServiceClient) {
			defer wg.Done()
			for time.Now().Before(deadline) {
				if _, err := stub.VerifyDrafts(context.Background(), request); err != nil {
					atomic.AddInt64(&errors, 1)
					firstError.CompareAndSwap(nil, err.Error())
					continue
				}
				atomic.AddInt64(&calls, 1)
			}
		}(stubs[n%channels])
	}
	wg.Wait()
	elapsed := time.Since(started).Seconds()
	out := result{
		Calls: calls, Errors: errors, Seconds: elapsed, CallsPerS: float64(calls) / elapsed,
		ClientCPUS: cpuSeconds() - cpuBefore,
	}
	if first, ok := firstError.Load().(string); ok {
		out.FirstError = first
	}
	return json.NewEncoder(os.Stdout).Encode(out)
}

// cpuSeconds is this process's user and system CPU time.
func cpuSeconds() float64 {
	var usage syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &usage); err != nil {
		return 0
	}
	return time.Duration(usage.Utime.Nano() + usage.Stime.Nano()).Seconds()
}

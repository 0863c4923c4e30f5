package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/ratekit/ratelimit/internal/testredis"
)

// TestMain lets the test binary be the servers' process too, as the
// command is (startServer re-executes the running binary).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "serve-envoy":
			serveEnvoy()
			os.Exit(0)
		case "serve-rls":
			serveRLS(os.Args[2:])
			os.Exit(0)
		}
	}
	os.Exit(testredis.Main(m))
}

// TestSideBySide starts envoyproxy/ratelimit and ratelimit-rls on one
// Redis with the same descriptors, checks that they make the same
// decisions for the same requests, and runs one short cell of load on
// each, so that the benchmark keeps working, profiles included.
func TestSideBySide(t *testing.T) {
	rs := testredis.Start(t)
	for _, v := range []variant{variants[0], variants[3]} {
		t.Run(v.name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := startServer(rs, v, 5, dir)
			if err != nil {
				t.Fatal(err)
			}
			defer s.stop()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var codes []rlsv3.RateLimitResponse_Code
			for range 8 {
				resp, err := s.lg.clients[0].ShouldRateLimit(ctx, request("same"))
				if err != nil {
					t.Fatal(err)
				}
				codes = append(codes, resp.OverallCode)
			}
			allowed := 0
			for _, c := range codes {
				if c == rlsv3.RateLimitResponse_OK {
					allowed++
				}
			}
			// 5 per second: a second boundary inside the 8 requests allows more
			if allowed < 5 || codes[0] != rlsv3.RateLimitResponse_OK {
				t.Fatalf("got %v, want the first 5 allowed within one second", codes)
			}
			r, err := s.measure(rs, 8, 200*time.Millisecond, 10)
			if err != nil {
				t.Fatal(err)
			}
			// (the server's CPU comes in clock ticks, which 200ms of load
			// on a busy machine may not reach)
			if r.errors != 0 || r.rate <= 0 || r.loadCPU <= 0 {
				t.Fatalf("load: %+v", r)
			}
			s.stop() // writes the profile
			p := filepath.Join(dir, slug(v.name)+".pprof")
			if fi, err := os.Stat(p); err != nil || fi.Size() == 0 {
				t.Fatalf("the server's CPU profile: %v, %v", fi, err)
			}
		})
	}
}

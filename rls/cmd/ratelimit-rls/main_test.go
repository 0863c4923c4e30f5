package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/ratekit/ratelimit/internal/testredis"
)

func TestMain(m *testing.M) { os.Exit(testredis.Main(m)) }

// TestStreamWorkersBound: -stream-workers out of range is refused before
// anything starts.
func TestStreamWorkersBound(t *testing.T) {
	for _, n := range []int{-1, maxStreamWorkers + 1} {
		err := run(context.Background(), runConfig{addr: "127.0.0.1:0", streamWorkers: n}, nil)
		if err == nil || !strings.Contains(err.Error(), "stream-workers") {
			t.Errorf("stream-workers %d: %v, want an error naming stream-workers", n, err)
		}
	}
}

// TestRun starts the command's server as main does, direct, batched and
// on a Redis Cluster, asks it through a real RLS v3 client and the health service,
// and stops it as SIGTERM does.
func TestRun(t *testing.T) {
	for _, c := range []struct {
		name             string
		batched, cluster bool
		workers          int
	}{{"direct", false, false, 0}, {"batched", true, false, 4}, {"cluster batched", true, true, DefaultStreamWorkers}} {
		t.Run(c.name, func(t *testing.T) {
			redisAddr := ""
			if c.cluster {
				redisAddr = strings.Join(testredis.StartCluster(t).Addrs(), ",")
			} else {
				redisAddr = testredis.Shared(t).Addr
			}
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "c.yaml"), []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 1}\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			port, err := testredis.FreePort()
			if err != nil {
				t.Fatal(err)
			}
			metricsAddr := fmt.Sprintf("127.0.0.1:%d", port)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			addrs := make(chan net.Addr, 1)
			done := make(chan error, 1)
			go func() {
				done <- run(ctx, runConfig{
					addr: "127.0.0.1:0", redisAddr: redisAddr, cluster: c.cluster, config: dir, prefix: testredis.Prefix(t),
					batch: c.batched, headers: true, metrics: metricsAddr, denyCache: 1000, poll: 10 * time.Millisecond, grace: 5 * time.Second,
					streamWorkers: c.workers,
				}, func(a net.Addr) { addrs <- a })
			}()
			var addr net.Addr
			select {
			case addr = <-addrs:
			case err := <-done:
				t.Fatalf("run: %v", err)
			}
			conn, err := grpc.NewClient("passthrough:///"+addr.String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			hc, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: rlsv3.RateLimitService_ServiceDesc.ServiceName})
			if err != nil || hc.Status != healthpb.HealthCheckResponse_SERVING {
				t.Fatalf("health: %v %v, want SERVING", hc, err)
			}
			client := rlsv3.NewRateLimitServiceClient(conn)
			for i, want := range []rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT} {
				resp, err := client.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "d", Descriptors: []*commonv3.RateLimitDescriptor{
					{Entries: []*commonv3.RateLimitDescriptor_Entry{{Key: "k", Value: "v"}}}}})
				if err != nil || resp.OverallCode != want {
					t.Fatalf("request %d: %v %v, want %v", i+1, resp, err, want)
				}
				if len(resp.ResponseHeadersToAdd) != 3 {
					t.Fatalf("request %d: headers %v, want 3", i+1, resp.ResponseHeadersToAdd)
				}
			}
			// more requests at once than stream workers: each its own subject's first
			var wg sync.WaitGroup
			errs := make(chan error, 32)
			for i := range 32 {
				wg.Go(func() {
					resp, err := client.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "d", Descriptors: []*commonv3.RateLimitDescriptor{
						{Entries: []*commonv3.RateLimitDescriptor_Entry{{Key: "k", Value: fmt.Sprint("w", i)}}}}})
					if err != nil || resp.OverallCode != rlsv3.RateLimitResponse_OK {
						errs <- fmt.Errorf("concurrent request %d: %v %v, want OK", i, resp, err)
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			mr, err := http.Get("http://" + metricsAddr + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(mr.Body)
			mr.Body.Close()
			for _, m := range []string{`rls_descriptors_total{otel_scope_name="github.com/ratekit/ratelimit/rls"`, "ratelimit_decisions_total{", `rls_outcome="over_limit"`} {
				if !strings.Contains(string(body), m) {
					t.Errorf("/metrics has no %s:\n%s", m, body)
				}
			}
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("run after shutdown: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("run did not return after its context ended")
			}
		})
	}
}

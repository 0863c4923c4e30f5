package rls_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/ratekit/ratelimit/internal/testredis"
	"github.com/ratekit/ratelimit/rls"
)

func TestMain(m *testing.M) { os.Exit(testredis.Main(m)) }

// env is a running Server on a loopback listener, a real RLS v3 client of
// it, and the configuration directory it was loaded from.
type env struct {
	srv    *rls.Server
	client rlsv3.RateLimitServiceClient
	dir    string
	build  rls.Builder
}

// redisClient is a client of addr set up as the command sets up its own.
func redisClient(t testing.TB, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{
		Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1,
		DialTimeout: 200 * time.Millisecond, ReadTimeout: time.Second, WriteTimeout: time.Second,
	})
	t.Cleanup(func() { c.Close() })
	return c
}

// shared is a client of the test binary's shared redis-server.
func shared(t testing.TB) *redis.Client {
	t.Helper()
	return redisClient(t, testredis.Shared(t).Addr)
}

// start writes files (name to YAML) into a new directory, loads it with a
// Builder on rdb under a prefix of t's own, and serves it.
func start(t testing.TB, rdb redis.Scripter, files map[string]string, opts ...rls.Option) *env {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		writeFile(t, filepath.Join(dir, name), body)
	}
	build := rls.NewBuilder(rdb, testredis.Prefix(t))
	cfg, err := rls.Load(dir, build)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	e := &env{srv: rls.NewServer(cfg, opts...), dir: dir, build: build}
	e.client = serve(t, e.srv)
	return e
}

// serve runs srv on a loopback listener and returns a client of it.
func serve(t testing.TB, srv rlsv3.RateLimitServiceServer) rlsv3.RateLimitServiceClient {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	rlsv3.RegisterRateLimitServiceServer(gs, srv)
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient("passthrough:///"+lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return rlsv3.NewRateLimitServiceClient(conn)
}

func writeFile(t testing.TB, path, body string) {
	t.Helper()
	// write and rename, as a deployment would, so a reload never reads half a file
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// desc builds a descriptor from key, value pairs.
func desc(kv ...string) *commonv3.RateLimitDescriptor {
	d := &commonv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &commonv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

// ask sends one request and fails t on a gRPC error.
func (e *env) ask(t testing.TB, domain string, hits uint32, ds ...*commonv3.RateLimitDescriptor) *rlsv3.RateLimitResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := e.client.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: domain, Descriptors: ds, HitsAddend: hits})
	if err != nil {
		t.Fatalf("ShouldRateLimit(%s, %v): %v", domain, ds, err)
	}
	if len(resp.Statuses) != len(ds) {
		t.Fatalf("ShouldRateLimit(%s): %d statuses for %d descriptors", domain, len(resp.Statuses), len(ds))
	}
	return resp
}

const (
	ok   = rlsv3.RateLimitResponse_OK
	over = rlsv3.RateLimitResponse_OVER_LIMIT
)

func readFile(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

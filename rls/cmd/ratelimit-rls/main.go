// Command ratelimit-rls is a rate-limit service for Envoy (and Istio,
// Contour, Gateway API implementations): it answers
// envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit from
// envoyproxy/ratelimit's YAML descriptors, on Redis, with any algorithm of
// github.com/ratekit/ratelimit per descriptor.
//
//	go run ./cmd/ratelimit-rls -config ./config -redis localhost:6379
//
// Every flag has an environment variable (RLS_ADDR, RLS_REDIS_ADDR, ...),
// which the flag, when given, overrides. See the module's README.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/batch"
	"github.com/ratekit/ratelimit/rls"
)

func env(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

func envBool(name string, def bool) bool {
	if v, ok := os.LookupEnv(name); ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			log.Fatalf("ratelimit-rls: %s: want true or false, got %q", name, v)
		}
		return b
	}
	return def
}

func envInt(name string, def int) int {
	if v, ok := os.LookupEnv(name); ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			log.Fatalf("ratelimit-rls: %s: want an integer, got %q", name, v)
		}
		return n
	}
	return def
}

func envDuration(name string, def time.Duration) time.Duration {
	if v, ok := os.LookupEnv(name); ok {
		d, err := time.ParseDuration(v)
		if err != nil {
			log.Fatalf("ratelimit-rls: %s: want a duration such as 1s, got %q", name, v)
		}
		return d
	}
	return def
}

func main() {
	fs := flag.NewFlagSet("ratelimit-rls", flag.ExitOnError)
	addr := fs.String("addr", env("RLS_ADDR", ":8081"), "gRPC listen address (RLS_ADDR)")
	redisAddr := fs.String("redis", env("RLS_REDIS_ADDR", "localhost:6379"), "Redis address (RLS_REDIS_ADDR)")
	cluster := fs.Bool("redis-cluster", envBool("RLS_REDIS_CLUSTER", false), "Redis Cluster: -redis is a comma-separated list of seed nodes (RLS_REDIS_CLUSTER)")
	redisPass := fs.String("redis-password", env("RLS_REDIS_PASSWORD", ""), "Redis password (RLS_REDIS_PASSWORD)")
	config := fs.String("config", env("RLS_CONFIG", "config"), "configuration: a YAML file or a directory of them (RLS_CONFIG)")
	metrics := fs.String("metrics-addr", env("RLS_METRICS_ADDR", ""), "HTTP address of the Prometheus /metrics endpoint; empty: none (RLS_METRICS_ADDR)")
	prefix := fs.String("prefix", env("RLS_PREFIX", "rls:"), "Redis key prefix (RLS_PREFIX)")
	denyCache := fs.Int("deny-cache", envInt("RLS_DENY_CACHE", 0), "answer repeats of a denial in process until its RetryAfter, for at most this many subjects per descriptor; 0: off (RLS_DENY_CACHE)")
	useBatch := fs.Bool("batch", envBool("RLS_BATCH", false), "decide through a batch.Client of its own; without it the library batches by default all the same (RLS_BATCH)")
	shadow := fs.Bool("shadow-mode", envBool("RLS_SHADOW_MODE", false), "every descriptor in shadow mode: decided, recorded and counted, never OVER_LIMIT (RLS_SHADOW_MODE)")
	headers := fs.Bool("headers", envBool("RLS_HEADERS", false), "add RateLimit-Limit, -Remaining and -Reset response headers (RLS_HEADERS)")
	hLimit := fs.String("header-limit", env("RLS_HEADER_LIMIT", rls.DefaultHeaders.Limit), "name of the limit header (RLS_HEADER_LIMIT)")
	hRemaining := fs.String("header-remaining", env("RLS_HEADER_REMAINING", rls.DefaultHeaders.Remaining), "name of the remaining header (RLS_HEADER_REMAINING)")
	hReset := fs.String("header-reset", env("RLS_HEADER_RESET", rls.DefaultHeaders.Reset), "name of the reset header (RLS_HEADER_RESET)")
	poll := fs.Duration("poll", envDuration("RLS_POLL", time.Second), "how often the configuration's files are checked for changes; 0: never (RLS_POLL)")
	workers := fs.Int("stream-workers", envInt("RLS_STREAM_WORKERS", DefaultStreamWorkers), "requests in flight served on goroutines that stay warm, beyond them a goroutine each; 0: a goroutine each (RLS_STREAM_WORKERS)")
	grace := fs.Duration("shutdown-grace", envDuration("RLS_SHUTDOWN_GRACE", 10*time.Second), "longest wait for requests in flight at shutdown (RLS_SHUTDOWN_GRACE)")
	fs.Parse(os.Args[1:])

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, runConfig{
		addr: *addr, redisAddr: *redisAddr, cluster: *cluster, redisPass: *redisPass, config: *config, metrics: *metrics,
		prefix: *prefix, batch: *useBatch, headers: *headers, denyCache: *denyCache, shadow: *shadow,
		headerNames: rls.Headers{Limit: *hLimit, Remaining: *hRemaining, Reset: *hReset},
		poll:        *poll, grace: *grace, streamWorkers: *workers,
	}, nil); err != nil {
		log.Fatalf("ratelimit-rls: %v", err)
	}
}

// DefaultStreamWorkers is how many requests in flight the gRPC server
// serves on worker goroutines it keeps (grpc.NumStreamWorkers) rather than
// on a goroutine started for each: a new goroutine grows its stack on the
// way down to the Redis call, a worker keeps its grown stack (see
// rls/bench). Beyond them a request gets a goroutine of its own, as
// without workers.
const DefaultStreamWorkers = 64

// maxStreamWorkers bounds -stream-workers: each worker is a goroutine
// that lives as long as the server.
const maxStreamWorkers = 1 << 16

type runConfig struct {
	addr, redisAddr, redisPass, config, metrics, prefix string
	batch, headers, shadow, cluster                     bool
	denyCache, streamWorkers                            int
	headerNames                                         rls.Headers
	poll, grace                                         time.Duration
}

// run serves until ctx ends (SIGTERM or SIGINT in main), then stops
// gracefully: health NOT_SERVING, requests in flight finished (for at most
// c.grace). ready, if not nil, is called with the listening address.
func run(ctx context.Context, c runConfig, ready func(net.Addr)) error {
	if c.streamWorkers < 0 || c.streamWorkers > maxStreamWorkers {
		return fmt.Errorf("stream-workers: %d, want 0 to %d", c.streamWorkers, maxStreamWorkers)
	}

	// A decision's timeout ends the call (ContextTimeoutEnabled); the
	// socket timeouts are above every descriptor's, so the deadline ends a
	// call first; a script that may have run is never re-sent.
	var rdb interface {
		redis.Scripter
		Close() error
	}
	if c.cluster {
		rdb = redis.NewClusterClient(&redis.ClusterOptions{
			Addrs: strings.Split(c.redisAddr, ","), Password: c.redisPass,
			ContextTimeoutEnabled: true, ReadTimeout: time.Second, WriteTimeout: time.Second, MaxRetries: -1,
		})
	} else {
		rdb = redis.NewClient(&redis.Options{
			Addr: c.redisAddr, Password: c.redisPass,
			ContextTimeoutEnabled: true, ReadTimeout: time.Second, WriteTimeout: time.Second, MaxRetries: -1,
		})
	}
	defer rdb.Close()
	var scripter redis.Scripter = rdb
	if c.batch {
		b, err := batch.New(rdb)
		if err != nil {
			return err
		}
		defer b.Close()
		scripter = b
	}
	obs, srvOpts, shutdownMetrics, err := setupTelemetry(c.metrics)
	if err != nil {
		return err
	}
	defer shutdownMetrics()
	if c.denyCache > 0 {
		obs = append(obs, ratelimit.WithDenyCache(c.denyCache))
	}
	build := rls.NewBuilder(scripter, c.prefix, obs...)

	opts := srvOpts
	if c.shadow {
		opts = append(opts, rls.WithShadowMode())
	}
	if c.headers {
		opts = append(opts, rls.WithHeaders(c.headerNames))
	}
	opts = append(opts, rls.WithLogf(log.Printf))
	srv := rls.NewServer(nil, opts...)
	if err := srv.Reload(c.config, build); err != nil {
		return err
	}
	if c.poll > 0 {
		go srv.Watch(ctx, c.config, c.poll, build)
	}

	lis, err := net.Listen("tcp", c.addr)
	if err != nil {
		return err
	}
	gs := grpc.NewServer(grpc.NumStreamWorkers(uint32(c.streamWorkers)))
	rlsv3.RegisterRateLimitServiceServer(gs, srv)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(gs, hs)
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus(rlsv3.RateLimitService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)

	served := make(chan error, 1)
	go func() { served <- gs.Serve(lis) }()
	log.Printf("ratelimit-rls: serving on %s (Redis %s, config %s)", lis.Addr(), c.redisAddr, c.config)
	if ready != nil {
		ready(lis.Addr())
	}
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	log.Printf("ratelimit-rls: shutting down")
	hs.Shutdown() // NOT_SERVING: load balancers stop sending
	done := make(chan struct{})
	go func() { gs.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(c.grace):
		gs.Stop()
	}
	if err := <-served; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

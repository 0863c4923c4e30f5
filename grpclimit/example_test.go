package grpclimit_test

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/alicebob/miniredis/v2"
	grpcratelimit "github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/ratelimit"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/grpclimit"
)

// A policy per method, a default for the rest, keyed by client IP behind
// the proxies of 10.0.0.0/8; the client reads the refusal's RetryInfo.
func Example() {
	mr := miniredis.NewMiniRedis() // an embedded Redis with a stopped clock, for a fixed output
	if err := mr.Start(); err != nil {
		panic(err)
	}
	defer mr.Close()
	mr.SetTime(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()

	// the server
	set, err := ratelimit.NewSet(rdb, ratelimit.Policies{
		"login": {Algorithm: ratelimit.SlidingLog, Limit: 5, Window: time.Minute, OnFailure: ratelimit.FailClosed},
		"api":   {Algorithm: ratelimit.SlidingLog, Limit: 2, Window: time.Minute},
	})
	if err != nil {
		panic(err)
	}
	limits, err := grpclimit.NewSet(set, grpclimit.Routes{
		Methods: map[string]string{"/auth.v1.Auth/Login": "login"}, // or "/auth.v1.Auth/*" for a whole service
		Default: "api",                                             // every other method; "" leaves them unlimited
	}, grpclimit.WithTrustedProxies("x-forwarded-for", "10.0.0.0/8"))
	if err != nil {
		panic(err)
	}
	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(limits.Unary()),
		grpc.ChainStreamInterceptor(limits.Stream()), // one decision per stream, at its start
	)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go srv.Serve(l)
	defer srv.Stop()

	// a client
	conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)
	for i := 1; i <= 3; i++ {
		var header metadata.MD
		_, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{}, grpc.Header(&header))
		fmt.Printf("%d %s | ratelimit-policy: %s | ratelimit: %s\n", i, status.Code(err), header.Get("ratelimit-policy"), header.Get("ratelimit"))
		if wait, ok := grpclimit.RetryAfter(err); ok {
			fmt.Printf("  %s; RetryInfo: wait %s\n", status.Convert(err).Message(), wait)
		}
	}
	// Output:
	// 1 OK | ratelimit-policy: ["api";q=2;w=60] | ratelimit: ["api";r=1;t=60]
	// 2 OK | ratelimit-policy: ["api";q=2;w=60] | ratelimit: ["api";r=0;t=60]
	// 3 ResourceExhausted | ratelimit-policy: ["api";q=2;w=60] | ratelimit: ["api";r=0;t=60]
	//   grpclimit: rate limit of policy "api" exceeded; retry after 1m0s; RetryInfo: wait 1m0s
}

// One limiter for every method, keyed by the API key in the x-api-key
// metadata (the peer's IP when a call has none).
func ExampleNew() {
	var limiter *ratelimit.Limiter // from ratelimit.New
	limits, err := grpclimit.New(limiter, grpclimit.WithKeyMetadata("x-api-key"))
	if err != nil {
		panic(err)
	}
	_ = grpc.NewServer(grpc.ChainUnaryInterceptor(limits.Unary()), grpc.ChainStreamInterceptor(limits.Stream()))
}

// An Interceptor is a go-grpc-middleware ratelimit.Limiter. Its refusals
// then reach clients as that middleware's ResourceExhausted, without the
// RetryInfo and QuotaFailure details.
func ExampleInterceptor_Limit() {
	var limits *grpclimit.Interceptor // from grpclimit.New or NewSet
	_ = grpc.NewServer(
		grpc.ChainUnaryInterceptor(grpcratelimit.UnaryServerInterceptor(limits)),
		grpc.ChainStreamInterceptor(grpcratelimit.StreamServerInterceptor(limits)),
	)
}

// A client that waits out refusals, up to 3 retries of at most 10 seconds
// each.
func ExampleRetryUnary() {
	conn, err := grpc.NewClient("localhost:50051",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainUnaryInterceptor(grpclimit.RetryUnary(3, 10*time.Second)))
	if err != nil {
		panic(err)
	}
	defer conn.Close()
}

package grpclimit_test

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/grpclimit"
)

// BenchmarkInterceptor is the interceptor's own cost per call, in process:
// key, decision by an in-process limiter, metadata, context.
func BenchmarkInterceptor(b *testing.B) {
	lim, err := ratelimit.New(nil, ratelimit.Config{Name: "api", Algorithm: ratelimit.FixedWindow, Limit: 1 << 40, Window: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	icpt, err := grpclimit.New(lim)
	if err != nil {
		b.Fatal(err)
	}
	unary := icpt.Unary()
	info := &grpc.UnaryServerInfo{FullMethod: emptyCall}
	handler := func(context.Context, any) (any, error) { return nil, nil }
	ctx := grpc.NewContextWithServerTransportStream(context.Background(), nopTransport{})
	ctx = peer.NewContext(ctx, &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 4711}})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := unary(ctx, nil, info, handler); err != nil {
			b.Fatal(err)
		}
	}
}

// nopTransport is a server transport stream that keeps nothing.
type nopTransport struct{}

func (nopTransport) Method() string                  { return emptyCall }
func (nopTransport) SetHeader(md metadata.MD) error  { return nil }
func (nopTransport) SendHeader(md metadata.MD) error { return nil }
func (nopTransport) SetTrailer(md metadata.MD) error { return nil }

// BenchmarkUnaryCall is a whole call over loopback TCP: without limits,
// with an in-process limiter, and with a limiter on a real redis-server.
// Compare them as ratios.
func BenchmarkUnaryCall(b *testing.B) {
	cfg := ratelimit.Config{Name: "api", Algorithm: ratelimit.FixedWindow, Limit: 1 << 40, Window: time.Hour, Timeout: 10 * time.Second}
	local, err := ratelimit.New(nil, cfg)
	if err != nil {
		b.Fatal(err)
	}
	onRedis, err := ratelimit.New(startRedis(b).client(b), cfg)
	if err != nil {
		b.Fatal(err)
	}
	// the servers are set up once: a benchmark's function runs several times
	for _, bc := range []struct {
		name string
		c    client
	}{
		{"none", serve(b, nil)},
		{"local", serveLimited(b, local)},
		{"redis", serveLimited(b, onRedis)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := bc.c.EmptyCall(context.Background(), &testgrpc.Empty{}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
	if res, err := onRedis.Peek(context.Background(), "ip:127.0.0.1"); err != nil || res.Degraded {
		b.Errorf("Redis failed during the benchmark: %v, %+v", err, res)
	}
}

func serveLimited(b *testing.B, l *ratelimit.Limiter) client {
	icpt, err := grpclimit.New(l)
	if err != nil {
		b.Fatal(err)
	}
	return serve(b, nil, grpc.ChainUnaryInterceptor(icpt.Unary()))
}

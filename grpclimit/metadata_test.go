package grpclimit_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/grpclimit"
	"github.com/ratekit/ratelimit/httplimit"
)

// fixed is a Limiter that answers one Result.
type fixed struct {
	cfg ratelimit.Config
	res ratelimit.Result
}

func (f fixed) AllowN(context.Context, string, int64) (ratelimit.Result, error) { return f.res, nil }
func (f fixed) Config() ratelimit.Config                                        { return f.cfg }

// transport is the server side of a call, as the interceptors see it.
type transport struct{ header metadata.MD }

func (s *transport) Method() string { return "/pkg.Service/Method" }
func (s *transport) SetHeader(md metadata.MD) error {
	s.header = metadata.Join(s.header, md)
	return nil
}
func (s *transport) SendHeader(md metadata.MD) error { return s.SetHeader(md) }
func (s *transport) SetTrailer(metadata.MD) error    { return nil }

// The metadata values are httplimit's header values, whatever the decision.
func TestMetadataMatchesHTTP(t *testing.T) {
	tb := ratelimit.Config{Name: "search", Algorithm: ratelimit.TokenBucket, Limit: 100, Window: time.Second, Burst: 250}
	sl := ratelimit.Config{Name: "login", Algorithm: ratelimit.SlidingLog, Limit: 5, Window: 1500 * time.Millisecond}
	local := sl
	local.OnFailure, local.LocalShare = ratelimit.FailLocal, 0.5
	closed := sl
	closed.OnFailure = ratelimit.FailClosed
	for _, tc := range []struct {
		name string
		cfg  ratelimit.Config
		res  ratelimit.Result
	}{
		{"allowed", sl, ratelimit.Result{Allowed: true, Limit: 5, Remaining: 4, ResetAfter: 1500 * time.Millisecond}},
		{"denied", sl, ratelimit.Result{Limit: 5, RetryAfter: 1200 * time.Millisecond, ResetAfter: 1499 * time.Millisecond}},
		{"never", sl, ratelimit.Result{Limit: 5, Remaining: 5, RetryAfter: ratelimit.Never}},
		{"burst", tb, ratelimit.Result{Allowed: true, Limit: 250, Remaining: 249, ResetAfter: 10 * time.Millisecond}},
		{"burst denied", tb, ratelimit.Result{Limit: 250, RetryAfter: 10 * time.Millisecond, ResetAfter: 2500 * time.Millisecond}},
		{"huge", tb, ratelimit.Result{Allowed: true, Limit: 1 << 60, Remaining: 1 << 60, ResetAfter: 1 << 62}},
		{"unnamed, limit 0", ratelimit.Config{Algorithm: ratelimit.FixedWindow, Window: time.Hour}, ratelimit.Result{}},
		{"degraded open", sl, ratelimit.Result{Allowed: true, Limit: 5, Remaining: 5, Degraded: true}},
		{"degraded local", local, ratelimit.Result{Allowed: true, Limit: 2, Remaining: 1, ResetAfter: time.Second, Degraded: true}},
		{"degraded closed", closed, ratelimit.Result{Limit: 5, RetryAfter: time.Second, ResetAfter: time.Second, Degraded: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lim := fixed{tc.cfg, tc.res}
			mw, err := httplimit.New(lim)
			if err != nil {
				t.Fatal(err)
			}
			w := httptest.NewRecorder()
			r := httptest.NewRequest("GET", "/", nil)
			mw.Handler(http.NotFoundHandler()).ServeHTTP(w, r)

			icpt, err := grpclimit.New(lim)
			if err != nil {
				t.Fatal(err)
			}
			tr := &transport{}
			ctx := grpc.NewContextWithServerTransportStream(context.Background(), tr)
			ctx = peer.NewContext(ctx, &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 4711}})
			icpt.Unary()(ctx, nil, &grpc.UnaryServerInfo{FullMethod: tr.Method()}, func(context.Context, any) (any, error) { return nil, nil })

			if len(w.Header().Values("RateLimit-Policy")) != 1 {
				t.Fatalf("httplimit sent no RateLimit-Policy: %v", w.Header())
			}
			for _, field := range []string{"RateLimit-Policy", "RateLimit"} {
				if got, want := tr.header.Get(field), w.Header().Values(field); len(got) != len(want) || len(got) == 1 && got[0] != want[0] {
					t.Errorf("%s: gRPC %q, HTTP %q; want the same", field, got, want)
				}
			}
			if tr.header.Len() != 1+len(w.Header().Values("RateLimit")) {
				t.Errorf("metadata %v; want ratelimit-policy, and ratelimit unless degraded", tr.header)
			}
		})
	}
}

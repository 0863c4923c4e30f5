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
	"github.com/ratekit/ratelimit/strategy"
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
		{"never", sl, ratelimit.Result{Limit: 5, Remaining: 5, RetryAfter: strategy.Never}},
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

// recorder is a Limiter that records the keys it is asked about.
type recorder struct{ keys []string }

func (r *recorder) AllowN(_ context.Context, key string, _ int64) (ratelimit.Result, error) {
	r.keys = append(r.keys, key)
	return ratelimit.Result{Allowed: true, Limit: 1, Remaining: 1}, nil
}
func (r *recorder) Config() ratelimit.Config {
	return ratelimit.Config{Algorithm: ratelimit.FixedWindow, Limit: 1, Window: time.Second}
}

// The subject key of a call, from its peer and metadata.
func TestKeys(t *testing.T) {
	v4 := &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 4711}
	proxy := &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 4711}
	v6 := &net.TCPAddr{IP: net.ParseIP("2001:db8:1:2:3:4:5:6"), Port: 4711}
	mapped := &net.TCPAddr{IP: net.ParseIP("::ffff:192.0.2.9"), Port: 4711}
	for _, tc := range []struct {
		name string
		opts []grpclimit.Option
		peer net.Addr
		md   []string
		want string
	}{
		{"ipv4 peer", nil, v4, nil, "ip:192.0.2.1"},
		{"ipv6 peer by its /64", nil, v6, nil, "ip:2001:db8:1:2::/64"},
		{"ipv6 peer alone", []grpclimit.Option{grpclimit.WithIPv6Prefix(128)}, v6, nil, "ip:2001:db8:1:2:3:4:5:6"},
		{"ipv4-mapped peer", nil, mapped, nil, "ip:192.0.2.9"},
		{"forwarding metadata ignored without trusted proxies", nil, proxy, []string{"x-forwarded-for", "203.0.113.7"}, "ip:10.0.0.1"},
		{"x-forwarded-for from a trusted proxy", []grpclimit.Option{grpclimit.WithTrustedProxies("X-Forwarded-For", "10.0.0.0/8")},
			proxy, []string{"x-forwarded-for", "6.6.6.6, 203.0.113.7", "x-forwarded-for", "10.0.0.2"}, "ip:203.0.113.7"},
		{"forwarded (RFC 7239) from a trusted proxy", []grpclimit.Option{grpclimit.WithTrustedProxies("forwarded", "10.0.0.1")},
			proxy, []string{"forwarded", `for=6.6.6.6, for="[2001:db8::9]:80"`}, "ip:2001:db8::/64"},
		{"the other header is not read", []grpclimit.Option{grpclimit.WithTrustedProxies("forwarded", "10.0.0.1")},
			proxy, []string{"x-forwarded-for", "203.0.113.7"}, "ip:10.0.0.1"},
		{"API key", []grpclimit.Option{grpclimit.WithKeyMetadata("x-api-key")}, v4, []string{"x-api-key", "k1"}, "header:k1"},
		{"no API key: the peer", []grpclimit.Option{grpclimit.WithKeyMetadata("x-api-key")}, v4, []string{"x-api-key", ""}, "ip:192.0.2.1"},
		{"key function", []grpclimit.Option{grpclimit.WithKeyFunc(func(ctx context.Context, c grpclimit.Call) (string, error) {
			return "method:" + c.FullMethod, nil
		})}, v4, nil, "method:/pkg.Service/Method"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			icpt, err := grpclimit.New(rec, tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			ctx := grpc.NewContextWithServerTransportStream(context.Background(), &transport{})
			ctx = peer.NewContext(ctx, &peer.Peer{Addr: tc.peer})
			ctx = metadata.NewIncomingContext(ctx, metadata.Pairs(tc.md...))
			if _, err := icpt.Unary()(ctx, nil, &grpc.UnaryServerInfo{FullMethod: "/pkg.Service/Method"},
				func(context.Context, any) (any, error) { return nil, nil }); err != nil {
				t.Fatal(err)
			}
			if len(rec.keys) != 1 || rec.keys[0] != tc.want {
				t.Errorf("keys %q; want %q", rec.keys, tc.want)
			}
		})
	}
}

// Limit outside a server call: no peer, no key; with one, a decision.
func TestLimitWithoutServer(t *testing.T) {
	icpt, err := grpclimit.New(&recorder{})
	if err != nil {
		t.Fatal(err)
	}
	if err := icpt.Limit(context.Background()); err == nil || err.Error() != "grpclimit: no key for the call: the call has no peer" {
		t.Errorf("Limit without a peer: %v; want the key error's text", err)
	}
	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 1}})
	if err := icpt.Limit(ctx); err != nil {
		t.Errorf("Limit with a peer: %v; want nil", err)
	}
}

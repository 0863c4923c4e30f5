package grpclimit_test

import (
	"strings"
	"testing"
	"time"

	grpcratelimit "github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/ratelimit"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/grpclimit"
)

var _ grpcratelimit.Limiter = (*grpclimit.Interceptor)(nil)

// The Interceptor as go-grpc-middleware's Limiter: same decisions and
// metadata; the middleware's own status keeps only the message.
func TestGoGRPCMiddleware(t *testing.T) {
	rs := startRedis(t)
	rdb := rs.client(t)
	set := newSet(t, rdb, ratelimit.Policies{
		"empty": {Algorithm: ratelimit.SlidingLog, Limit: 2, Window: time.Hour},
		"rest":  {Algorithm: ratelimit.SlidingLog, Limit: 1, Window: time.Hour},
	})
	icpt, err := grpclimit.NewSet(set, grpclimit.Routes{Methods: map[string]string{emptyCall: "empty"}, Default: "rest"})
	if err != nil {
		t.Fatal(err)
	}
	c := serve(t, nil,
		grpc.ChainUnaryInterceptor(grpcratelimit.UnaryServerInterceptor(icpt)),
		grpc.ChainStreamInterceptor(grpcratelimit.StreamServerInterceptor(icpt)))
	for i, want := range []codes.Code{codes.OK, codes.OK, codes.ResourceExhausted} {
		r := empty(t, c)
		if status.Code(r.err) != want {
			t.Fatalf("EmptyCall %d: %v; want %s", i+1, r.err, want)
		}
		if got := r.header.Get("ratelimit-policy"); len(got) != 1 || got[0] != `"empty";q=2;w=3600` {
			t.Errorf("EmptyCall %d: ratelimit-policy %q; want the method's policy", i+1, got)
		}
		if r.err != nil && !strings.Contains(status.Convert(r.err).Message(), `rate limit of policy "empty" exceeded; retry after `) {
			t.Errorf("denied: message %q; want ours inside", status.Convert(r.err).Message())
		}
		if r.err == nil && len(r.trailer.Get("remaining")) != 0 {
			t.Errorf("the middleware cannot pass the Result on, yet the handler saw %v", r.trailer)
		}
	}
	// the stream goes to the default policy, once per stream
	for i, want := range []codes.Code{codes.OK, codes.ResourceExhausted} {
		if err := streamErr(t, c, 3); status.Code(err) != want {
			t.Errorf("stream %d: %v; want %s", i+1, err, want)
		}
	}
	if n := recorded(t, set, "rest", "ip:127.0.0.1"); n != 1 {
		t.Errorf("units recorded for the streams: %d; want 1", n)
	}
}

// RetryUnary waits the RetryInfo delay and retries; it gives up at once
// when the delay is longer than it may wait.
func TestRetryUnary(t *testing.T) {
	rs := startRedis(t)
	set := newSet(t, rs.client(t), ratelimit.Policies{
		"fast": {Algorithm: ratelimit.SlidingLog, Limit: 1, Window: 200 * time.Millisecond},
		"slow": {Algorithm: ratelimit.SlidingLog, Limit: 1, Window: time.Hour},
	})
	icpt, err := grpclimit.NewSet(set, grpclimit.Routes{Methods: map[string]string{emptyCall: "fast", unaryCall: "slow"}})
	if err != nil {
		t.Fatal(err)
	}
	c := serve(t, []grpc.DialOption{grpc.WithChainUnaryInterceptor(grpclimit.RetryUnary(50, time.Minute))},
		grpc.ChainUnaryInterceptor(icpt.Unary()))
	for i := range 3 { // each call after the first is denied, waits the rest of the window, passes
		if r := empty(t, c); r.err != nil {
			t.Fatalf("call %d with retries: %v; want it passed", i+1, r.err)
		}
	}
	if _, err := c.UnaryCall(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	_, err = c.UnaryCall(t.Context(), nil)
	if d, ok := grpclimit.RetryAfter(err); status.Code(err) != codes.ResourceExhausted || !ok || d <= time.Minute {
		t.Errorf("call whose delay passes maxWait: %v (RetryAfter %v, %v); want the refusal at once", err, d, ok)
	}
	if _, ok := grpclimit.RetryAfter(nil); ok {
		t.Error("RetryAfter(nil) reported a delay")
	}
}

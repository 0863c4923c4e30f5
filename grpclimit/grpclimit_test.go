package grpclimit_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/grpclimit"
	"github.com/ratekit/ratelimit/strategy"
)

const (
	emptyCall  = "/grpc.testing.TestService/EmptyCall"
	unaryCall  = "/grpc.testing.TestService/UnaryCall"
	streamCall = "/grpc.testing.TestService/StreamingOutputCall"
)

// newSet builds a Set on rdb; the tests wait on Redis as long as it takes,
// so that a loaded machine never turns a decision into a degraded one.
func newSet(t *testing.T, rdb redis.Scripter, p ratelimit.Policies) *ratelimit.Set {
	t.Helper()
	for name, c := range p {
		if c.Timeout == 0 {
			c.Timeout = 30 * time.Second
		}
		p[name] = c
	}
	set, err := ratelimit.NewSet(rdb, p)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// 200 concurrent calls from one peer against a limit of 50: exactly 50 pass,
// and each of the 150 others is refused with the details.
func TestConcurrentCallsExact(t *testing.T) {
	rs := startRedis(t)
	rdb := rs.client(t)
	set := newSet(t, rdb, ratelimit.Policies{
		"api": {Algorithm: ratelimit.SlidingLog, Limit: 50, Window: time.Hour, OnFailure: ratelimit.FailClosed},
	})
	icpt, err := grpclimit.NewSet(set, grpclimit.Routes{Default: "api"})
	if err != nil {
		t.Fatal(err)
	}
	c := serveWith(t, icpt)

	const calls = 200
	replies := make([]reply, calls)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range calls {
		wg.Go(func() {
			<-start
			replies[i] = empty(t, c)
		})
	}
	close(start)
	wg.Wait()

	counts := map[string]int{}
	for i, r := range replies {
		counts[r.code()]++
		if status.Code(r.err) != codes.ResourceExhausted {
			continue
		}
		ri, qf := details(t, r.err)
		if ri == nil || ri.GetRetryDelay().AsDuration() <= 0 || ri.GetRetryDelay().AsDuration() > time.Hour {
			t.Errorf("call %d: RetryInfo %v; want a delay in (0, 1h]", i, ri)
		}
		if qf == nil || len(qf.GetViolations()) != 1 || qf.GetViolations()[0].GetQuotaId() != "api" {
			t.Errorf("call %d: QuotaFailure %v; want one violation of policy \"api\"", i, qf)
		}
		var left, reset int64
		if got := r.header.Get(grpclimit.MetadataRateLimit); len(got) != 1 || !scan(got[0], `"api";r=%d;t=%d`, &left, &reset) || left != 0 || reset <= 0 || reset > 3600 {
			t.Errorf("call %d: ratelimit metadata %q; want \"api\";r=0;t= in (0, 3600]", i, got)
		}
	}
	if counts["OK"] != 50 || counts["ResourceExhausted"] != 150 {
		t.Fatalf("codes of %d concurrent calls: %v; want 50 OK and 150 ResourceExhausted", calls, counts)
	}
	if n := recorded(t, set, "api", "ip:127.0.0.1"); n != 50 {
		t.Errorf("units recorded in Redis: %d; want 50", n)
	}
}

// A refusal as a real client decodes it: code, message, RetryInfo,
// QuotaFailure, and the draft-11 metadata on every decided call. Redis is
// miniredis with its clock stopped, so that every value is exact.
func TestDenialAsTheClientSeesIt(t *testing.T) {
	mr := miniredis.RunT(t)
	mr.SetTime(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	set := newSet(t, rdb, ratelimit.Policies{
		"login": {Algorithm: ratelimit.SlidingLog, Limit: 2, Window: time.Minute},
	})
	icpt, err := grpclimit.NewSet(set, grpclimit.Routes{Methods: map[string]string{emptyCall: "login"}})
	if err != nil {
		t.Fatal(err)
	}
	c := serveWith(t, icpt)

	for i, wantRemaining := range []string{"1", "0"} {
		r := empty(t, c)
		if r.err != nil {
			t.Fatalf("call %d: %v; want it allowed", i+1, r.err)
		}
		if got, want := r.header.Get("ratelimit-policy"), []string{`"login";q=2;w=60`}; !slices.Equal(got, want) {
			t.Errorf("call %d: ratelimit-policy %q; want %q", i+1, got, want)
		}
		if got, want := r.header.Get("ratelimit"), []string{`"login";r=` + wantRemaining + `;t=60`}; !slices.Equal(got, want) {
			t.Errorf("call %d: ratelimit %q; want %q", i+1, got, want)
		}
		if got := r.trailer.Get("remaining"); !slices.Equal(got, []string{wantRemaining}) {
			t.Errorf("call %d: the handler's ResultFromContext said remaining %q; want %s", i+1, got, wantRemaining)
		}
	}
	r := empty(t, c)
	st, _ := status.FromError(r.err)
	if st.Code() != codes.ResourceExhausted || !strings.HasPrefix(st.Message(), `grpclimit: rate limit of policy "login" exceeded; retry after `) {
		t.Fatalf("third call: %v; want ResourceExhausted, rate limit of policy \"login\" exceeded", r.err)
	}
	if want := `grpclimit: rate limit of policy "login" exceeded; retry after 1m0s`; st.Message() != want {
		t.Errorf("message %q; want %q", st.Message(), want)
	}
	ri, qf := details(t, r.err)
	if d := ri.GetRetryDelay().AsDuration(); ri == nil || d != time.Minute {
		t.Errorf("RetryInfo delay %v; want 1m0s", d)
	}
	if len(qf.GetViolations()) != 1 {
		t.Fatalf("QuotaFailure %v; want one violation", qf)
	}
	v := qf.GetViolations()[0]
	if v.GetSubject() != "policy:login" || v.GetQuotaId() != "login" || v.GetQuotaValue() != 2 || !strings.Contains(v.GetDescription(), `"login" allows 2 per 1m0s`) {
		t.Errorf("violation %v; want subject policy:login, quota_id login, quota_value 2, a description of the limit", v)
	}
	if got, want := r.header.Get("ratelimit"), []string{`"login";r=0;t=60`}; !slices.Equal(got, want) {
		t.Errorf("denied call: ratelimit %q; want %q", got, want)
	}
	if d, ok := grpclimit.RetryAfter(r.err); !ok || d != ri.GetRetryDelay().AsDuration() {
		t.Errorf("RetryAfter(err) = %v, %v; want the RetryInfo delay", d, ok)
	}
	// UnaryCall is not routed and there is no default: not limited.
	for i := range 3 {
		var h metadata.MD
		if _, err := c.UnaryCall(t.Context(), &testgrpc.SimpleRequest{}, grpc.Header(&h)); err != nil || len(h.Get("ratelimit-policy")) != 0 {
			t.Fatalf("unrouted call %d: %v, metadata %v; want it passed unlimited", i, err, h)
		}
	}
}

// Methods and services pick their policies, the default takes the rest,
// and each policy keeps its own quota.
func TestRoutes(t *testing.T) {
	rs := startRedis(t)
	rdb := rs.client(t)
	set := newSet(t, rdb, ratelimit.Policies{
		"one":   {Algorithm: ratelimit.FixedWindow, Limit: 1, Window: time.Hour},
		"two":   {Algorithm: ratelimit.TokenBucket, Limit: 2, Window: time.Hour},
		"three": {Algorithm: ratelimit.GCRA, Limit: 3, Window: time.Hour},
	})
	icpt, err := grpclimit.NewSet(set, grpclimit.Routes{
		Methods: map[string]string{emptyCall: "one", "/grpc.testing.TestService/*": "two"},
		Default: "three",
	})
	if err != nil {
		t.Fatal(err)
	}
	c := serve(t, nil, grpc.ChainUnaryInterceptor(icpt.Unary()), grpc.ChainStreamInterceptor(icpt.Stream()),
		grpc.UnknownServiceHandler(func(any, grpc.ServerStream) error { return status.Error(codes.Unimplemented, "no such method") }))
	count := func(call func() error) (n int) {
		for range 5 {
			if err := call(); err == nil {
				n++
			} else if status.Code(err) != codes.ResourceExhausted {
				t.Fatalf("call: %v", err)
			}
		}
		return n
	}
	if n := count(func() error { return empty(t, c).err }); n != 1 {
		t.Errorf("EmptyCall (its own policy, limit 1) passed %d of 5", n)
	}
	if n := count(func() error { _, err := c.UnaryCall(t.Context(), &testgrpc.SimpleRequest{}); return err }); n != 2 {
		t.Errorf("UnaryCall (the service's policy, limit 2) passed %d of 5", n)
	}
	// The stream shares the service's policy, whose quota UnaryCall spent.
	if n := count(func() error { return streamErr(t, c, 1) }); n != 0 {
		t.Errorf("StreamingOutputCall (the service's policy, spent) passed %d of 5", n)
	}
	// The default catches what no entry names: call it through a method the
	// server does not know, which the stream interceptor sees first.
	for i := range 5 {
		err := c.conn.Invoke(t.Context(), "/other.Service/Call", &testgrpc.Empty{}, &testgrpc.Empty{})
		want := codes.Unimplemented // allowed, then unknown to the server
		if i >= 3 {
			want = codes.ResourceExhausted
		}
		if status.Code(err) != want {
			t.Errorf("unknown method, call %d: %v; want %s", i+1, err, want)
		}
	}
	keys := rdb.Keys(t.Context(), "rl:*").Val()
	if len(keys) != 3 {
		t.Errorf("keys %v; want one per policy", keys)
	}
}

// streamErr opens a StreamingOutputCall asking for n responses and returns
// the stream's error once all were received (nil) or it failed.
func streamErr(t *testing.T, c testgrpc.TestServiceClient, n int, md ...string) error {
	t.Helper()
	_, err := streamRecv(t, c, n, md...)
	return err
}

func streamRecv(t *testing.T, c testgrpc.TestServiceClient, n int, md ...string) (int, error) {
	t.Helper()
	params := make([]*testgrpc.ResponseParameters, n)
	for i := range params {
		params[i] = &testgrpc.ResponseParameters{}
	}
	ctx := metadata.AppendToOutgoingContext(t.Context(), md...)
	s, err := c.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{ResponseParameters: params})
	if err != nil {
		return 0, err
	}
	got := 0
	for {
		if _, err := s.Recv(); err != nil {
			if errors.Is(err, io.EOF) {
				return got, nil
			}
			return got, err
		}
		got++
	}
}

// Each stream is one decision at its start, however many messages it
// carries.
func TestStreamCountsPerStream(t *testing.T) {
	rs := startRedis(t)
	rdb := rs.client(t)
	set := newSet(t, rdb, ratelimit.Policies{
		"feed": {Algorithm: ratelimit.SlidingLog, Limit: 3, Window: time.Hour},
	})
	icpt, err := grpclimit.NewSet(set, grpclimit.Routes{Methods: map[string]string{streamCall: "feed"}})
	if err != nil {
		t.Fatal(err)
	}
	c := serveWith(t, icpt)
	// the handler sees the decision in its stream's context
	s, err := c.StreamingOutputCall(t.Context(), &testgrpc.StreamingOutputCallRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("first stream: %v; want it allowed", err)
	}
	if got := s.Trailer().Get("remaining"); !slices.Equal(got, []string{"2"}) {
		t.Errorf("first stream: the handler's ResultFromContext said remaining %q; want 2", got)
	}
	ok, denied := 1, 0
	for i := 1; i < 5; i++ {
		got, err := streamRecv(t, c, 20)
		switch {
		case err == nil && got == 20:
			ok++
		case status.Code(err) == codes.ResourceExhausted && got == 0:
			denied++
			if ri, qf := details(t, err); ri == nil || qf == nil {
				t.Errorf("stream %d: details %v, %v; want RetryInfo and QuotaFailure", i+1, ri, qf)
			}
		default:
			t.Fatalf("stream %d: %d messages, %v", i+1, got, err)
		}
	}
	// a denied stream's client still reads the metadata
	s, err = c.StreamingOutputCall(t.Context(), &testgrpc.StreamingOutputCallRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("sixth stream: %v; want ResourceExhausted", err)
	}
	if h, err := s.Header(); err != nil || len(h.Get("ratelimit")) != 1 || !strings.HasPrefix(h.Get("ratelimit")[0], `"feed";r=0;t=`) {
		t.Errorf("sixth stream: header %v, %v; want the ratelimit metadata", h, err)
	}
	if ok != 3 || denied != 2 {
		t.Errorf("5 streams of 20 messages, limit 3: %d passed, %d denied; want 3 and 2", ok, denied)
	}
	if n := recorded(t, set, "feed", "ip:127.0.0.1"); n != 3 {
		t.Errorf("units recorded: %d; want 3, one per stream", n)
	}
}

// An API key in metadata is the subject; calls without one fall back to the
// peer's address.
func TestMetadataKey(t *testing.T) {
	rs := startRedis(t)
	rdb := rs.client(t)
	set := newSet(t, rdb, ratelimit.Policies{
		"api": {Algorithm: ratelimit.SlidingLog, Limit: 2, Window: time.Hour},
	})
	icpt, err := grpclimit.NewSet(set, grpclimit.Routes{Default: "api"}, grpclimit.WithKeyMetadata("X-API-Key"))
	if err != nil {
		t.Fatal(err)
	}
	c := serveWith(t, icpt)
	for _, tc := range []struct {
		md   []string
		want []string
	}{
		{[]string{"x-api-key", "alpha"}, []string{"OK", "OK", "ResourceExhausted"}},
		{[]string{"x-api-key", "beta"}, []string{"OK", "OK", "ResourceExhausted"}},
		{nil, []string{"OK", "OK", "ResourceExhausted"}},
		{[]string{"x-api-key", strings.Repeat("k", strategy.MaxKeyLen)}, []string{"InvalidArgument"}},
	} {
		for i, want := range tc.want {
			if got := empty(t, c, tc.md...).code(); got != want {
				t.Errorf("metadata %.40q, call %d: %s; want %s", tc.md, i+1, got, want)
			}
		}
	}
	for _, key := range []string{"header:alpha", "header:beta", "ip:127.0.0.1"} {
		if n := recorded(t, set, "api", key); n != 2 {
			t.Errorf("%s holds %d units; want 2", key, n)
		}
	}
}

// x-forwarded-for metadata is believed only from trusted proxies: a caller
// that is not one cannot pick its subject.
func TestForwardedForTrust(t *testing.T) {
	for _, tc := range []struct {
		name    string
		trusted string
		// per call: the x-forwarded-for value and the code wanted
		calls []string
		want  []string
		keys  []string
	}{
		{
			name:    "untrusted peer, spoofed hops ignored",
			trusted: "10.0.0.0/8",
			calls:   []string{"198.51.100.1", "198.51.100.2", "198.51.100.3, 203.0.113.9"},
			want:    []string{"OK", "OK", "ResourceExhausted"},
			keys:    []string{"rl:api:sl:{ip:127.0.0.1}"},
		},
		{
			name:    "trusted peer, right-most untrusted hop",
			trusted: "127.0.0.0/8",
			calls:   []string{"198.51.100.1", "198.51.100.2", "6.6.6.6, 198.51.100.1", "198.51.100.1, 127.0.0.5", "198.51.100.1"},
			want:    []string{"OK", "OK", "OK", "ResourceExhausted", "ResourceExhausted"},
			keys:    []string{"rl:api:sl:{ip:198.51.100.1}", "rl:api:sl:{ip:198.51.100.2}"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := startRedis(t)
			rdb := rs.client(t)
			set := newSet(t, rdb, ratelimit.Policies{
				"api": {Algorithm: ratelimit.SlidingLog, Limit: 2, Window: time.Hour},
			})
			icpt, err := grpclimit.NewSet(set, grpclimit.Routes{Default: "api"},
				grpclimit.WithTrustedProxies("x-forwarded-for", tc.trusted))
			if err != nil {
				t.Fatal(err)
			}
			c := serveWith(t, icpt)
			for i, xff := range tc.calls {
				if got := empty(t, c, "x-forwarded-for", xff).code(); got != tc.want[i] {
					t.Errorf("call %d (x-forwarded-for %q): %s; want %s", i+1, xff, got, tc.want[i])
				}
			}
			keys := rdb.Keys(t.Context(), "rl:*").Val()
			if slices.Sort(keys); !slices.Equal(keys, tc.keys) {
				t.Errorf("keys %v; want %v", keys, tc.keys)
			}
		})
	}
}

// Redis killed under load: each failure policy decides, as documented.
func TestRedisDown(t *testing.T) {
	for _, tc := range []struct {
		policy ratelimit.FailurePolicy
		// the codes of the calls after the kill (limit 3; one call was made before)
		want []codes.Code
	}{
		{ratelimit.FailOpen, []codes.Code{codes.OK, codes.OK, codes.OK, codes.OK, codes.OK}},
		{ratelimit.FailClosed, []codes.Code{codes.Unavailable, codes.Unavailable, codes.Unavailable}},
		// the local twin, with the whole limit (LocalShare 1), starts empty
		{ratelimit.FailLocal, []codes.Code{codes.OK, codes.OK, codes.OK, codes.ResourceExhausted, codes.ResourceExhausted}},
	} {
		t.Run(string(tc.policy), func(t *testing.T) {
			rs := startRedis(t)
			rdb := redis.NewClient(&redis.Options{Addr: rs.addr, ContextTimeoutEnabled: true, MaxRetries: -1})
			t.Cleanup(func() { rdb.Close() })
			set, err := ratelimit.NewSet(rdb, ratelimit.Policies{
				"api": {Algorithm: ratelimit.SlidingLog, Limit: 3, Window: time.Hour, OnFailure: tc.policy, Timeout: 5 * time.Second},
			})
			if err != nil {
				t.Fatal(err)
			}
			icpt, err := grpclimit.NewSet(set, grpclimit.Routes{Default: "api"})
			if err != nil {
				t.Fatal(err)
			}
			c := serveWith(t, icpt)
			if r := empty(t, c); r.err != nil || len(r.header.Get("ratelimit")) != 1 {
				t.Fatalf("before the kill: %v, metadata %v; want allowed, with ratelimit", r.err, r.header)
			}
			rs.kill()
			for i, want := range tc.want {
				r := empty(t, c)
				if status.Code(r.err) != want {
					t.Fatalf("call %d after the kill: %v; want %s", i+1, r.err, want)
				}
				if got := r.header.Get("ratelimit-policy"); !slices.Equal(got, []string{`"api";q=3;w=3600`}) {
					t.Errorf("call %d: ratelimit-policy %q; want the policy's", i+1, got)
				}
				if got := r.header.Get("ratelimit"); len(got) != 0 {
					t.Errorf("call %d: ratelimit %q; want none while degraded", i+1, got)
				}
				if r.err == nil {
					continue
				}
				ri, qf := details(t, r.err)
				if ri == nil || ri.GetRetryDelay().AsDuration() <= 0 {
					t.Errorf("call %d: RetryInfo %v; want a positive delay", i+1, ri)
				}
				if wantQF := want == codes.ResourceExhausted; (qf != nil) != wantQF {
					t.Errorf("call %d (%s): QuotaFailure %v; want one: %v", i+1, want, qf, wantQF)
				}
			}
		})
	}
}

// A cost function charges calls; a negative cost and a failing KeyFunc go
// to the ErrorHandler.
func TestCostAndErrors(t *testing.T) {
	rs := startRedis(t)
	rdb := rs.client(t)
	lim, err := ratelimit.New(rdb, ratelimit.Config{Name: "bytes", Algorithm: ratelimit.SlidingLog, Limit: 10, Window: time.Hour, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cost := func(ctx context.Context, c grpclimit.Call) int64 {
		md, _ := metadata.FromIncomingContext(ctx)
		switch v := md.Get("cost"); {
		case len(v) == 0:
			return 1
		case v[0] == "-1":
			return -1
		default:
			var n int64
			fmt.Sscan(v[0], &n)
			return n
		}
	}
	keyFn := func(ctx context.Context, c grpclimit.Call) (string, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		if v := md.Get("user"); len(v) > 0 {
			return "user:" + v[0], nil
		}
		return "", errTest
	}
	for _, tc := range []struct {
		name  string
		opts  []grpclimit.Option
		calls [][]string // outgoing metadata per call
		want  []codes.Code
	}{
		{"cost", []grpclimit.Option{grpclimit.WithKeyFunc(keyFn), grpclimit.WithCost(cost)},
			[][]string{{"user", "a", "cost", "0"}, {"user", "a", "cost", "4"}, {"user", "a", "cost", "6"}, {"user", "a", "cost", "1"}, {"user", "a", "cost", "11"}},
			[]codes.Code{codes.OK, codes.OK, codes.OK, codes.ResourceExhausted, codes.ResourceExhausted}},
		{"errors", []grpclimit.Option{grpclimit.WithKeyFunc(keyFn), grpclimit.WithCost(cost)},
			[][]string{{}, {"user", "b", "cost", "-1"}},
			[]codes.Code{codes.InvalidArgument, codes.Internal}},
		{"pass through", []grpclimit.Option{grpclimit.WithKeyFunc(keyFn), grpclimit.WithErrorHandler(grpclimit.PassThrough)},
			[][]string{{}, {}},
			[]codes.Code{codes.OK, codes.OK}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			icpt, err := grpclimit.New(lim, tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			c := serveWith(t, icpt)
			for i, md := range tc.calls {
				r := empty(t, c, md...)
				if status.Code(r.err) != tc.want[i] {
					t.Errorf("call %d %v: %v; want %s", i+1, md, r.err, tc.want[i])
				}
			}
		})
	}
	// a call that costs more than the capacity can never pass: no RetryInfo
	icpt, err := grpclimit.New(lim, grpclimit.WithKeyFunc(keyFn), grpclimit.WithCost(cost))
	if err != nil {
		t.Fatal(err)
	}
	r := empty(t, serveWith(t, icpt), "user", "c", "cost", "11")
	ri, qf := details(t, r.err)
	if status.Code(r.err) != codes.ResourceExhausted || ri != nil || qf == nil {
		t.Errorf("cost above capacity: %v, RetryInfo %v, QuotaFailure %v; want ResourceExhausted with a QuotaFailure only", r.err, ri, qf)
	}
}

// Invalid construction fails with one prefix, naming the field.
func TestNewErrors(t *testing.T) {
	set, err := ratelimit.NewSet(nil, ratelimit.Policies{
		"a": {Algorithm: ratelimit.FixedWindow, Limit: 1, Window: time.Second},
		"b": {Algorithm: ratelimit.FixedWindow, Limit: 1, Window: time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	lim, err := ratelimit.New(nil, ratelimit.Config{Name: "bad\nname", Algorithm: ratelimit.FixedWindow, Limit: 1, Window: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	good, _ := set.Get("a")
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"nil limiter", second(grpclimit.New(nil)), "grpclimit: limiter is nil"},
		{"typed nil limiter", second(grpclimit.New((*ratelimit.Limiter)(nil))), "grpclimit: limiter is nil"},
		{"nil set", second(grpclimit.NewSet(nil, grpclimit.Routes{})), "grpclimit: set is nil"},
		{"unknown policy", second(grpclimit.NewSet(set, grpclimit.Routes{Methods: map[string]string{emptyCall: "c"}})),
			`no policy "c"; the policies are "a", "b" (grpclimit Routes.Methods["/grpc.testing.TestService/EmptyCall"])`},
		{"unknown default", second(grpclimit.NewSet(set, grpclimit.Routes{Default: "z"})), `no policy "z"; the policies are "a", "b" (grpclimit Routes.Default)`},
		{"bad method", second(grpclimit.NewSet(set, grpclimit.Routes{Methods: map[string]string{"grpc.testing.TestService/EmptyCall": "a"}})),
			`grpclimit: Routes.Methods["grpc.testing.TestService/EmptyCall"]: want "/package.Service/Method" or "/package.Service/*"`},
		{"bad wildcard", second(grpclimit.NewSet(set, grpclimit.Routes{Methods: map[string]string{"/svc/Get*": "a"}})), `Routes.Methods["/svc/Get*"]: want`},
		{"bad name", second(grpclimit.New(lim)), `grpclimit: Config.Name "bad\nname" cannot be a metadata value`},
		{"empty metadata", second(grpclimit.New(good, grpclimit.WithKeyMetadata(""))), "grpclimit: WithKeyMetadata: name must not be empty"},
		{"bad cidr", second(grpclimit.New(good, grpclimit.WithTrustedProxies("x-forwarded-for", "10.0.0.0/33"))),
			`grpclimit: WithTrustedProxies: "10.0.0.0/33" is not a CIDR or an IP address`},
		{"empty header", second(grpclimit.New(good, grpclimit.WithTrustedProxies("", "10.0.0.0/8"))), "grpclimit: WithTrustedProxies: header must not be empty"},
		{"ipv6 bits", second(grpclimit.New(good, grpclimit.WithIPv6Prefix(0))), "grpclimit: WithIPv6Prefix: bits must be in [1, 128], got 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.err == nil {
				t.Fatalf("no error; want %q", tc.want)
			}
			msg := tc.err.Error()
			if !errors.Is(tc.err, strategy.ErrInvalidOption) || !strings.Contains(msg, tc.want) {
				t.Errorf("error %q; want ErrInvalidOption containing %q", msg, tc.want)
			}
			if strings.Count(msg, "grpclimit:")+strings.Count(msg, "ratelimit:") != 1 {
				t.Errorf("error %q: want exactly one package prefix", msg)
			}
		})
	}
}

// scan parses s with format and reports whether every verb matched.
func scan(s, format string, args ...any) bool {
	n, err := fmt.Sscanf(s, format, args...)
	return err == nil && n == len(args)
}

func second[T any](_ T, err error) error { return err }

// recorded returns the units that policy name of set holds for subject now:
// its Limit less what Peek says remains.
func recorded(t *testing.T, set *ratelimit.Set, name, subject string) int64 {
	t.Helper()
	l, err := set.Get(name)
	if err != nil {
		t.Fatal(err)
	}
	r, err := l.Peek(t.Context(), subject)
	if err != nil {
		t.Fatal(err)
	}
	return l.Config().Limit - r.Remaining
}

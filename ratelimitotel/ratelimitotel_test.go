package ratelimitotel_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/breaker"
	"github.com/ratekit/ratelimit/ratelimitotel"
	"github.com/ratekit/ratelimit/strategy"
)

const subject = "user:42"

// telemetry is an in-memory SDK: metrics through a ManualReader, spans
// through a SpanRecorder.
type telemetry struct {
	reader *sdkmetric.ManualReader
	mp     *sdkmetric.MeterProvider
	spans  *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
}

func newTelemetry(t *testing.T) *telemetry {
	t.Helper()
	tel := &telemetry{reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder()}
	tel.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(tel.reader))
	tel.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tel.spans))
	t.Cleanup(func() {
		tel.mp.Shutdown(context.Background())
		tel.tp.Shutdown(context.Background())
	})
	return tel
}

func (tel *telemetry) observer(t *testing.T) *ratelimitotel.Observer {
	t.Helper()
	obs, err := ratelimitotel.New(ratelimitotel.WithMeterProvider(tel.mp), ratelimitotel.WithTracerProvider(tel.tp))
	if err != nil {
		t.Fatal(err)
	}
	return obs
}

// point is one data point, its attributes as strings.
type point struct {
	attrs map[string]string
	value float64 // Sum and Gauge: the value; Histogram: the count
	sum   float64 // Histogram: the sum
}

// collect returns the data points of every metric by name, checking that
// they come from the scope named after the import path.
func (tel *telemetry) collect(t *testing.T) map[string][]point {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := tel.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string][]point{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != ratelimitotel.ScopeName {
			t.Errorf("metrics from scope %q, want %q", sm.Scope.Name, ratelimitotel.ScopeName)
		}
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				if !d.IsMonotonic {
					t.Errorf("%s is not monotonic", m.Name)
				}
				for _, p := range d.DataPoints {
					out[m.Name] = append(out[m.Name], point{attrs: attrMap(p.Attributes.ToSlice()), value: float64(p.Value)})
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					out[m.Name] = append(out[m.Name], point{attrs: attrMap(p.Attributes.ToSlice()), value: float64(p.Value)})
				}
			case metricdata.Histogram[float64]:
				if m.Unit != "s" {
					t.Errorf("%s unit %q, want s", m.Name, m.Unit)
				}
				for _, p := range d.DataPoints {
					out[m.Name] = append(out[m.Name], point{attrs: attrMap(p.Attributes.ToSlice()), value: float64(p.Count), sum: p.Sum})
				}
			default:
				t.Errorf("%s: unexpected aggregation %T", m.Name, m.Data)
			}
		}
	}
	return out
}

func attrMap(kvs []attribute.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value.String()
	}
	return m
}

// value returns the value of the one point of metric name whose attributes
// are exactly want, or fails.
func value(t *testing.T, points map[string][]point, name string, want map[string]string) point {
	t.Helper()
	for _, p := range points[name] {
		if fmt.Sprint(p.attrs) == fmt.Sprint(want) {
			return p
		}
	}
	var have []string
	for _, p := range points[name] {
		have = append(have, fmt.Sprint(p.attrs, "=", p.value))
	}
	t.Fatalf("%s has no point with attributes %v; it has:\n%s", name, want, strings.Join(have, "\n"))
	return point{}
}

// tee records the Decisions it passes on, to compare spans with them.
type tee struct {
	next ratelimit.Observer
	mu   sync.Mutex
	ds   []ratelimit.Decision
}

func (o *tee) Observe(ctx context.Context, d ratelimit.Decision) {
	o.mu.Lock()
	o.ds = append(o.ds, d)
	o.mu.Unlock()
	o.next.Observe(ctx, d)
}

func miniClient(t *testing.T) (*miniredis.Miniredis, *redis.Client) {
	t.Helper()
	mr := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1, DialerRetries: 1}) // fail at once when down
	t.Cleanup(func() { c.Close() })
	return mr, c
}

// noSubject fails if the subject key shows up in any attribute, event or
// name of a span or metric point.
func noSubject(t *testing.T, tel *telemetry, points map[string][]point) {
	t.Helper()
	for name, ps := range points {
		for _, p := range ps {
			for k, v := range p.attrs {
				if strings.Contains(v, subject) || strings.Contains(k, subject) {
					t.Errorf("metric %s carries the subject key: %s=%s", name, k, v)
				}
			}
		}
	}
	for _, s := range tel.spans.Ended() {
		kvs := s.Attributes()
		for _, e := range s.Events() {
			kvs = append(kvs, e.Attributes...)
		}
		for _, kv := range kvs {
			if strings.Contains(kv.Value.String(), subject) {
				t.Errorf("span %s carries the subject key: %s=%s", s.Name(), kv.Key, kv.Value.String())
			}
		}
		if strings.Contains(s.Name(), subject) || strings.Contains(s.Status().Description, subject) {
			t.Errorf("span %q (status %q) names the subject key", s.Name(), s.Status().Description)
		}
	}
}

func TestDecisionsThroughTheFacade(t *testing.T) {
	tel := newTelemetry(t)
	_, rdb := miniClient(t)
	rec := &tee{next: tel.observer(t)}
	lim, err := ratelimit.New(rdb, ratelimit.Config{Name: "login", Algorithm: ratelimit.SlidingLog, Limit: 2, Window: time.Minute,
		Timeout: 10 * time.Second}, // never degraded, however loaded the machine
		ratelimit.WithObserver(rec))
	if err != nil {
		t.Fatal(err)
	}
	ctx, parent := tel.tp.Tracer("test").Start(context.Background(), "POST /login")
	for i := 0; i < 3; i++ {
		if _, err := lim.Allow(ctx, subject); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := lim.Peek(ctx, subject); err != nil {
		t.Fatal(err)
	}
	if _, err := lim.Allow(ctx, ""); !errors.Is(err, strategy.ErrInvalidKey) {
		t.Fatalf("Allow(\"\"): err = %v, want ErrInvalidKey", err)
	}
	if err := lim.Reset(ctx, subject); err != nil {
		t.Fatal(err)
	}
	parent.End()

	points := tel.collect(t)
	base := func(op, decision string) map[string]string {
		return map[string]string{"ratelimit.policy": "login", "ratelimit.algorithm": "sliding_log",
			"ratelimit.operation": op, "ratelimit.decision": decision}
	}
	withErr := base("allow", "error")
	withErr["error.type"] = "invalid_key"
	for _, c := range []struct {
		attrs map[string]string
		want  float64
	}{
		{base("allow", "allowed"), 2},
		{base("allow", "denied"), 1},
		{base("peek", "denied"), 1},
		{withErr, 1},
		{base("reset", "reset"), 1},
	} {
		if got := value(t, points, ratelimitotel.MetricDecisions, c.attrs).value; got != c.want {
			t.Errorf("%s%v = %v, want %v", ratelimitotel.MetricDecisions, c.attrs, got, c.want)
		}
		h := value(t, points, ratelimitotel.MetricDecisionDuration, c.attrs)
		if h.value != c.want || h.sum <= 0 || h.sum > 10 {
			t.Errorf("%s%v: count %v sum %vs, want count %v and a sum of seconds in (0, 10]",
				ratelimitotel.MetricDecisionDuration, c.attrs, h.value, h.sum, c.want)
		}
	}
	if n := len(points[ratelimitotel.MetricDecisions]); n != 5 {
		t.Errorf("%s has %d series, want 5", ratelimitotel.MetricDecisions, n)
	}
	if ps := points[ratelimitotel.MetricDegradedDecisions]; len(ps) != 0 {
		t.Errorf("%s = %v, want nothing: Redis never failed", ratelimitotel.MetricDegradedDecisions, ps)
	}
	if got := value(t, points, ratelimitotel.MetricBreakerState,
		map[string]string{"ratelimit.policy": "login", "ratelimit.breaker.state": "closed"}).value; got != 1 {
		t.Errorf("breaker state closed = %v, want 1", got)
	}

	// one span per decision, children of the caller's span, timed by the Decision
	var spans []sdktrace.ReadOnlySpan
	for _, s := range tel.spans.Ended() {
		if s.Name() != "POST /login" {
			spans = append(spans, s)
		}
	}
	if len(spans) != len(rec.ds) || len(spans) != 6 {
		t.Fatalf("%d spans for %d decisions, want 6 each", len(spans), len(rec.ds))
	}
	wantNames := []string{"ratelimit.allow", "ratelimit.allow", "ratelimit.allow", "ratelimit.peek", "ratelimit.allow", "ratelimit.reset"}
	for i, s := range spans {
		d := rec.ds[i]
		if s.Name() != wantNames[i] {
			t.Errorf("span %d named %q, want %q", i, s.Name(), wantNames[i])
		}
		if s.Parent().SpanID() != parent.SpanContext().SpanID() || s.SpanContext().TraceID() != parent.SpanContext().TraceID() {
			t.Errorf("span %d %s is not a child of the caller's span", i, s.Name())
		}
		if !s.StartTime().Equal(d.Start) || !s.EndTime().Equal(d.Start.Add(d.Duration)) {
			t.Errorf("span %d runs %v to %v, want the decision's %v to %v", i, s.StartTime(), s.EndTime(), d.Start, d.Start.Add(d.Duration))
		}
		if s.InstrumentationScope().Name != ratelimitotel.ScopeName {
			t.Errorf("span %d from tracer %q, want %q", i, s.InstrumentationScope().Name, ratelimitotel.ScopeName)
		}
	}
	third := attrMap(spans[2].Attributes())
	for k, want := range map[string]string{"ratelimit.policy": "login", "ratelimit.decision": "denied", "ratelimit.cost": "1",
		"ratelimit.limit": "2", "ratelimit.remaining": "0", "ratelimit.degraded": "false", "ratelimit.allowed": "false"} {
		if third[k] != want {
			t.Errorf("denied span attribute %s = %q, want %q (all: %v)", k, third[k], want, third)
		}
	}
	if got := third["ratelimit.retry_after"]; got == "" || got == "0" || strings.HasPrefix(got, "-") {
		t.Errorf("denied span retry_after = %q, want > 0 seconds", got)
	}
	if spans[2].Status().Code == codes.Error {
		t.Errorf("a denial set the span status to Error")
	}
	if st := spans[4].Status(); st.Code != codes.Error || len(spans[4].Events()) == 0 || attrMap(spans[4].Attributes())["error.type"] != "invalid_key" {
		t.Errorf("failed call's span: status %v, %d events, attributes %v; want Error, an exception event, error.type invalid_key",
			st, len(spans[4].Events()), attrMap(spans[4].Attributes()))
	}
	noSubject(t, tel, points)
}

func TestDegradedAndBreaker(t *testing.T) {
	tel := newTelemetry(t)
	mr, rdb := miniClient(t)
	br, err := breaker.New(2, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	lim, err := ratelimit.New(rdb, ratelimit.Config{Name: "search", Algorithm: ratelimit.SlidingLog, Limit: 10, Window: time.Second,
		OnFailure: ratelimit.FailOpen, Timeout: 5 * time.Second}, ratelimit.WithObserver(tel.observer(t)), ratelimit.WithBreaker(br))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if r, err := lim.Allow(ctx, subject); err != nil || !r.Allowed || r.Degraded {
		t.Fatalf("Allow with Redis up = %+v, %v", r, err)
	}
	gauge := func(points map[string][]point, state string) float64 {
		t.Helper()
		return value(t, points, ratelimitotel.MetricBreakerState,
			map[string]string{"ratelimit.policy": "search", "ratelimit.breaker.state": state}).value
	}
	points := tel.collect(t)
	if c, o, h := gauge(points, "closed"), gauge(points, "open"), gauge(points, "half-open"); c != 1 || o != 0 || h != 0 {
		t.Fatalf("breaker gauge with Redis up: closed %v open %v half-open %v, want 1 0 0", c, o, h)
	}

	mr.Close() // Redis goes away: two failures open the breaker, the third call does not reach Redis
	for i := 0; i < 3; i++ {
		r, err := lim.Allow(ctx, subject)
		if err != nil || !r.Allowed || !r.Degraded {
			t.Fatalf("Allow %d with Redis down = %+v, %v: want allowed and degraded (fail open)", i, r, err)
		}
	}
	points = tel.collect(t)
	base := map[string]string{"ratelimit.policy": "search", "ratelimit.algorithm": "sliding_log", "ratelimit.operation": "allow"}
	with := func(extra ...string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i < len(extra); i += 2 {
			m[extra[i]] = extra[i+1]
		}
		return m
	}
	if got := value(t, points, ratelimitotel.MetricDecisions, with("ratelimit.decision", "degraded")).value; got != 3 {
		t.Errorf("degraded decisions = %v, want 3", got)
	}
	if got := value(t, points, ratelimitotel.MetricDecisions, with("ratelimit.decision", "allowed")).value; got != 1 {
		t.Errorf("allowed decisions = %v, want 1", got)
	}
	if got := value(t, points, ratelimitotel.MetricDegradedDecisions, with("ratelimit.allowed", "true", "error.type", "backend")).value; got != 2 {
		t.Errorf("degraded by a backend error = %v, want 2", got)
	}
	if got := value(t, points, ratelimitotel.MetricDegradedDecisions, with("ratelimit.allowed", "true", "error.type", "circuit_open")).value; got != 1 {
		t.Errorf("degraded by the open breaker = %v, want 1", got)
	}
	if c, o, h := gauge(points, "closed"), gauge(points, "open"), gauge(points, "half-open"); c != 0 || o != 1 || h != 0 {
		t.Errorf("breaker gauge with Redis down: closed %v open %v half-open %v, want 0 1 0", c, o, h)
	}
	var degraded int
	for _, s := range tel.spans.Ended() {
		a := attrMap(s.Attributes())
		if a["ratelimit.degraded"] == "true" {
			degraded++
			if s.Status().Code == codes.Error {
				t.Errorf("degraded span %s has status Error: the caller got no error", s.Name())
			}
			// the Limiter's one eviction-policy report may land on any
			// span: count the degraded events only
			n := 0
			for _, ev := range s.Events() {
				if ev.Name == "ratelimit.degraded" {
					n++
				}
			}
			if n != 1 {
				t.Errorf("degraded span events = %v, want one ratelimit.degraded event", s.Events())
			}
		}
	}
	if degraded != 3 {
		t.Errorf("%d degraded spans, want 3", degraded)
	}
	noSubject(t, tel, points)
}

func TestErrorType(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{fmt.Errorf("x: %w", strategy.ErrInvalidKey), "invalid_key"},
		{fmt.Errorf("x: %w", strategy.ErrInvalidCost), "invalid_cost"},
		{fmt.Errorf("%w: %w", strategy.ErrBackend, breaker.ErrOpen), "circuit_open"},
		{fmt.Errorf("%w: %w", strategy.ErrBackend, context.DeadlineExceeded), "timeout"},
		{fmt.Errorf("%w: %w", strategy.ErrBackend, context.Canceled), "canceled"},
		{fmt.Errorf("%w: connection refused", strategy.ErrBackend), "backend"},
		{errors.New("something else"), "_OTHER"},
	} {
		if got := ratelimitotel.ErrorType(c.err); got != c.want {
			t.Errorf("ErrorType(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}

// TestGlobalProviders: without options the Observer uses the otel globals.
// The globals are set to the test's SDK, then to no-op providers when the
// test ends.
func TestGlobalProviders(t *testing.T) {
	tel := newTelemetry(t)
	otel.SetMeterProvider(tel.mp)
	otel.SetTracerProvider(tel.tp)
	t.Cleanup(func() {
		otel.SetMeterProvider(metricnoop.NewMeterProvider())
		otel.SetTracerProvider(tracenoop.NewTracerProvider())
	})
	obs, err := ratelimitotel.New(ratelimitotel.WithMeterProvider(nil), ratelimitotel.WithTracerProvider(nil))
	if err != nil {
		t.Fatal(err)
	}
	lim, err := ratelimit.New(nil, ratelimit.Config{Name: "upload", Algorithm: ratelimit.SlidingLog, Limit: 1, Window: time.Hour},
		ratelimit.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	lim.Allow(context.Background(), subject)
	points := tel.collect(t)
	if got := value(t, points, ratelimitotel.MetricDecisions, map[string]string{"ratelimit.policy": "upload",
		"ratelimit.algorithm": "sliding_log", "ratelimit.operation": "allow", "ratelimit.decision": "allowed"}).value; got != 1 {
		t.Errorf("allowed decisions through the global MeterProvider = %v, want 1", got)
	}
	if n := len(tel.spans.Ended()); n != 1 {
		t.Errorf("%d spans through the global TracerProvider, want 1", n)
	}
}

// TestConcurrentObserve shares one Observer between goroutines and
// policies; run with -race.
func TestConcurrentObserve(t *testing.T) {
	tel := newTelemetry(t)
	obs := tel.observer(t)
	var wg sync.WaitGroup
	const goroutines, per = 8, 50
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				obs.Observe(context.Background(), ratelimit.Decision{Policy: fmt.Sprint("p", g%2), Algorithm: ratelimit.SlidingLog,
					Op: "allow", N: 1, Result: ratelimit.Result{Allowed: i%2 == 0}, Start: time.Now(), Duration: time.Millisecond,
					Breaker: breaker.State(i % 3)})
			}
		}()
	}
	wg.Wait()
	var total float64
	for _, p := range tel.collect(t)[ratelimitotel.MetricDecisions] {
		total += p.value
	}
	if total != goroutines*per {
		t.Errorf("counted %v decisions, want %d", total, goroutines*per)
	}
	if n := len(tel.spans.Ended()); n != goroutines*per {
		t.Errorf("%d spans, want %d", n, goroutines*per)
	}
}

// Subjects evicted to keep a limiter within its bound are counted.
func TestEvictions(t *testing.T) {
	tel := newTelemetry(t)
	var evicted evictionCount
	lim, err := ratelimit.New(nil, ratelimit.Config{Name: "ips", Algorithm: ratelimit.FixedWindow, Limit: 5, Window: time.Hour, MaxSubjects: 8},
		ratelimit.WithObserver(multiObserver{tel.observer(t), &evicted}))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if _, err := lim.Allow(context.Background(), fmt.Sprint("ip:", i)); err != nil {
			t.Fatal(err)
		}
	}
	points := tel.collect(t)
	got := value(t, points, ratelimitotel.MetricEvictions, map[string]string{"ratelimit.policy": "ips", "ratelimit.algorithm": "fixed_window"}).value
	if want := float64(evicted.n); got != want || want < 100-8 {
		t.Fatalf("%s = %v, want %v (the sum of Decision.Evicted, at least 92)", ratelimitotel.MetricEvictions, got, want)
	}
}

// evictionCount sums Decision.Evicted.
type evictionCount struct{ n int64 }

func (e *evictionCount) Observe(_ context.Context, d ratelimit.Decision) { e.n += d.Evicted }

// multiObserver tells each of its observers.
type multiObserver []ratelimit.Observer

func (m multiObserver) Observe(ctx context.Context, d ratelimit.Decision) {
	for _, o := range m {
		o.Observe(ctx, d)
	}
}

// TestShadowDenials checks that a policy in shadow mode counts the denials
// it let through apart from both allowed and denied decisions.
func TestShadowDenials(t *testing.T) {
	tel := newTelemetry(t)
	lim, err := ratelimit.New(nil, ratelimit.Config{Name: "trial", Algorithm: ratelimit.FixedWindow, Limit: 2, Window: time.Hour, Mode: "shadow"},
		ratelimit.WithObserver(tel.observer(t)))
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if r, err := lim.Allow(context.Background(), subject); err != nil || !r.Allowed {
			t.Fatalf("Allow = %+v, %v; want allowed (shadow mode)", r, err)
		}
	}
	points := tel.collect(t)
	attrs := func(decision string) map[string]string {
		return map[string]string{"ratelimit.algorithm": "fixed_window", "ratelimit.decision": decision, "ratelimit.operation": "allow", "ratelimit.policy": "trial"}
	}
	if got := value(t, points, ratelimitotel.MetricDecisions, attrs(ratelimitotel.DecisionShadowDenied)).value; got != 3 {
		t.Errorf("shadow_denied decisions = %v, want 3", got)
	}
	if got := value(t, points, ratelimitotel.MetricDecisions, attrs(ratelimitotel.DecisionAllowed)).value; got != 2 {
		t.Errorf("allowed decisions = %v, want 2", got)
	}
}

// TestCandidateAgreement checks the agreement matrix of a policy with a
// candidate: one count per compared request, by outcome, apart from the
// enforced decisions.
func TestCandidateAgreement(t *testing.T) {
	tel := newTelemetry(t)
	cfg := ratelimit.Config{Name: "api", Algorithm: ratelimit.FixedWindow, Limit: 3, Window: time.Hour,
		Candidate: &ratelimit.Config{Algorithm: ratelimit.SlidingLog, Limit: 2, Window: time.Hour}}
	lim, err := ratelimit.New(nil, cfg, ratelimit.WithObserver(tel.observer(t)))
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if _, err := lim.Allow(context.Background(), subject); err != nil {
			t.Fatal(err)
		}
	}
	points := tel.collect(t)
	for agreement, want := range map[string]float64{"both_allow": 2, "candidate_only_deny": 1, "both_deny": 1} {
		got := value(t, points, ratelimitotel.MetricCandidateDecisions, map[string]string{
			"ratelimit.agreement": agreement, "ratelimit.algorithm": "sliding_log", "ratelimit.policy": "api"}).value
		if got != want {
			t.Errorf("%s %s = %v, want %v", ratelimitotel.MetricCandidateDecisions, agreement, got, want)
		}
	}
	if got := value(t, points, ratelimitotel.MetricDecisions, map[string]string{"ratelimit.algorithm": "fixed_window",
		"ratelimit.decision": "allowed", "ratelimit.operation": "allow", "ratelimit.policy": "api"}).value; got != 3 {
		t.Errorf("allowed decisions = %v, want the enforced 3", got)
	}
}

// TestEvictionPolicy: a decision that carries Redis's eviction policy
// records the gauge and an event on its span; the others record neither.
func TestEvictionPolicy(t *testing.T) {
	tel := newTelemetry(t)
	obs := tel.observer(t)
	ctx := context.Background()
	d := ratelimit.Decision{Policy: "login", Algorithm: ratelimit.GCRA, Op: "allow", N: 1,
		Result: ratelimit.Result{Allowed: true, Limit: 5}, Start: time.Now()}
	obs.Observe(ctx, d)
	if got := tel.collect(t)[ratelimitotel.MetricEvictionPolicy]; len(got) != 0 {
		t.Fatalf("%s = %v before any report; want no series", ratelimitotel.MetricEvictionPolicy, got)
	}
	d.EvictionPolicy = "allkeys-lru"
	obs.Observe(ctx, d)
	got := value(t, tel.collect(t), ratelimitotel.MetricEvictionPolicy,
		map[string]string{"ratelimit.policy": "login", "ratelimit.eviction_policy": "allkeys-lru"}).value
	if got != 1 {
		t.Errorf("%s = %v; want 1", ratelimitotel.MetricEvictionPolicy, got)
	}
	var events []string
	for _, sp := range tel.spans.Ended() {
		for _, e := range sp.Events() {
			for _, a := range e.Attributes {
				if a.Key == ratelimitotel.AttrEvictionPolicy {
					events = append(events, e.Name+"="+a.Value.AsString())
				}
			}
		}
	}
	if want := "ratelimit.eviction_policy=allkeys-lru"; len(events) != 1 || events[0] != want {
		t.Errorf("span events = %q; want [%q]", events, want)
	}
}

// TestLeases: a leased policy's lease events are counted with their units
// (taken, given back), apart from the decisions, with no span; the
// decisions made from a lease count as local decisions, and in
// ratelimit.decisions as any other.
func TestLeases(t *testing.T) {
	tel := newTelemetry(t)
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	var now atomic.Int64 // Unix ns; the sweep's refunds read it on a goroutine of their own
	now.Store(time.Unix(1_800_000_000, 0).UnixNano())
	clock := strategy.ClockFunc(func() time.Time { return time.Unix(0, now.Load()) })
	cfg := ratelimit.Config{Name: "hot", Algorithm: ratelimit.TokenBucket, Limit: 1000, Window: time.Minute, Lease: true}
	lim, err := ratelimit.New(rdb, cfg, ratelimit.WithObserver(tel.observer(t)), ratelimit.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const n = 200
	for i := range n + 1 {
		if i == n {
			now.Add(int64(10 * time.Second)) // the lease has ended: its leftover goes back first
		}
		if r, err := lim.Allow(ctx, subject); err != nil || !r.Allowed {
			t.Fatalf("Allow = %+v, %v", r, err)
		}
	}
	points := tel.collect(t)
	lease := func(name, event string) float64 {
		return value(t, points, name, map[string]string{"ratelimit.algorithm": "token_bucket",
			"ratelimit.lease.event": event, "ratelimit.policy": "hot"}).value
	}
	taken, units := lease(ratelimitotel.MetricLeaseEvents, ratelimitotel.LeaseTaken), lease(ratelimitotel.MetricLeaseUnits, ratelimitotel.LeaseTaken)
	back := lease(ratelimitotel.MetricLeaseUnits, ratelimitotel.LeaseGivenBack)
	if lease(ratelimitotel.MetricLeaseEvents, ratelimitotel.LeaseGivenBack) != 1 || back <= 0 || units < n+1 || back > units-n {
		t.Errorf("%v leases of %v units, %v given back; want the first lease's leftover given back once", taken, units, back)
	}
	allowed := map[string]string{"ratelimit.algorithm": "token_bucket", "ratelimit.decision": "allowed", "ratelimit.operation": "allow", "ratelimit.policy": "hot"}
	if got := value(t, points, ratelimitotel.MetricDecisions, allowed).value; got != n+1 {
		t.Errorf("allowed decisions = %v, want %d (lease events are not decisions)", got, n+1)
	}
	if got := value(t, points, ratelimitotel.MetricLocalDecisions, allowed).value; got != n+1-taken {
		t.Errorf("local decisions = %v, want the %d allowed less the %v that took a lease", got, n+1, taken)
	}
	for _, sp := range tel.spans.Ended() {
		if strings.HasPrefix(sp.Name(), "ratelimit.lease") {
			t.Errorf("a span for a lease event: %s", sp.Name())
		}
	}
}

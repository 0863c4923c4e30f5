// Package ratelimitotel reports the decisions of ratelimit Limiters to
// OpenTelemetry: metrics and a span per decision, through the facade's
// Observer hook (ratelimit.WithObserver). It is a module of its own, so that
// the library's go.mod never requires OpenTelemetry; it uses the
// OpenTelemetry API only, and the application chooses the SDK.
//
//	obs, err := ratelimitotel.New() // the global MeterProvider and TracerProvider
//	lim, err := ratelimit.New(rdb, cfg, ratelimit.WithObserver(obs))
//
// The meter and the tracer are named ScopeName, the import path. One
// Observer may serve every Limiter of a process: the policy name
// (Config.Name) tells them apart.
//
// # Metrics
//
//   - ratelimit.decisions (counter, {decision}): every decision, reset and
//     failed call. Attributes ratelimit.policy, ratelimit.algorithm,
//     ratelimit.operation (allow, peek, reset, refund), ratelimit.decision
//     (allowed, denied, shadow_denied: a policy in shadow mode let through
//     what enforcement denied; degraded: the failure policy decided because
//     Redis failed or was not called; error: the call returned an error;
//     reset, refund: a reset or refund that succeeded) and, for errors,
//     error.type.
//   - ratelimit.decision.duration (histogram, s): how long each of them
//     took, with the same attributes.
//   - ratelimit.degraded.decisions (counter, {decision}): the degraded
//     decisions, with ratelimit.policy, ratelimit.algorithm,
//     ratelimit.operation, ratelimit.allowed (what the failure policy
//     decided) and error.type (why: circuit_open, timeout, canceled,
//     backend).
//   - ratelimit.candidate.decisions (counter, {decision}): the decisions of
//     a policy's candidate algorithm (ratelimit.Config.Candidate), with
//     ratelimit.policy, ratelimit.algorithm (the candidate's) and
//     ratelimit.agreement: both_allow, both_deny, enforced_only_deny,
//     candidate_only_deny (the agreement matrix), candidate_error or
//     dropped. They make no span and do not count in ratelimit.decisions.
//   - ratelimit.local.decisions (counter, {decision}): the decisions made
//     in process without a round trip (Decision.Cached: from a lease, or
//     the denial cache), with the attributes of ratelimit.decisions, in
//     which they count too.
//   - ratelimit.lease.events (counter, {event}) and ratelimit.lease.units
//     (counter, {unit}): a leased policy's (ratelimit.Config.Lease) lease
//     events and their units, with ratelimit.policy, ratelimit.algorithm
//     and ratelimit.lease.event: taken (a lease granted), denied (a lease
//     asked for and denied; no units), error (a lease asked for that
//     failed; no units), given_back (unspent units refunded when a
//     lease ended) or stranded (unspent units neither spent nor given
//     back: under-admission). They make no span and do not count in
//     ratelimit.decisions.
//   - ratelimit.evictions (counter, {subject}): subjects evicted from the
//     limiter's in-process structures (twin, FailLocal twin, denial cache)
//     to keep within their bound (ratelimit.Config.MaxSubjects,
//     WithDenyCache), by policy and algorithm: a non-zero rate means more
//     subjects within a window than the bound, and evicted subjects start
//     fresh.
//   - ratelimit.breaker.state (gauge, 1 or 0): the circuit breaker's state
//     as last seen by a decision of the policy, one series per state
//     (ratelimit.breaker.state: closed, open, half-open) with value 1 for the
//     current state and 0 for the others, with ratelimit.policy. Recorded
//     when the state seen changes. Limiters built by NewLocal have no
//     breaker and report closed.
//   - ratelimit.redis.eviction_policy (gauge, 1): recorded once per Limiter
//     on Redis (once per Set) when Redis's maxmemory-policy may evict the
//     limiter's keys, which resets their subjects, with ratelimit.policy and
//     ratelimit.eviction_policy (allkeys-lru, volatile-ttl..., or unknown:
//     CONFIG GET was refused or failed). Alert on any series: no series is
//     the safe state (noeviction, or no maxmemory).
//
// error.type is one of invalid_key, invalid_cost, invalid_option,
// invalid_limit, circuit_open, timeout, canceled, backend or _OTHER.
//
// # Spans
//
// Each decision is a span named ratelimit.allow, ratelimit.peek or
// ratelimit.reset, a child of the span in the caller's ctx, that starts at
// Decision.Start and lasts Decision.Duration. It carries the metric
// attributes plus ratelimit.cost, ratelimit.limit, ratelimit.remaining,
// ratelimit.retry_after and ratelimit.reset_after (seconds; retry_after is
// -1 for a request that can never pass), ratelimit.degraded,
// ratelimit.cached (decided in process: a lease or the denial cache) and
// ratelimit.breaker.state.
// A call that returned an error records it on the span and sets the status
// to Error; a denial is not an error. The span is made once the decision is
// known, so spans that a Redis client's instrumentation makes during the
// decision are its siblings, not its children.
//
// # Privacy
//
// The subject key is never an attribute, of a metric or of a span: keys are
// unbounded in number, which would explode the metrics' cardinality, and
// they may be personal data (user ids, IP addresses). ratelimit.Decision
// does not even carry it.
package ratelimitotel

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/breaker"
	"github.com/ratekit/ratelimit/strategy"
)

// ScopeName is the name of the meter and the tracer: the import path.
const ScopeName = "github.com/ratekit/ratelimit/ratelimitotel"

// Metric names.
const (
	MetricDecisions         = "ratelimit.decisions"
	MetricDecisionDuration  = "ratelimit.decision.duration"
	MetricDegradedDecisions = "ratelimit.degraded.decisions"
	// MetricCandidateDecisions counts the decisions of policies' candidate
	// algorithms (ratelimit.Config.Candidate).
	MetricCandidateDecisions = "ratelimit.candidate.decisions"
	MetricBreakerState       = "ratelimit.breaker.state"
	MetricEvictions          = "ratelimit.evictions"
	// MetricEvictionPolicy is recorded when Redis may evict a limiter's
	// keys (ratelimit.Decision.EvictionPolicy).
	MetricEvictionPolicy = "ratelimit.redis.eviction_policy"
	// MetricLocalDecisions counts the decisions made in process, without
	// a round trip (ratelimit.Decision.Cached).
	MetricLocalDecisions = "ratelimit.local.decisions"
	// MetricLeaseEvents and MetricLeaseUnits count a leased policy's lease
	// events and their units (AttrLeaseEvent).
	MetricLeaseEvents = "ratelimit.lease.events"
	MetricLeaseUnits  = "ratelimit.lease.units"
)

// Attribute keys.
const (
	AttrPolicy       = attribute.Key("ratelimit.policy")
	AttrAlgorithm    = attribute.Key("ratelimit.algorithm")
	AttrOperation    = attribute.Key("ratelimit.operation")
	AttrDecision     = attribute.Key("ratelimit.decision")
	AttrAllowed      = attribute.Key("ratelimit.allowed")
	AttrErrorType    = attribute.Key("error.type")
	AttrBreakerState = attribute.Key("ratelimit.breaker.state")
	AttrCost         = attribute.Key("ratelimit.cost")
	AttrLimit        = attribute.Key("ratelimit.limit")
	AttrRemaining    = attribute.Key("ratelimit.remaining")
	AttrRetryAfter   = attribute.Key("ratelimit.retry_after")
	AttrResetAfter   = attribute.Key("ratelimit.reset_after")
	AttrDegraded     = attribute.Key("ratelimit.degraded")
	AttrCached       = attribute.Key("ratelimit.cached")
	AttrAgreement    = attribute.Key("ratelimit.agreement")
	// AttrEvictionPolicy is Redis's maxmemory-policy, or "unknown".
	AttrEvictionPolicy = attribute.Key("ratelimit.eviction_policy")
	// AttrLeaseEvent is a lease event: one of the LeaseEvent values.
	AttrLeaseEvent = attribute.Key("ratelimit.lease.event")
)

// Values of AttrLeaseEvent.
const (
	LeaseTaken     = "taken"
	LeaseDenied    = "denied"
	LeaseError     = "error"
	LeaseGivenBack = "given_back"
	LeaseStranded  = "stranded"
)

// Values of AttrDecision.
const (
	DecisionAllowed  = "allowed"
	DecisionDenied   = "denied"
	DecisionDegraded = "degraded"
	DecisionError    = "error"
	DecisionReset    = "reset"
	// DecisionShadowDenied: a policy in shadow mode let through a request
	// that enforcement denied (Result.Shadow).
	DecisionShadowDenied = "shadow_denied"
	// DecisionRefund: a refund that succeeded.
	DecisionRefund = "refund"
)

// durationBounds are the histogram's bucket boundaries in seconds: a
// decision takes from microseconds (denial cache, local twin) to the
// facade's timeout.
var durationBounds = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}

// breakerStates are the states a breaker gauge has a series for.
var breakerStates = []breaker.State{breaker.Closed, breaker.Open, breaker.HalfOpen}

// Option configures an Observer.
type Option func(*config)

type config struct {
	mp metric.MeterProvider
	tp trace.TracerProvider
}

// WithMeterProvider sets the MeterProvider the metrics are made with; the
// default is the global one (otel.GetMeterProvider). A nil mp is ignored.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) {
		if mp != nil {
			c.mp = mp
		}
	}
}

// WithTracerProvider sets the TracerProvider the spans are made with; the
// default is the global one (otel.GetTracerProvider). A nil tp is ignored.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) {
		if tp != nil {
			c.tp = tp
		}
	}
}

// Observer implements ratelimit.Observer with OpenTelemetry metrics and
// spans. It is safe for concurrent use; one Observer may serve every
// Limiter of a process.
type Observer struct {
	tracer    trace.Tracer
	decisions metric.Int64Counter
	duration  metric.Float64Histogram
	degraded  metric.Int64Counter
	breaker   metric.Int64Gauge
	evictions metric.Int64Counter
	compared  metric.Int64Counter
	policy    metric.Int64Gauge // MetricEvictionPolicy
	local     metric.Int64Counter
	leases    metric.Int64Counter // MetricLeaseEvents
	units     metric.Int64Counter // MetricLeaseUnits

	attrSets sync.Map // attrKey -> metric.MeasurementOption
	breakers sync.Map // policy name -> *breakerSeen
}

var _ ratelimit.Observer = (*Observer)(nil)

// New returns an Observer that makes its instruments with the MeterProvider
// and its spans with the TracerProvider that opts choose, the globals by
// default. It fails when an instrument cannot be made.
func New(opts ...Option) (*Observer, error) {
	c := config{}
	for _, opt := range opts {
		if opt != nil {
			opt(&c)
		}
	}
	if c.mp == nil {
		c.mp = otel.GetMeterProvider()
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	m := c.mp.Meter(ScopeName)
	o := &Observer{tracer: c.tp.Tracer(ScopeName)}
	var err error
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, e := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		err = errors.Join(err, e)
		return c
	}
	gauge := func(name, desc string) metric.Int64Gauge {
		g, e := m.Int64Gauge(name, metric.WithUnit("1"), metric.WithDescription(desc))
		err = errors.Join(err, e)
		return g
	}
	o.decisions = counter(MetricDecisions, "{decision}",
		"Rate-limit decisions, by policy, algorithm, operation and outcome.")
	var e error
	o.duration, e = m.Float64Histogram(MetricDecisionDuration, metric.WithUnit("s"),
		metric.WithDescription("How long rate-limit decisions took."),
		metric.WithExplicitBucketBoundaries(durationBounds...))
	err = errors.Join(err, e)
	o.degraded = counter(MetricDegradedDecisions, "{decision}",
		"Rate-limit decisions made by the failure policy because Redis failed or was not called, by cause.")
	o.breaker = gauge(MetricBreakerState,
		"The circuit breaker's state: 1 for the current state, 0 for the others.")
	o.compared = counter(MetricCandidateDecisions, "{decision}",
		"Decisions of a policy's candidate algorithm, by how they agreed with the enforced ones.")
	o.evictions = counter(MetricEvictions, "{subject}",
		"Subjects evicted from a limiter's in-process structures (twin, FailLocal twin, denial cache) to keep within their bound, by policy and algorithm; evicted subjects start fresh.")
	o.policy = gauge(MetricEvictionPolicy,
		"1 when Redis's maxmemory-policy may evict a limiter's keys, resetting their subjects, or is unknown (CONFIG GET refused), by policy and eviction policy.")
	o.local = counter(MetricLocalDecisions, "{decision}",
		"Rate-limit decisions made in process without a round trip (from a lease or the denial cache), by policy, algorithm, operation and outcome.")
	o.leases = counter(MetricLeaseEvents, "{event}",
		"Lease events of leased policies: leases taken, denied or failed, unspent units given back or stranded.")
	o.units = counter(MetricLeaseUnits, "{unit}",
		"Units of leased policies' lease events: leased, given back, stranded.")
	if err != nil {
		return nil, err
	}
	return o, nil
}

// attrKey is everything a decision's metric attributes depend on; every
// field has few values, so the cache of attribute sets stays small.
type attrKey struct {
	policy, algorithm, op, decision, errType string
	degraded                                 bool   // the degraded counter's set (decision is then allowed or denied)
	evictions                                bool   // the evictions counter's set: policy and algorithm only
	agreement                                string // the candidate counter's set: policy, algorithm and agreement
	lease                                    string // the lease counters' set: policy, algorithm and lease event
}

func (o *Observer) attrs(k attrKey) metric.MeasurementOption {
	if v, ok := o.attrSets.Load(k); ok {
		return v.(metric.MeasurementOption)
	}
	kv := []attribute.KeyValue{AttrPolicy.String(k.policy), AttrAlgorithm.String(k.algorithm)}
	if k.evictions {
		v, _ := o.attrSets.LoadOrStore(k, metric.WithAttributeSet(attribute.NewSet(kv...)))
		return v.(metric.MeasurementOption)
	}
	if k.lease != "" {
		kv = append(kv, AttrLeaseEvent.String(k.lease))
		v, _ := o.attrSets.LoadOrStore(k, metric.WithAttributeSet(attribute.NewSet(kv...)))
		return v.(metric.MeasurementOption)
	}
	if k.agreement != "" {
		kv = append(kv, AttrAgreement.String(k.agreement))
		v, _ := o.attrSets.LoadOrStore(k, metric.WithAttributeSet(attribute.NewSet(kv...)))
		return v.(metric.MeasurementOption)
	}
	kv = append(kv, AttrOperation.String(k.op))
	if k.degraded {
		kv = append(kv, AttrAllowed.Bool(k.decision == DecisionAllowed))
	} else {
		kv = append(kv, AttrDecision.String(k.decision))
	}
	if k.errType != "" {
		kv = append(kv, AttrErrorType.String(k.errType))
	}
	v, _ := o.attrSets.LoadOrStore(k, metric.WithAttributeSet(attribute.NewSet(kv...)))
	return v.(metric.MeasurementOption)
}

// Observe records d: see the package doc. It implements ratelimit.Observer.
func (o *Observer) Observe(ctx context.Context, d ratelimit.Decision) {
	if d.Op == "compare" {
		o.compared.Add(ctx, 1, o.attrs(attrKey{policy: d.Policy, algorithm: string(d.Algorithm), agreement: d.Agreement}))
		return
	}
	if ev := leaseEvent(d); ev != "" {
		set := o.attrs(attrKey{policy: d.Policy, algorithm: string(d.Algorithm), lease: ev})
		o.leases.Add(ctx, 1, set)
		if ev != LeaseDenied && ev != LeaseError {
			o.units.Add(ctx, d.N, set)
		}
		return
	}
	k := attrKey{policy: d.Policy, algorithm: string(d.Algorithm), op: d.Op, decision: decisionOf(d)}
	if d.Err != nil {
		k.errType = ErrorType(d.Err)
	}
	set := o.attrs(k)
	o.decisions.Add(ctx, 1, set)
	o.duration.Record(ctx, d.Duration.Seconds(), set)
	if d.Cached {
		o.local.Add(ctx, 1, set)
	}
	if d.Degraded {
		dk := attrKey{policy: k.policy, algorithm: k.algorithm, op: k.op, degraded: true,
			decision: DecisionDenied, errType: ErrorType(d.Cause)}
		if d.Result.Allowed {
			dk.decision = DecisionAllowed
		}
		o.degraded.Add(ctx, 1, o.attrs(dk))
	}
	if d.Evicted > 0 {
		o.evictions.Add(ctx, d.Evicted, o.attrs(attrKey{policy: k.policy, algorithm: k.algorithm, evictions: true}))
	}
	if d.EvictionPolicy != "" { // once per Limiter: no cache of the set
		o.policy.Record(ctx, 1, metric.WithAttributes(AttrPolicy.String(d.Policy), AttrEvictionPolicy.String(d.EvictionPolicy)))
	}
	o.recordBreaker(ctx, d.Policy, d.Breaker)
	o.span(ctx, d, k)
}

// leaseEvent is the value of AttrLeaseEvent for a lease event d, "" for
// any other Decision.
func leaseEvent(d ratelimit.Decision) string {
	switch d.Op {
	case "lease_take":
		switch {
		case d.Err != nil:
			return LeaseError
		case d.Result.Allowed:
			return LeaseTaken
		}
		return LeaseDenied
	case "lease_give_back":
		return LeaseGivenBack
	case "lease_strand":
		return LeaseStranded
	}
	return ""
}

// decisionOf is the value of AttrDecision for d.
func decisionOf(d ratelimit.Decision) string {
	switch {
	case d.Err != nil:
		return DecisionError
	case d.Op == "reset":
		return DecisionReset
	case d.Op == "refund":
		return DecisionRefund
	case d.Result.Shadow:
		return DecisionShadowDenied
	case d.Degraded:
		return DecisionDegraded
	case d.Result.Allowed:
		return DecisionAllowed
	}
	return DecisionDenied
}

// ErrorType classifies err for the error.type attribute: invalid_key,
// invalid_cost, invalid_option, invalid_limit, circuit_open, timeout,
// canceled, backend, or _OTHER; "" for a nil err.
func ErrorType(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, strategy.ErrInvalidKey):
		return "invalid_key"
	case errors.Is(err, strategy.ErrInvalidCost):
		return "invalid_cost"
	case errors.Is(err, strategy.ErrInvalidOption):
		return "invalid_option"
	case errors.Is(err, strategy.ErrInvalidLimit):
		return "invalid_limit"
	case errors.Is(err, breaker.ErrOpen):
		return "circuit_open"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, strategy.ErrBackend):
		return "backend"
	}
	return "_OTHER"
}

// breakerSeen is the breaker state last recorded for one policy.
type breakerSeen struct {
	state atomic.Int32 // -1 until first recorded
	mu    sync.Mutex   // orders the recordings of changes
	sets  []metric.RecordOption
}

func (o *Observer) recordBreaker(ctx context.Context, policy string, s breaker.State) {
	v, ok := o.breakers.Load(policy)
	if !ok {
		b := &breakerSeen{}
		b.state.Store(-1)
		for _, st := range breakerStates {
			b.sets = append(b.sets, metric.WithAttributeSet(attribute.NewSet(AttrPolicy.String(policy), AttrBreakerState.String(st.String()))))
		}
		v, _ = o.breakers.LoadOrStore(policy, b)
	}
	b := v.(*breakerSeen)
	if b.state.Load() == int32(s) {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state.Load() == int32(s) {
		return
	}
	for i, st := range breakerStates {
		var one int64
		if st == s {
			one = 1
		}
		o.breaker.Record(ctx, one, b.sets[i])
	}
	b.state.Store(int32(s))
}

func (o *Observer) span(ctx context.Context, d ratelimit.Decision, k attrKey) {
	start := d.Start
	if start.IsZero() {
		start = time.Now().Add(-d.Duration)
	}
	kv := []attribute.KeyValue{
		AttrPolicy.String(k.policy), AttrAlgorithm.String(k.algorithm), AttrOperation.String(k.op),
		AttrDecision.String(k.decision),
	}
	if d.Op != "reset" && d.Err == nil {
		retry := d.Result.RetryAfter.Seconds()
		if d.Result.RetryAfter == strategy.Never {
			retry = -1
		}
		kv = append(kv, AttrCost.Int64(d.N), AttrLimit.Int64(d.Result.Limit), AttrRemaining.Int64(d.Result.Remaining),
			AttrRetryAfter.Float64(retry), AttrResetAfter.Float64(d.Result.ResetAfter.Seconds()),
			AttrAllowed.Bool(d.Result.Allowed), AttrDegraded.Bool(d.Degraded), AttrCached.Bool(d.Cached))
	}
	kv = append(kv, AttrBreakerState.String(d.Breaker.String()))
	if k.errType != "" {
		kv = append(kv, AttrErrorType.String(k.errType))
	}
	_, sp := o.tracer.Start(ctx, "ratelimit."+d.Op, trace.WithTimestamp(start), trace.WithAttributes(kv...))
	if d.Err != nil {
		sp.RecordError(d.Err, trace.WithTimestamp(start.Add(d.Duration)))
		sp.SetStatus(codes.Error, d.Err.Error())
	} else if d.Degraded && d.Cause != nil {
		sp.AddEvent("ratelimit.degraded", trace.WithTimestamp(start.Add(d.Duration)),
			trace.WithAttributes(AttrErrorType.String(ErrorType(d.Cause))))
	}
	if d.EvictionPolicy != "" {
		sp.AddEvent("ratelimit.eviction_policy", trace.WithTimestamp(start.Add(d.Duration)),
			trace.WithAttributes(AttrEvictionPolicy.String(d.EvictionPolicy)))
	}
	sp.End(trace.WithTimestamp(start.Add(d.Duration)))
}

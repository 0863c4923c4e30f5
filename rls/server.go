package rls

import (
	"context"
	"errors"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/ratekit/ratelimit"
)

// Headers names the response headers the Server adds (RLS response
// headers Envoy forwards to the client), as envoyproxy/ratelimit does
// with LIMIT_RESPONSE_HEADERS_ENABLED: the limit, the remaining units and
// the seconds until reset of the descriptor closest to its limit (or of
// one over it).
type Headers struct {
	Limit, Remaining, Reset string
}

// DefaultHeaders are envoyproxy/ratelimit's default header names.
var DefaultHeaders = Headers{Limit: "RateLimit-Limit", Remaining: "RateLimit-Remaining", Reset: "RateLimit-Reset"}

// Stats counts the Server's descriptor decisions. Read it with
// Server.Stats; the fields are totals since the Server started.
type Stats struct {
	Requests   uint64 // ShouldRateLimit calls answered
	OverLimit  uint64 // descriptors answered OVER_LIMIT
	Shadow     uint64 // descriptors over their limit but answered OK: shadow_mode
	Degraded   uint64 // descriptors decided by the failure policy: Redis failed
	Unlimited  uint64 // descriptors matching an unlimited descriptor
	NoMatch    uint64 // descriptors matching no rate limit
	Errors     uint64 // ShouldRateLimit calls that returned an error
	Reloads    uint64 // configurations swapped in
	ReloadErrs uint64 // configurations refused (the previous kept)
}

type counters struct {
	requests, overLimit, shadow, degraded, unlimited, noMatch, errors, reloads, reloadErrs atomic.Uint64
}

// Option configures a Server.
type Option func(*Server)

// WithHeaders makes the Server add response headers with these names (see
// Headers); empty names are DefaultHeaders'.
func WithHeaders(h Headers) Option {
	return func(s *Server) {
		if h.Limit == "" {
			h.Limit = DefaultHeaders.Limit
		}
		if h.Remaining == "" {
			h.Remaining = DefaultHeaders.Remaining
		}
		if h.Reset == "" {
			h.Reset = DefaultHeaders.Reset
		}
		s.headers = &h
	}
}

// WithShadowMode puts every descriptor in shadow mode, as
// envoyproxy/ratelimit's SHADOW_MODE does: decided and recorded as usual,
// counted as shadow when over its limit, but answered OK.
func WithShadowMode() Option {
	return func(s *Server) { s.shadow = true }
}

// WithLogf sets where the Server logs reloads and refused configurations
// (default: nowhere).
func WithLogf(logf func(format string, args ...any)) Option {
	return func(s *Server) {
		if logf != nil {
			s.logf = logf
		}
	}
}

// Server implements envoy.service.ratelimit.v3.RateLimitService over a
// Config, which Reload or SetConfig replaces atomically: a request is
// decided wholly under one Config. It is safe for concurrent use.
type Server struct {
	rlsv3.UnimplementedRateLimitServiceServer
	cfg     atomic.Pointer[Config]
	headers *Headers
	shadow  bool // every descriptor in shadow mode
	logf    func(string, ...any)
	c       counters
	mp      metric.MeterProvider
	in      *instruments
	tp      trace.TracerProvider
	tracer  trace.Tracer
	mu      sync.Mutex // serialises Reload
}

var _ rlsv3.RateLimitServiceServer = (*Server)(nil)

// NewServer returns a Server with cfg (nil: every descriptor is unknown
// until SetConfig or Reload).
func NewServer(cfg *Config, opts ...Option) *Server {
	s := &Server{logf: func(string, ...any) {}}
	for _, o := range opts {
		if o != nil {
			o(s)
		}
	}
	s.in = newInstruments(s.mp)
	s.tracer = tracerOf(s.tp)
	if cfg != nil {
		s.cfg.Store(cfg)
	}
	return s
}

// SetConfig swaps in cfg.
func (s *Server) SetConfig(cfg *Config) {
	s.cfg.Store(cfg)
	s.c.reloads.Add(1)
}

// Config returns the Config in use (nil before the first).
func (s *Server) Config() *Config { return s.cfg.Load() }

// Reload loads path with build and swaps it in. On error (a *ConfigError)
// the Config in use is kept, and the error is logged and returned.
func (s *Server) Reload(path string, build Builder) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cfg, err := Load(path, build)
	if err != nil {
		s.c.reloadErrs.Add(1)
		s.in.reloads.Add(context.Background(), 1, metric.WithAttributes(AttrOutcome.String("refused")))
		s.logf("rls: configuration refused, keeping the previous one: %v", err)
		return err
	}
	s.SetConfig(cfg)
	s.in.reloads.Add(context.Background(), 1, metric.WithAttributes(AttrOutcome.String("loaded")))
	s.logf("rls: configuration loaded: %d domains from %d files", len(cfg.domains), len(cfg.files))
	return nil
}

// Stats returns the Server's counters.
func (s *Server) Stats() Stats {
	return Stats{
		Requests: s.c.requests.Load(), OverLimit: s.c.overLimit.Load(), Shadow: s.c.shadow.Load(),
		Degraded: s.c.degraded.Load(), Unlimited: s.c.unlimited.Load(), NoMatch: s.c.noMatch.Load(),
		Errors: s.c.errors.Load(), Reloads: s.c.reloads.Load(), ReloadErrs: s.c.reloadErrs.Load(),
	}
}

// maxSubject is the longest subject the library accepts (its MaxKeyLen).
const maxSubject = 4096

// MaxDescriptors is the most descriptors one request may carry: each is
// decided concurrently, so a request beyond it is refused rather than let
// a client start unbounded work.
const MaxDescriptors = 256

// match is what one request descriptor matched.
type match struct {
	rule      *rule
	unlimited bool
	subject   string
}

// lookup matches entries against domain's tree as envoyproxy/ratelimit
// does: entry by entry down the tree, at each level the key and value
// first, then a wildcard value (file order), then the key alone; the rate
// limit applies only when the last entry lands on a descriptor that has
// one, or the last but one on a descriptor whose rate limit has a
// tier_key that the last entry's key is (its value names the tier). The
// subject is the domain and every entry as matched, each string
// length-prefixed so that no two paths make the same subject.
func (c *Config) lookup(domain string, entries []*commonv3.RateLimitDescriptor_Entry) match {
	lv := c.domains[domain]
	if lv == nil || len(entries) == 0 {
		return match{}
	}
	var b strings.Builder
	field := func(s string) {
		b.WriteString(strconv.Itoa(len(s)))
		b.WriteByte(':')
		b.WriteString(s)
	}
	field(domain)
	for i, e := range entries {
		k, v := e.GetKey(), e.GetValue()
		n := lv.byValue[entry{k, v}]
		value := v
		if n == nil {
			for _, w := range lv.wildcards {
				if w.key == k && strings.HasPrefix(v, strings.TrimSuffix(w.value, "*")) {
					n = w
					if w.share {
						value = w.value
					}
					break
				}
			}
		}
		if n == nil {
			n = lv.byKey[k]
		}
		if n == nil {
			return match{}
		}
		field(k)
		field(value)
		// a tier's entry, last, right after a rate limit with tiers: the
		// tier it names (the own limit for a name it does not know), on the
		// subject of the entries before it
		if r := n.rule; r != nil && r.tierKey != "" && i == len(entries)-2 && entries[i+1].GetKey() == r.tierKey {
			if t := r.tiers[entries[i+1].GetValue()]; t != nil {
				r = t
			}
			return match{rule: r, subject: b.String()}
		}
		if i == len(entries)-1 {
			if n.unlimited {
				return match{unlimited: true}
			}
			return match{rule: n.rule, subject: b.String()}
		}
		if n.children == nil || (len(n.children.byKey) == 0 && len(n.children.byValue) == 0) {
			return match{}
		}
		lv = n.children
	}
	return match{}
}

// ShouldRateLimit decides every descriptor of req under one Config, at the
// cost of req's hits_addend (a descriptor's own hits_addend wins; 0 means
// 1). Descriptors matching no rate limit, or an unlimited one, are OK; a
// rate_limit named in another matched descriptor's replaces is not
// applied. The overall code is OVER_LIMIT when any descriptor is, except
// those in shadow_mode, which are decided and recorded but answered OK.
func (s *Server) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	ctx, span := s.startSpan(ctx)
	resp, err := s.shouldRateLimit(ctx, req)
	domain := "_unknown"
	if cfg := s.cfg.Load(); cfg != nil && cfg.domains[req.GetDomain()] != nil {
		domain = req.GetDomain()
	}
	endSpan(span, domain, req, resp, err)
	if err != nil {
		s.c.errors.Add(1)
		return nil, err
	}
	s.c.requests.Add(1)
	return resp, nil
}

func (s *Server) shouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	if req.GetDomain() == "" {
		return nil, status.Error(codes.InvalidArgument, "rate limit domain must not be empty")
	}
	if len(req.GetDescriptors()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "rate limit descriptor list must not be empty")
	}
	if n := len(req.GetDescriptors()); n > MaxDescriptors {
		return nil, status.Errorf(codes.InvalidArgument, "rls: %d descriptors, at most %d per request", n, MaxDescriptors)
	}
	cfg := s.cfg.Load()
	if cfg == nil {
		return nil, status.Error(codes.Unavailable, "no rate limit configuration loaded")
	}
	descs := req.GetDescriptors()
	domain := req.GetDomain()
	if cfg.domains[domain] == nil {
		domain = "_unknown"
	}
	count := func(outcome string) { s.in.descriptors.Add(ctx, 1, s.in.attrsOf(domain, outcome)) }
	matches := make([]match, len(descs))
	var replaced map[string]bool
	for i, d := range descs {
		var m match
		if o := d.GetLimit(); o != nil && cfg.domains[req.GetDomain()] != nil {
			r, err := cfg.override(o)
			if err != nil {
				return nil, status.Error(codes.InvalidArgument, "rls: "+err.Error())
			}
			m = match{rule: r, subject: overrideSubject(req.GetDomain(), d.GetEntries(), r)}
		} else {
			m = cfg.lookup(req.GetDomain(), d.GetEntries())
		}
		if len(m.subject) > maxSubject {
			return nil, status.Errorf(codes.InvalidArgument, "rls: descriptor %d: its entries make a subject of %d bytes, more than %d", i, len(m.subject), maxSubject)
		}
		matches[i] = m
		if m.rule != nil {
			for _, r := range m.rule.replaces {
				if replaced == nil {
					replaced = map[string]bool{}
				}
				replaced[r] = true
			}
		}
	}
	statuses := make([]*rlsv3.RateLimitResponse_DescriptorStatus, len(descs))
	errs := make([]error, len(descs))
	decide := func(i int) {
		m := matches[i]
		switch {
		case m.unlimited:
			s.c.unlimited.Add(1)
			count(OutcomeUnlimited)
			statuses[i] = &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK, LimitRemaining: math.MaxUint32}
			return
		case m.rule == nil || (m.rule.limitName != "" && replaced[m.rule.limitName]):
			s.c.noMatch.Add(1)
			count(OutcomeNoMatch)
			statuses[i] = &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK}
			return
		}
		cost := int64(req.GetHitsAddend())
		if h := descs[i].GetHitsAddend(); h != nil {
			cost = int64(min(h.GetValue(), math.MaxInt64))
		}
		if cost == 0 {
			cost = 1
		}
		res, err := m.rule.allowN(ctx, m.subject, cost)
		if err != nil {
			errs[i] = err
			return
		}
		statuses[i] = s.status(m.rule, res, count)
	}
	if len(descs) == 1 {
		decide(0)
	} else { // one round trip's latency for all, as envoyproxy/ratelimit pipelines them
		var wg sync.WaitGroup
		for i := range descs {
			if matches[i].rule == nil {
				decide(i)
				continue
			}
			wg.Add(1)
			go func() { defer wg.Done(); decide(i) }()
		}
		wg.Wait()
	}
	for _, err := range errs {
		if err != nil {
			return nil, grpcError(ctx, err)
		}
	}
	resp := &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK, Statuses: statuses}
	var closest *rlsv3.RateLimitResponse_DescriptorStatus
	for _, st := range statuses {
		if st.Code == rlsv3.RateLimitResponse_OVER_LIMIT {
			resp.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
			if closest == nil || closest.Code != rlsv3.RateLimitResponse_OVER_LIMIT {
				closest = st
			}
			continue
		}
		if st.CurrentLimit != nil && (closest == nil || (closest.Code != rlsv3.RateLimitResponse_OVER_LIMIT && st.LimitRemaining < closest.LimitRemaining)) {
			closest = st
		}
	}
	if s.headers != nil && closest != nil {
		reset := int64(0)
		if d := closest.DurationUntilReset.AsDuration(); d > 0 {
			reset = int64((d + time.Second - 1) / time.Second)
		}
		resp.ResponseHeadersToAdd = []*corev3.HeaderValue{
			{Key: s.headers.Limit, Value: strconv.FormatUint(uint64(closest.CurrentLimit.RequestsPerUnit), 10)},
			{Key: s.headers.Remaining, Value: strconv.FormatUint(uint64(closest.LimitRemaining), 10)},
			{Key: s.headers.Reset, Value: strconv.FormatInt(reset, 10)},
		}
	}
	return resp, nil
}

// status is the descriptor status of one decision.
func (s *Server) status(r *rule, res ratelimit.Result, count func(outcome string)) *rlsv3.RateLimitResponse_DescriptorStatus {
	outcome := OutcomeOK
	st := &rlsv3.RateLimitResponse_DescriptorStatus{
		Code:               rlsv3.RateLimitResponse_OK,
		CurrentLimit:       &rlsv3.RateLimitResponse_RateLimit{Name: r.limitName, RequestsPerUnit: r.rpu, Unit: r.unit},
		LimitRemaining:     uint32(max(0, min(res.Remaining, math.MaxUint32))),
		DurationUntilReset: durationpb.New(max(0, res.ResetAfter)),
	}
	if !res.Allowed {
		if r.shadow || s.shadow {
			s.c.shadow.Add(1)
			outcome = OutcomeShadow
		} else {
			s.c.overLimit.Add(1)
			outcome = OutcomeOverLimit
			st.Code = rlsv3.RateLimitResponse_OVER_LIMIT
		}
	}
	if res.Degraded {
		s.c.degraded.Add(1)
		outcome = OutcomeDegraded
	}
	count(outcome)
	return st
}

// grpcError is the status of a decision's error: the caller's own end
// (deadline, cancellation) as such, anything else Unavailable.
func grpcError(ctx context.Context, err error) error {
	if ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return status.FromContextError(err).Err()
	}
	return status.Errorf(codes.Unavailable, "rls: %v", err)
}

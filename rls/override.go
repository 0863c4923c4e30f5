package rls

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/ratekit/ratelimit"
)

// MaxOverrides is the most distinct limits (requests per unit, unit,
// multiplier) that requests' descriptor limit overrides may name per
// Config; past it an override is refused. Each is one limiter, built on
// first use.
const MaxOverrides = 1024

// overrides holds the limiters of descriptor limit overrides.
type overrides struct {
	mu    sync.Mutex
	rules map[overrideKey]*rule
}

type overrideKey struct {
	rpu, unit, mult uint32
}

// override returns the rule of a request descriptor's own limit (Envoy's
// RateLimitDescriptor.limit, set from dynamic metadata): a fixed window,
// as envoyproxy/ratelimit enforces it, of the unit times its multiplier.
func (c *Config) override(o *commonv3.RateLimitDescriptor_RateLimitOverride) (*rule, error) {
	mult := uint32(1)
	if m := o.GetUnitMultiplier(); m != nil && m.GetValue() > 0 {
		mult = m.GetValue()
	}
	unit := rlsv3.RateLimitResponse_RateLimit_Unit(o.GetUnit()) // the two enums share their values
	k := overrideKey{o.GetRequestsPerUnit(), uint32(unit), mult}
	c.over.mu.Lock()
	defer c.over.mu.Unlock()
	if r, ok := c.over.rules[k]; ok {
		return r, nil
	}
	if len(c.over.rules) >= MaxOverrides {
		return nil, fmt.Errorf("more than %d distinct descriptor limit overrides", MaxOverrides)
	}
	var window time.Duration
	for _, u := range Units {
		if u.Unit == unit {
			window = u.Window
		}
	}
	if window == 0 {
		return nil, fmt.Errorf("descriptor limit override: unknown unit %v", o.GetUnit())
	}
	lim, err := c.build(ratelimit.Config{
		Name: "_override", Algorithm: ratelimit.FixedWindow,
		Limit: int64(k.rpu), Window: window * time.Duration(mult),
		Prefix: "override:",
	})
	if err != nil {
		return nil, fmt.Errorf("descriptor limit override: %w", err)
	}
	r := &rule{limiter: lim, name: "_override", rpu: k.rpu, unit: unit,
		tag: fmt.Sprintf("%d/%d/%d", k.rpu, k.unit, k.mult)}
	if c.over.rules == nil {
		c.over.rules = map[overrideKey]*rule{}
	}
	c.over.rules[k] = r
	return r, nil
}

// overrideSubject is the subject of a descriptor with its own limit: the
// domain, every entry and the limit, so that two limits never share a count.
func overrideSubject(domain string, entries []*commonv3.RateLimitDescriptor_Entry, r *rule) string {
	var b strings.Builder
	field := func(s string) {
		b.WriteString(strconv.Itoa(len(s)))
		b.WriteByte(':')
		b.WriteString(s)
	}
	field(r.tag)
	field(domain)
	for _, e := range entries {
		field(e.GetKey())
		field(e.GetValue())
	}
	return b.String()
}

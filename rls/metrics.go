package rls

import (
	"sync"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// ScopeName is the name of the Server's meter: the import path.
const ScopeName = "github.com/ratekit/ratelimit/rls"

// The Server's metrics. The limiters' own (ratelimit.decisions and the
// rest, per descriptor of the configuration) come from ratelimitotel when
// the Builder is given its Observer.
const (
	// MetricDescriptors counts the request descriptors answered, with
	// AttrDomain and AttrOutcome.
	MetricDescriptors = "rls.descriptors"
	// MetricReloads counts the configurations loaded and refused, with
	// AttrOutcome (loaded, refused).
	MetricReloads = "rls.config.reloads"
)

// Attribute keys.
const (
	// AttrDomain is the request's domain when the configuration has it,
	// and "_unknown" otherwise: a client cannot grow the metrics'
	// cardinality. Descriptor values are never attributes.
	AttrDomain  = attribute.Key("rls.domain")
	AttrOutcome = attribute.Key("rls.outcome")
)

// Values of AttrOutcome for MetricDescriptors.
const (
	OutcomeOK        = "ok"         // within its limit
	OutcomeOverLimit = "over_limit" // answered OVER_LIMIT
	OutcomeShadow    = "shadow"     // over its limit, answered OK: shadow_mode
	OutcomeDegraded  = "degraded"   // the failure policy decided: Redis failed (OK or OVER_LIMIT as it decided)
	OutcomeUnlimited = "unlimited"  // an unlimited descriptor
	OutcomeNoMatch   = "no_match"   // no rate limit applies
)

// WithMeterProvider sets the MeterProvider of the Server's metrics
// (default: the otel global one).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(s *Server) {
		if mp != nil {
			s.mp = mp
		}
	}
}

type instruments struct {
	descriptors metric.Int64Counter
	reloads     metric.Int64Counter
	attrs       sync.Map // attrKey -> metric.MeasurementOption
}

type attrKey struct{ domain, outcome string }

func newInstruments(mp metric.MeterProvider) *instruments {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter(ScopeName)
	in := &instruments{}
	// The API never returns a nil instrument: on error it is a no-op one.
	in.descriptors, _ = m.Int64Counter(MetricDescriptors, metric.WithUnit("{descriptor}"),
		metric.WithDescription("Request descriptors answered, by domain and outcome."))
	in.reloads, _ = m.Int64Counter(MetricReloads, metric.WithUnit("{reload}"),
		metric.WithDescription("Configurations loaded or refused."))
	return in
}

func (in *instruments) attrsOf(domain, outcome string) metric.MeasurementOption {
	k := attrKey{domain, outcome}
	if o, ok := in.attrs.Load(k); ok {
		return o.(metric.MeasurementOption)
	}
	o := metric.WithAttributeSet(attribute.NewSet(AttrDomain.String(domain), AttrOutcome.String(outcome)))
	in.attrs.Store(k, o)
	return o
}

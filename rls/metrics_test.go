package rls_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/ratekit/ratelimit/rls"
)

// TestMetrics checks rls.descriptors by domain and outcome, shadow
// denials apart, and an unknown domain folded into "_unknown".
func TestMetrics(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	e := start(t, shared(t), map[string]string{"m.yaml": `
domain: m
descriptors:
  - key: enforced
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: shadowed
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: free
    rate_limit: {unlimited: true}
`}, rls.WithMeterProvider(mp))
	for range 2 {
		e.ask(t, "m", 0, desc("enforced", "a"), desc("shadowed", "a"), desc("free", "a"), desc("none", "a"))
	}
	e.ask(t, "not-configured", 0, desc("k", "v"))
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[[2]string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != rls.MetricDescriptors {
				continue
			}
			for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
				d, _ := p.Attributes.Value(attribute.Key(rls.AttrDomain))
				o, _ := p.Attributes.Value(attribute.Key(rls.AttrOutcome))
				got[[2]string{d.AsString(), o.AsString()}] += p.Value
			}
		}
	}
	want := map[[2]string]int64{
		{"m", rls.OutcomeOK}:             2,
		{"m", rls.OutcomeOverLimit}:      1,
		{"m", rls.OutcomeShadow}:         1,
		{"m", rls.OutcomeUnlimited}:      2,
		{"m", rls.OutcomeNoMatch}:        2,
		{"_unknown", rls.OutcomeNoMatch}: 1,
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s %v: got %d, want %d", rls.MetricDescriptors, k, got[k], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got series %v, want %v", got, want)
	}
}

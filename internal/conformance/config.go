package conformance

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ratekit/ratelimit/strategy"
)

// ConfigCase is an invalid configuration: both constructors must reject it
// with an error naming Field.
type ConfigCase struct {
	Name  string
	Lim   strategy.Limit
	Opts  []strategy.Option
	Field string
}

// InvalidConfig checks, each case a subtest, that newRedis (on miniredis)
// and newLocal reject the invalid configurations every strategy shares and
// then extra, with an error naming the field at fault; and that newRedis
// rejects a nil client with strategy.ErrInvalidOption.
func InvalidConfig[R, L strategy.Strategy](t *testing.T, newRedis NewRedis[R], newLocal NewLocal[L], extra ...ConfigCase) {
	t.Helper()
	_, rdb := Miniredis(t)
	cases := []ConfigCase{
		{"negative limit", strategy.Limit{Limit: -1, Window: time.Second}, nil, "Limit"},
		{"zero window", strategy.Limit{Limit: 1}, nil, "Window"},
		{"negative window", strategy.Limit{Limit: 1, Window: -time.Second}, nil, "Window"},
		{"sub-millisecond window", strategy.Limit{Limit: 1, Window: 1500 * time.Microsecond}, nil, "Window"},
		{"negative burst", strategy.Limit{Limit: 1, Window: time.Second, Burst: -1}, nil, "Burst"},
		{"braces in prefix", strategy.PerSecond(1), []strategy.Option{strategy.WithPrefix("a{b}")}, "prefix"},
	}
	for _, c := range append(cases, extra...) {
		t.Run(c.Name, func(t *testing.T) {
			if _, err := newRedis(rdb, c.Lim, c.Opts...); err == nil || !strings.Contains(err.Error(), c.Field) {
				t.Errorf("New: err = %v, want an error naming %s", err, c.Field)
			}
			if _, err := newLocal(c.Lim, c.Opts...); err == nil || !strings.Contains(err.Error(), c.Field) {
				t.Errorf("NewLocal: err = %v, want an error naming %s", err, c.Field)
			}
		})
	}
	if _, err := newRedis(nil, strategy.PerSecond(1)); !errors.Is(err, strategy.ErrInvalidOption) {
		t.Errorf("New(nil client): err = %v, want ErrInvalidOption", err)
	}
}

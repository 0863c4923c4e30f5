package strategy_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ratekit/ratelimit/strategy"
)

func TestValidateOverride(t *testing.T) {
	base := strategy.PerMinute(10)
	for _, c := range []struct {
		name  string
		lim   strategy.Limit
		field string // "" when valid
	}{
		{"same window", strategy.Limit{Limit: 100, Window: time.Minute, Burst: 5}, ""},
		{"zero units", strategy.PerMinute(0), ""},
		{"another window", strategy.PerSecond(10), "Window"},
		{"negative limit", strategy.Limit{Limit: -1, Window: time.Minute}, "Limit"},
		{"negative burst", strategy.Limit{Limit: 1, Window: time.Minute, Burst: -1}, "Burst"},
	} {
		err := strategy.ValidateOverride(base, c.lim)
		switch {
		case c.field == "" && err != nil:
			t.Errorf("%s: %v, want nil", c.name, err)
		case c.field != "" && (!errors.Is(err, strategy.ErrInvalidLimit) || !strings.Contains(err.Error(), c.field)):
			t.Errorf("%s: %v, want ErrInvalidLimit naming %s", c.name, err, c.field)
		case c.field != "" && strings.Count(err.Error(), "ratelimit: ") != 1:
			t.Errorf("%s: %q, want one package prefix", c.name, err)
		}
	}
}

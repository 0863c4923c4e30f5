package exact

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ratekit/ratelimit/strategy"
)

func TestCarry(t *testing.T) {
	// 10/s: wp 100 (a unit is 100 scaled units); 3/s: wp 1000; 1000/s: wp 1
	s10, _ := Of(strategy.PerSecond(10))
	s3, _ := Of(strategy.PerSecond(3))
	s1000, _ := Of(strategy.PerSecond(1000))
	for _, c := range []struct {
		name  string
		d, wo int64
		to    Scale
		want  int64
	}{
		{"nothing used", 0, 100, s3, 0},
		{"2.5 units of 10/s to 3/s: 2.5 units", 250, 100, s3, 2500},
		{"2.5 units of 10/s to 1000/s: rounded up to 3", 250, 100, s1000, 3},
		{"2.5 units of 10/s to 1000/s, capacity 1000: 3", 250, 100, s1000, 3},
		{"9 units of 10/s to 3/s: capped at an empty bucket", 900, 100, s3, 3000},
		{"3 units of 3/s to 10/s: 3 units", 3000, 1000, s10, 300},
		{"1/1000 unit of 3/s to 10/s: rounded up to 1/100", 1, 1000, s10, 1},
	} {
		if got := Carry(c.d, c.wo, c.to, 1000); got != c.want {
			t.Errorf("%s: Carry = %d, want %d", c.name, got, c.want)
		}
	}
}

func TestCheckCarry(t *testing.T) {
	if err := CheckCarry(strategy.Limit{Limit: 1 << 40, Window: time.Hour}); !errors.Is(err, strategy.ErrInvalidLimit) || !strings.Contains(err.Error(), "Limit") {
		t.Errorf("2^40 per hour: %v, want ErrInvalidLimit naming Limit", err)
	}
	if err := CheckCarry(strategy.Limit{Limit: 1, Window: time.Hour, Burst: 1 << 40}); err == nil || !strings.Contains(err.Error(), "Burst") {
		t.Errorf("burst 2^40 per hour: %v, want an error naming Burst", err)
	}
	if err := CheckCarry(strategy.Limit{Limit: 1 << 20, Window: time.Hour}); err != nil {
		t.Errorf("2^20 per hour: %v, want nil", err)
	}
}

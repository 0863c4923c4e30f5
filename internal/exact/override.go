package exact

import (
	"fmt"

	"github.com/ratekit/ratelimit/internal/fielderr"
	"github.com/ratekit/ratelimit/strategy"
)

// MaxCarried bounds (capacity + 1) × Window in ms for a token bucket or
// GCRA limit that takes part in per-call limits: Carry's products then stay
// integers below 2^53, exact in Lua's float64 numbers.
const MaxCarried = 1 << 53

// CheckCarry reports whether lim can take part in per-call limits (see
// MaxCarried). The error wraps strategy.ErrInvalidLimit and names the
// field. It does not allocate when lim fits.
func CheckCarry(lim strategy.Limit) error {
	w := lim.Window.Milliseconds()
	if c := lim.Capacity(); c >= MaxCarried/w-1 {
		field := "Limit"
		if lim.Burst > 0 {
			field = "Burst"
		}
		return fielderr.New(strategy.ErrInvalidLimit, "", field, func(name func(string) string) string {
			return fmt.Sprintf("per-call limits need (%s + 1) × %s in ms < 2^53, got (%d + 1) × %d", name(field), name("Window"), c, w)
		})
	}
	return nil
}

// Carry converts the units a subject used, d scaled units of a scale whose
// unit of the limit is wo scaled units, to the scale s of another limit
// with the same window of windowMs ms: ⌈d × (windowMs/wo) / (windowMs/s.WP)⌉
// (the units used, rounded up to s's scaled unit), at most s.Full (an empty
// bucket). Both limits must pass CheckCarry. The scripts compute the same
// in float64 (see tokenbucket.lua): exact, since d × windowMs/wo is below
// (s.Capacity + 1) × windowMs when it is computed.
func Carry(d, wo int64, s Scale, windowMs int64) int64 {
	switch {
	case d <= 0:
		return 0
	case d/wo >= s.Capacity:
		return s.Full
	}
	x, g := d*(windowMs/wo), windowMs/s.WP
	return min((x+g-1)/g, s.Full)
}

package httplimit

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/strategy"
)

// maxSFInteger is the largest structured-field Integer (15 digits).
const maxSFInteger = 999_999_999_999_999

// Fields formats the rate-limit fields of
// draft-ietf-httpapi-ratelimit-headers-11 for the decisions of one policy:
// what the middleware sends as headers, and what package grpclimit sends as
// response metadata, so that both say the same. It is safe for concurrent
// use.
type Fields struct {
	name string // the policy's name as a structured-field String
	cfg  ratelimit.Config
}

// NewFields returns the Fields of the policy configured by cfg, named
// cfg.Name ("default" when empty). It fails when the name is not printable
// ASCII, which a header value cannot carry.
func NewFields(cfg ratelimit.Config) (*Fields, error) {
	name := cfg.Name
	if name == "" {
		name = "default"
	}
	sf, err := sfString(name)
	if err != nil {
		return nil, fmt.Errorf("httplimit: Config.Name %q cannot be a header value: %w", name, err)
	}
	return &Fields{name: sf, cfg: cfg}, nil
}

// values returns q and w of the policy field, and r and t of the
// RateLimit field (meaningless when res is degraded) for res.
func (f *Fields) values(res ratelimit.Result) (q, w, r, t int64) {
	q = f.Capacity(res)
	win := f.cfg.Window
	if f.cfg.Limit > 0 && q != f.cfg.Limit {
		// a burst: q units are granted over Window x q / Limit
		win = time.Duration(math.Ceil(float64(f.cfg.Window) * float64(q) / float64(f.cfg.Limit)))
	}
	w = max(ceilSeconds(win), 1)
	r = min(max(res.Remaining, 0), maxSFInteger)
	t = ceilSeconds(res.ResetAfter)
	if s, ok := f.RetryAfter(res); ok {
		t = s // draft-11 section 6: the window ends no later than Retry-After
	}
	return q, w, r, t
}

// Capacity returns q, the capacity res reports: the capacity that applied,
// or the policy's Limit for a decision without one and for FailLocal's
// (whose Limit is the process's local share).
func (f *Fields) Capacity(res ratelimit.Result) int64 {
	q := res.Limit
	if q <= 0 || res.Degraded && f.cfg.OnFailure == ratelimit.FailLocal {
		q = f.cfg.Limit
	}
	return min(max(q, 0), maxSFInteger)
}

// Policy returns the RateLimit-Policy value for res: the policy's name, q
// (the capacity that applied, or the policy's Limit for a decision without
// one) and w (the seconds over which q units are granted), e.g.
// "login";q=5;w=60.
func (f *Fields) Policy(res ratelimit.Result) string {
	q, w, _, _ := f.values(res)
	return f.name + ";q=" + strconv.FormatInt(q, 10) + ";w=" + strconv.FormatInt(w, 10)
}

// RateLimit returns the RateLimit value for res: the policy's name, r (the
// units remaining) and t (whole seconds, rounded up, until the subject is
// back to full capacity; on a denial that can pass later, Retry-After, as
// draft-11 section 6 asks), e.g. "login";r=0;t=17. It is "" for a degraded
// decision, which knows neither.
func (f *Fields) RateLimit(res ratelimit.Result) string {
	if res.Degraded {
		return ""
	}
	_, _, r, t := f.values(res)
	return f.name + ";r=" + strconv.FormatInt(r, 10) + ";t=" + strconv.FormatInt(t, 10)
}

// RetryAfter returns the Retry-After value of a denial that can pass later:
// RetryAfter in whole seconds, rounded up, at least 1; false for an allowed
// request and for one that can never pass.
func (f *Fields) RetryAfter(res ratelimit.Result) (int64, bool) {
	if res.Allowed || res.RetryAfter == strategy.Never {
		return 0, false
	}
	return max(ceilSeconds(res.RetryAfter), 1), true
}

// ceilSeconds returns d in whole seconds, rounded up, within [0, maxSFInteger].
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return min(s, maxSFInteger)
}

// sfString serializes s as a structured-field String (RFC 9651, 4.1.6):
// printable ASCII between double quotes, with '"' and '\' escaped.
func sfString(s string) (string, error) {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e {
			return "", fmt.Errorf("byte %#x at %d is not printable ASCII", c, i)
		}
		if c == '"' || c == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	b.WriteByte('"')
	return b.String(), nil
}

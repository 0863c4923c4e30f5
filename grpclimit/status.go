package grpclimit

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/ratekit/ratelimit"
)

// The response metadata keys, draft-ietf-httpapi-ratelimit-headers-11's
// field names in gRPC's lowercase.
const (
	MetadataPolicy    = "ratelimit-policy"
	MetadataRateLimit = "ratelimit"
)

// maxSFInteger is the largest structured-field Integer (15 digits).
const maxSFInteger = 999_999_999_999_999

// capacity is q: the capacity the decision reports, or the policy's Limit
// when the decision has none or is FailLocal's (whose Limit is the local
// share), as httplimit says it.
func (p *policy) capacity(res ratelimit.Result) int64 {
	q := res.Limit
	if q <= 0 || res.Degraded && p.cfg.OnFailure == ratelimit.FailLocal {
		q = p.cfg.Limit
	}
	return min(max(q, 0), maxSFInteger)
}

// metadata returns the ratelimit-policy and (unless degraded) ratelimit
// values of res, exactly as httplimit's RateLimit-Policy and RateLimit.
func (p *policy) metadata(res ratelimit.Result) metadata.MD {
	q := p.capacity(res)
	w := p.cfg.Window
	if p.cfg.Limit > 0 && q != p.cfg.Limit {
		// a burst: q units are granted over Window x q / Limit
		w = time.Duration(math.Ceil(float64(p.cfg.Window) * float64(q) / float64(p.cfg.Limit)))
	}
	md := metadata.MD{MetadataPolicy: {p.sf + ";q=" + strconv.FormatInt(q, 10) + ";w=" + strconv.FormatInt(max(ceilSeconds(w), 1), 10)}}
	if !res.Degraded {
		r := min(max(res.Remaining, 0), maxSFInteger)
		md[MetadataRateLimit] = []string{p.sf + ";r=" + strconv.FormatInt(r, 10) + ";t=" + strconv.FormatInt(ceilSeconds(res.ResetAfter), 10)}
	}
	return md
}

// denial returns the status error of a denied decision.
func (p *policy) denial(res ratelimit.Result) error {
	if res.Degraded && p.cfg.OnFailure == ratelimit.FailClosed && res.RetryAfter != ratelimit.Never {
		// Redis is down and the policy refuses: no quota was exceeded.
		st := status.New(codes.Unavailable, fmt.Sprintf("grpclimit: rate limiter of policy %q unavailable; retry after %s", p.name, retryText(res.RetryAfter)))
		return withDetails(st, &errdetails.RetryInfo{RetryDelay: durationpb.New(res.RetryAfter)})
	}
	q := p.capacity(res)
	if res.RetryAfter == ratelimit.Never {
		msg := fmt.Sprintf("grpclimit: the call costs more than the capacity %d of policy %q", q, p.name)
		return withDetails(status.New(codes.ResourceExhausted, msg), p.quotaFailure(q, "the call costs more than the capacity"))
	}
	msg := fmt.Sprintf("grpclimit: rate limit of policy %q exceeded; retry after %s", p.name, retryText(res.RetryAfter))
	return withDetails(status.New(codes.ResourceExhausted, msg),
		&errdetails.RetryInfo{RetryDelay: durationpb.New(res.RetryAfter)},
		p.quotaFailure(q, "rate limit exceeded"))
}

func (p *policy) quotaFailure(q int64, what string) *errdetails.QuotaFailure {
	return &errdetails.QuotaFailure{Violations: []*errdetails.QuotaFailure_Violation{{
		Subject:     "policy:" + p.name,
		Description: fmt.Sprintf("%s: policy %q allows %d per %s", what, p.name, p.cfg.Limit, p.cfg.Window),
		QuotaId:     p.name,
		QuotaValue:  q,
	}}}
}

// withDetails returns st with the details attached, or st alone in the
// impossible case that they cannot be marshaled.
func withDetails(st *status.Status, details ...protoadapt.MessageV1) error {
	if d, err := st.WithDetails(details...); err == nil {
		return d.Err()
	}
	return st.Err()
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

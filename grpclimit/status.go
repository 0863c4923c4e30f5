package grpclimit

import (
	"fmt"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/strategy"
)

// The response metadata keys, draft-ietf-httpapi-ratelimit-headers-11's
// field names in gRPC's lowercase.
const (
	MetadataPolicy    = "ratelimit-policy"
	MetadataRateLimit = "ratelimit"
)

// metadata returns the ratelimit-policy and (unless degraded) ratelimit
// values of res, exactly as httplimit's RateLimit-Policy and RateLimit.
func (p *policy) metadata(res ratelimit.Result) metadata.MD {
	md := metadata.MD{MetadataPolicy: {p.fields.Policy(res)}}
	if v := p.fields.RateLimit(res); v != "" {
		md[MetadataRateLimit] = []string{v}
	}
	return md
}

// denial returns the status error of a denied decision.
func (p *policy) denial(res ratelimit.Result) error {
	if res.Degraded && p.cfg.OnFailure == ratelimit.FailClosed && res.RetryAfter != strategy.Never {
		// Redis is down and the policy refuses: no quota was exceeded.
		st := status.New(codes.Unavailable, fmt.Sprintf("grpclimit: rate limiter of policy %q unavailable; retry after %s", p.name, retryText(res.RetryAfter)))
		return withDetails(st, &errdetails.RetryInfo{RetryDelay: durationpb.New(res.RetryAfter)})
	}
	q := p.fields.Capacity(res)
	if res.RetryAfter == strategy.Never {
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

package ratelimit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/internal/quote"
	"github.com/ratekit/ratelimit/multilimit"
	"github.com/ratekit/ratelimit/strategy"
)

// Policies names the limiters of a service, one per endpoint: at most
// 1,024, each name 1 to 64 ASCII letters, digits, '_', '-' or '.'. A
// Config's Name must be empty or its policy's. In JSON, a policy is an
// object of Config's fields under their JSON names (see Config), durations
// as Go duration strings:
//
//	{"login":  {"algorithm": "sliding_log", "limit": 5, "window": "1m", "on_failure": "closed"},
//	 "search": {"algorithm": "token_bucket", "limit": 100, "window": "1s", "burst": 200,
//	            "tiers": {"pro": {"limit": 1000, "burst": 2000}}}}
type Policies map[string]Config

// Bounds of a policy document. A document is configuration, but it may come
// from a place an outsider can write to; these keep reading it cheap.
const (
	maxPolicyName  = 64
	maxPolicyBytes = 1 << 20 // about 10,000 policies of ordinary size
	maxPolicies    = 1024
)

// validPolicyName reports whether name is 1 to maxPolicyName bytes of
// [A-Za-z0-9_.-].
func validPolicyName(name string) error {
	if problem := policyNameProblem(name); problem != "" {
		return policyFault(name, strategy.ErrInvalidOption, problem)
	}
	return nil
}

// policyNameProblem returns what is wrong with name as a policy (or tier)
// name, or "".
func policyNameProblem(name string) string {
	if name == "" || len(name) > maxPolicyName {
		return fmt.Sprintf("a policy name must be 1 to %d bytes, got %d", maxPolicyName, len(name))
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.') {
			return fmt.Sprintf("a policy name may hold only ASCII letters, digits, '_', '-' and '.', got %s", quote.Value(name))
		}
	}
	return ""
}

// policyFault returns the *FieldError of policy as a whole: msg, after
// the sentinel's message.
func policyFault(policy string, sentinel error, msg string) *FieldError {
	return &FieldError{Policy: policy, inSet: true, Err: fmt.Errorf("%w: %s", sentinel, msg), sentinel: sentinel,
		text: func(func(string) string) string { return msg }}
}

// names returns the policy names, sorted.
func (p Policies) names() []string {
	names := make([]string, 0, len(p))
	for n := range p {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// scoped returns the Config a Set builds for policy name: Name set, and the
// key namespace Prefix (default strategy.DefaultPrefix) + name + ":". A
// candidate's Prefix is scoped by the same rule, its default being the
// policy's Prefix: Candidate.Prefix (default Prefix) + name + ":". So a
// candidate stays within its own policy's names, and a Config equal to the
// candidate's, promoted in Update, is scoped to the candidate's keys.
func scoped(name string, c Config) (Config, error) {
	if err := validPolicyName(name); err != nil {
		return c, err
	}
	if c.Name != "" && c.Name != name {
		fe := policyFault(name, strategy.ErrInvalidOption, fmt.Sprintf("Name must be empty or %s, got %s", quote.Value(name), quote.Value(c.Name)))
		fe.Field = "Name"
		return c, fe
	}
	c.Name = name
	base := c.Prefix
	if base == "" {
		base = strategy.DefaultPrefix
	}
	c.Prefix = base + name + ":"
	if c.Candidate != nil {
		cand := *c.Candidate // the caller's Config is not changed
		if cand.Prefix == "" {
			cand.Prefix = base
		}
		cand.Prefix += name + ":"
		c.Candidate = &cand
	}
	return c, nil
}

// scopedAll returns the scoped Configs in name order and checks that no two
// policies share a key namespace (possible only with per-policy prefixes,
// e.g. "rl:a" + "b" and "rl:" + "ab"), their candidates' included: a
// candidate may share only its own policy's namespace (with another
// algorithm, see Config.candidate).
func (p Policies) scopedAll() ([]Config, error) {
	if len(p) > maxPolicies {
		return nil, fmt.Errorf("%w: want at most %d policies, got %d", strategy.ErrInvalidOption, maxPolicies, len(p))
	}
	out := make([]Config, 0, len(p))
	seen := make(map[string]string, len(p))
	shared := func(name, goPath, jsonPath, ns, other string) error {
		fe := policyFault(name, strategy.ErrInvalidOption, fmt.Sprintf("key namespace %s is also policy %s's", quote.Value(ns), quote.Value(other)))
		fe.Field, fe.JSON = goPath, jsonPath
		return fe
	}
	for _, name := range p.names() {
		c, err := scoped(name, p[name])
		if err != nil {
			return nil, err
		}
		if other, ok := seen[c.Prefix]; ok {
			return nil, shared(name, "Prefix", "prefix", c.Prefix, other)
		}
		seen[c.Prefix] = name
		if c.Candidate != nil {
			ns := c.Candidate.Prefix
			if other, ok := seen[ns]; ok && other != name {
				return nil, shared(name, "Candidate.Prefix", "candidate.prefix", ns, other)
			}
			seen[ns] = name
		}
		out = append(out, c)
	}
	return out, nil
}

// validate reports the first invalid policy of p, in name order: a bad
// name, or a Config that New would refuse.
func (p Policies) validate() error {
	cfgs, err := p.scopedAll()
	if err != nil {
		return err
	}
	for _, c := range cfgs {
		// an in-process Limiter checks exactly what New checks, and holds
		// no resources
		if _, err := New(nil, c); err != nil {
			return ofPolicy(c.Name, err)
		}
	}
	return nil
}

// Set holds one Limiter per policy; it is safe for concurrent use.
type Set struct {
	state atomic.Pointer[setState]
	mk    func(Config, ...Option) (*Limiter, error) // New, with the Set's client and options
	local bool                                      // no client: state lives in the strategies
	mu    sync.Mutex                                // serializes Update
}

// NewSet builds a Limiter for every policy, as New does (in this process
// when rdb is nil), with opts, which Update uses too. Each Limiter's Config
// has Name set and Prefix scoped to its policy: Prefix (default "rl:") +
// name + ":", a candidate's likewise, so no two policies share keys. It
// fails with a *FieldError naming the policy and the field.
func NewSet(rdb redis.Scripter, p Policies, opts ...Option) (*Set, error) {
	shared := withEvictionCheck(newEvictionCheck(rdb)) // asked once for the Set
	s := &Set{local: rdb == nil, mk: func(c Config, extra ...Option) (*Limiter, error) {
		return New(rdb, c, append(append(slices.Clone(opts), shared), extra...)...)
	}}
	st, err := s.build(p, nil)
	if err != nil {
		return nil, err
	}
	s.state.Store(st)
	return s, nil
}

// Get returns the Limiter of the named policy, or an error wrapping
// strategy.ErrInvalidOption that lists the policies. It does not lock:
// call it per decision, so that a reload reaches the caller.
func (s *Set) Get(name string) (*Limiter, error) {
	st := s.state.Load()
	if l, ok := st.limiters[name]; ok {
		return l, nil
	}
	quoted := make([]string, len(st.names))
	for i, n := range st.names {
		quoted[i] = quote.Value(n)
	}
	return nil, fmt.Errorf("%w: no policy %s; the policies are %s", strategy.ErrInvalidOption, quote.Value(name), strings.Join(quoted, ", "))
}

// UnmarshalJSON decodes and validates a policy document of at most 1 MiB;
// an error in it is a *FieldError naming the policy and the JSON path.
func (p *Policies) UnmarshalJSON(data []byte) error {
	if bytes.Equal(bytes.TrimSpace(data), []byte("null")) {
		*p = nil
		return nil
	}
	if len(data) > maxPolicyBytes {
		return fmt.Errorf("%w: policies: the document must be at most %d bytes, got %d",
			strategy.ErrInvalidOption, maxPolicyBytes, len(data))
	}
	if err := checkDocument(data); err != nil {
		return err
	}
	var docs map[string]policyDoc
	if err := json.Unmarshal(data, &docs); err != nil { // checked: not expected
		return fmt.Errorf("%w: policies: %w", strategy.ErrInvalidOption, err)
	}
	out := make(Policies, len(docs))
	for name, d := range docs {
		out[name] = d.config()
	}
	if err := out.validate(); err != nil {
		if fe := asFieldError(err); fe != nil {
			fe.json = true // the document's reader knows its JSON names
		}
		return err
	}
	*p = out
	return nil
}

// MarshalJSON encodes the policies as UnmarshalJSON reads them.
func (p Policies) MarshalJSON() ([]byte, error) {
	docs := make(map[string]*policyDoc, len(p))
	for name, c := range p {
		docs[name] = docOf(c)
	}
	return json.Marshal(docs)
}

// policyDoc is one policy of a document, encoded and decoded by
// encoding/json: the struct tags are the JSON names of Config's fields.
type policyDoc struct {
	Algorithm   string             `json:"algorithm"`
	Limit       *int64             `json:"limit,omitempty"`
	Window      duration           `json:"window,omitzero"`
	Burst       int64              `json:"burst,omitempty"`
	Shards      int                `json:"shards,omitempty"`
	Lease       bool               `json:"lease,omitempty"`
	Prefix      string             `json:"prefix,omitempty"`
	Rules       []ruleDoc          `json:"rules,omitempty"`
	Mode        string             `json:"mode,omitempty"`
	Tiers       map[string]tierDoc `json:"tiers,omitempty"`
	OnFailure   string             `json:"on_failure,omitempty"`
	LocalShare  float64            `json:"local_share,omitempty"`
	Timeout     duration           `json:"timeout,omitzero"`
	MaxSubjects int                `json:"max_subjects,omitempty"`
	Candidate   *policyDoc         `json:"candidate,omitempty"`

	Replicas       int      `json:"replicas,omitempty"`
	ReplicaTimeout duration `json:"replica_timeout,omitzero"`
}

// ruleDoc is one rule of "rules".
type ruleDoc struct {
	Algorithm string   `json:"algorithm"`
	Limit     int64    `json:"limit"`
	Window    duration `json:"window"`
}

// tierDoc is one tier of "tiers".
type tierDoc struct {
	Limit int64 `json:"limit"`
	Burst int64 `json:"burst,omitempty"`
}

// duration is a time.Duration written as a Go duration string ("1m30s").
type duration time.Duration

func (d duration) IsZero() bool { return d == 0 }

func (d duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

func (d *duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	*d = duration(v)
	return err
}

// docOf returns the document form of c.
func docOf(c Config) *policyDoc {
	d := &policyDoc{Algorithm: string(c.Algorithm), Limit: &c.Limit, Window: duration(c.Window),
		Burst: c.Burst, Shards: c.Shards, Lease: c.Lease, Prefix: c.Prefix, Mode: c.Mode,
		OnFailure: string(c.OnFailure), LocalShare: c.LocalShare, Timeout: duration(c.Timeout),
		MaxSubjects: c.MaxSubjects, Replicas: c.Replicas, ReplicaTimeout: duration(c.ReplicaTimeout)}
	if c.Algorithm == Multi {
		d.Limit = nil
	}
	for _, r := range c.Rules {
		d.Rules = append(d.Rules, ruleDoc{Algorithm: string(r.Algorithm), Limit: r.Limit.Limit, Window: duration(r.Limit.Window)})
	}
	if len(c.Tiers) > 0 {
		d.Tiers = make(map[string]tierDoc, len(c.Tiers))
		for name, t := range c.Tiers {
			d.Tiers[name] = tierDoc{Limit: t.Limit, Burst: t.Burst}
		}
	}
	if c.Candidate != nil {
		d.Candidate = docOf(*c.Candidate)
	}
	return d
}

// config returns the Config of d.
func (d *policyDoc) config() Config {
	c := Config{Algorithm: strategy.Algorithm(d.Algorithm), Window: time.Duration(d.Window),
		Burst: d.Burst, Shards: d.Shards, Lease: d.Lease, Prefix: d.Prefix, Mode: d.Mode,
		OnFailure: FailurePolicy(d.OnFailure), LocalShare: d.LocalShare, Timeout: time.Duration(d.Timeout),
		MaxSubjects: d.MaxSubjects, Replicas: d.Replicas, ReplicaTimeout: time.Duration(d.ReplicaTimeout)}
	if d.Limit != nil {
		c.Limit = *d.Limit
	}
	for _, r := range d.Rules {
		c.Rules = append(c.Rules, multilimit.Rule{Algorithm: strategy.Algorithm(r.Algorithm),
			Limit: strategy.Limit{Limit: r.Limit, Window: time.Duration(r.Window)}})
	}
	if d.Tiers != nil {
		c.Tiers = make(map[string]Limit, len(d.Tiers))
		for name, t := range d.Tiers {
			c.Tiers[name] = Limit{Limit: t.Limit, Burst: t.Burst}
		}
	}
	if d.Candidate != nil {
		cand := d.Candidate.config()
		c.Candidate = &cand
	}
	return c
}

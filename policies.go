package ratelimit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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

// Policies names the limiters of a service, one per endpoint or kind of
// request: "login" -> sliding_log 5/1m, "search" -> token_bucket 100/1s
// burst 200. Swapping an endpoint's algorithm is a change to its Config.
//
// A policy name is 1 to 64 ASCII letters, digits, '_', '-' or '.', so that it
// can appear as is in Redis keys, HTTP headers and metric attributes. Each
// Config's Name must be empty or equal to its policy name; NewSet sets it.
//
// In JSON (see ParsePolicies) Policies is an object of policy names to
// objects with the fields of Config in lowercase: "algorithm", "limit" and
// "window" (required), "burst", "shards", "prefix", "rules" (with
// "algorithm": "multi": an array of {"algorithm", "limit", "window"}),
// "candidate" (a policy object of the algorithm fields: see
// Config.Candidate), "mode" ("enforce" or "shadow"), "tiers" (an object of
// tier names to {"limit": n, "burst": n}),
// "on_failure" ("open", "closed" or "local"), "local_share" and "timeout".
// Durations are Go duration strings such as "1m", "1h30m" or "250ms":
//
//	{
//	  "login":  {"algorithm": "sliding_log", "limit": 5, "window": "1m", "on_failure": "closed"},
//	  "search": {"algorithm": "token_bucket", "limit": 100, "window": "1s", "burst": 200,
//	             "tiers": {"pro": {"limit": 1000, "burst": 2000}}},
//	  "export": {"algorithm": "fixed_window", "limit": 10, "window": "1h", "mode": "shadow"},
//	  "upload": {"algorithm": "sliding_counter", "limit": 1000, "window": "1h"}
//	}
type Policies map[string]Config

// PolicyError reports an invalid policy: which one, and what is wrong with
// it. It wraps the underlying error (strategy.ErrInvalidLimit,
// strategy.ErrInvalidOption ...), so errors.Is works, and errors.As finds
// the *FieldError of an invalid Config field.
type PolicyError struct {
	Policy string // the policy's name
	Field  string // the JSON path of the field at fault ("window", "tiers.pro.limit"), or "" when the error is not a field's
	Err    error

	json bool // the policy was read from JSON: the message names JSON fields
}

// Error returns e.g. `ratelimit: policy "login": field "window": invalid
// limit: want a duration string like "1m" or "1h30m", got 60`. Names and
// values longer than 32 bytes are quoted up to their 32nd byte, then "...".
func (e *PolicyError) Error() string {
	msg := e.Err.Error()
	if fe := (*FieldError)(nil); e.json && errors.As(e.Err, &fe) {
		msg = fe.jsonMessage()
	}
	// one package prefix, this message's
	msg = strings.TrimPrefix(msg, "ratelimit: ")
	if e.Field != "" {
		return fmt.Sprintf("ratelimit: policy %s: field %s: %s", quote.Value(e.Policy), quote.Value(e.Field), msg)
	}
	return fmt.Sprintf("ratelimit: policy %s: %s", quote.Value(e.Policy), msg)
}

// Unwrap returns the underlying error.
func (e *PolicyError) Unwrap() error { return e.Err }

const maxPolicyName = 64

// Bounds of a policy document. A document is configuration, but it may come
// from a place an outsider can write to; these keep parsing it cheap.
const (
	// MaxPolicyBytes is the largest JSON document ParsePolicies (and
	// UnmarshalJSON) accepts: 1 MiB, about 10,000 policies of ordinary
	// size. Larger documents are refused before they are decoded.
	MaxPolicyBytes = 1 << 20
	// MaxPolicies is the most policies a Policies value may hold, in JSON
	// and in Go (Validate, NewSet, NewLocalSet): one Limiter per endpoint
	// or kind of request, so 1,024 is far above any real service.
	MaxPolicies = 1024
)

// validPolicyName reports whether name is 1 to maxPolicyName bytes of
// [A-Za-z0-9_.-].
func validPolicyName(name string) error {
	if problem := policyNameProblem(name); problem != "" {
		return fmt.Errorf("%w: %s", strategy.ErrInvalidOption, problem)
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

// Names returns the policy names, sorted.
func (p Policies) Names() []string {
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
		return c, &PolicyError{Policy: name, Err: err}
	}
	if c.Name != "" && c.Name != name {
		return c, &PolicyError{Policy: name, Err: fmt.Errorf("%w: Name must be empty or %s, got %s", strategy.ErrInvalidOption, quote.Value(name), quote.Value(c.Name))}
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

// Validate reports the first invalid policy, in name order, as a
// *PolicyError: a bad name, or a Config that New would refuse.
func (p Policies) Validate() error {
	_, err := p.scopedAll()
	if err != nil {
		return err
	}
	for _, name := range p.Names() {
		c, _ := scoped(name, p[name])
		// NewLocal checks exactly what New checks, and holds no resources.
		if _, err := NewLocal(c); err != nil {
			return policyError(name, err)
		}
	}
	return nil
}

// scopedAll returns the scoped Configs in name order and checks that no two
// policies share a key namespace (possible only with per-policy prefixes,
// e.g. "rl:a" + "b" and "rl:" + "ab"), their candidates' included: a
// candidate may share only its own policy's namespace (with another
// algorithm, see Config.candidate).
func (p Policies) scopedAll() ([]Config, error) {
	if len(p) > MaxPolicies {
		return nil, fmt.Errorf("%w: want at most %d policies (MaxPolicies), got %d", strategy.ErrInvalidOption, MaxPolicies, len(p))
	}
	out := make([]Config, 0, len(p))
	seen := make(map[string]string, len(p))
	for _, name := range p.Names() {
		c, err := scoped(name, p[name])
		if err != nil {
			return nil, err
		}
		if other, ok := seen[c.Prefix]; ok {
			return nil, &PolicyError{Policy: name, Field: "prefix",
				Err: fmt.Errorf("%w: key namespace %s is also policy %s's", strategy.ErrInvalidOption, quote.Value(c.Prefix), quote.Value(other))}
		}
		seen[c.Prefix] = name
		if c.Candidate != nil {
			ns := c.Candidate.Prefix
			if other, ok := seen[ns]; ok && other != name {
				return nil, &PolicyError{Policy: name, Field: "candidate.prefix",
					Err: fmt.Errorf("%w: key namespace %s is also policy %s's", strategy.ErrInvalidOption, quote.Value(ns), quote.Value(other))}
			}
			seen[ns] = name
		}
		out = append(out, c)
	}
	return out, nil
}

// Set holds one Limiter per policy. It is safe for concurrent use; Update
// replaces its policies atomically (see Update).
type Set struct {
	state atomic.Pointer[setState]
	mk    func(Config, ...Option) (*Limiter, error) // New or NewLocal, with the Set's client and options
	mu    sync.Mutex                                // serializes Update
}

// NewSet builds a Limiter on Redis (through rdb, as New) for every policy.
// Each Limiter's Config has Name set to its policy's name and its own key
// namespace, Prefix + name + ":" (Prefix defaults to "rl:"), so two policies
// never share keys and policy "login" keeps its keys under "rl:login:". A
// policy's candidate (Config.Candidate) is scoped by the same rule,
// Candidate.Prefix + name + ":" (Candidate.Prefix defaults to Prefix), so
// a candidate's keys are its own policy's too: two policies' candidates
// never share keys, and promoting a candidate with Update, to a Config
// equal to the candidate's (its Prefix included), keeps the state it
// built. Namespaces that would meet anyway ("rl:a" + "b" and "rl:" +
// "ab") are refused. opts
// apply to every Limiter, and to those Update builds. It fails with a
// *PolicyError naming the policy and the field when one is invalid.
func NewSet(rdb redis.Scripter, p Policies, opts ...Option) (*Set, error) {
	if rdb == nil {
		return nil, fmt.Errorf("%w: redis client is nil (use NewLocalSet for in-process limiters)", strategy.ErrInvalidOption)
	}
	return newSet(p, func(c Config, extra ...Option) (*Limiter, error) {
		return New(rdb, c, append(slices.Clone(opts), extra...)...)
	})
}

// NewLocalSet is NewSet with in-process limiters (see NewLocal).
func NewLocalSet(p Policies, opts ...Option) (*Set, error) {
	return newSet(p, func(c Config, extra ...Option) (*Limiter, error) {
		return NewLocal(c, append(slices.Clone(opts), extra...)...)
	})
}

func newSet(p Policies, mk func(Config, ...Option) (*Limiter, error)) (*Set, error) {
	s := &Set{mk: mk}
	st, err := s.build(p, nil)
	if err != nil {
		return nil, err
	}
	s.state.Store(st)
	return s, nil
}

// Get returns the Limiter of the named policy, or an error wrapping
// strategy.ErrInvalidOption that lists the policies there are. It reads the
// policies in force (see Update) without locking: call it per decision
// rather than keeping the Limiter, so that a reload reaches the caller.
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

// Names returns the names of the policies in force, sorted.
func (s *Set) Names() []string { return slices.Clone(s.state.Load().names) }

// ParsePolicies decodes policies from JSON (the format is in the Policies
// doc) and validates them. Field names are lowercase and exact; an unknown
// or repeated field or policy, a value of the wrong type, an unknown
// algorithm or an out-of-range value is a *PolicyError that names the
// policy and the field.
func ParsePolicies(data []byte) (Policies, error) {
	var p Policies
	if err := p.UnmarshalJSON(data); err != nil {
		return nil, err
	}
	return p, nil
}

// UnmarshalJSON decodes and validates policies as ParsePolicies does, so a
// Policies can be a field of a larger JSON configuration. It replaces *p.
func (p *Policies) UnmarshalJSON(data []byte) error {
	if bytes.Equal(bytes.TrimSpace(data), []byte("null")) {
		*p = nil
		return nil
	}
	if len(data) > MaxPolicyBytes {
		return fmt.Errorf("%w: policies: the document must be at most %d bytes (MaxPolicyBytes), got %d",
			strategy.ErrInvalidOption, MaxPolicyBytes, len(data))
	}
	entries, err := objectEntries(data, MaxPolicies, "policies (MaxPolicies)")
	if err != nil {
		return fmt.Errorf("%w: policies: %w", strategy.ErrInvalidOption, err)
	}
	out := make(Policies, len(entries))
	for _, e := range entries {
		if _, dup := out[e.key]; dup {
			return &PolicyError{Policy: e.key, Err: fmt.Errorf("%w: the policy appears twice", strategy.ErrInvalidOption)}
		}
		c, err := decodePolicy(e.value)
		if err != nil {
			var pe *PolicyError
			if errors.As(err, &pe) {
				pe.Policy = e.key
				return pe
			}
			return &PolicyError{Policy: e.key, Err: err}
		}
		out[e.key] = c
	}
	if err := out.Validate(); err != nil {
		return jsonNamed(err)
	}
	*p = out
	return nil
}

// jsonNamed makes a validation error of a policy read from JSON name the
// JSON fields, not the Go ones: "on_failure must", not "OnFailure must".
func jsonNamed(err error) error {
	if pe := (*PolicyError)(nil); errors.As(err, &pe) {
		pe.json = true
	}
	return err
}

// MarshalJSON encodes the policies in the format UnmarshalJSON reads, with
// windows as Go duration strings ("1m0s"), omitting zero fields.
func (p Policies) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, name := range p.Names() {
		if i > 0 {
			b.WriteByte(',')
		}
		c := p[name]
		k, _ := json.Marshal(name)
		b.Write(k)
		b.WriteByte(':')
		pj := toJSON(c)
		v, err := json.Marshal(pj)
		if err != nil {
			return nil, err
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// toJSON returns the JSON form of c.
func toJSON(c Config) *policyJSON {
	pj := &policyJSON{
		Algorithm: string(c.Algorithm), Limit: &c.Limit, Window: c.Window.String(),
		Burst: c.Burst, Shards: c.Shards, Prefix: c.Prefix,
		OnFailure: string(c.OnFailure), LocalShare: c.LocalShare,
		Mode: string(c.Mode),
	}
	for _, r := range c.Rules {
		pj.Rules = append(pj.Rules, ruleJSON{Algorithm: string(r.Algorithm), Limit: r.Limit.Limit, Window: r.Limit.Window.String()})
	}
	if c.Algorithm == Multi {
		pj.Limit, pj.Window = nil, ""
	}
	if len(c.Tiers) > 0 {
		pj.Tiers = make(map[string]tierJSON, len(c.Tiers))
		for name, t := range c.Tiers {
			pj.Tiers[name] = tierJSON{Limit: t.Limit, Burst: t.Burst}
		}
	}
	if c.Timeout != 0 {
		pj.Timeout = c.Timeout.String()
	}
	if c.Candidate != nil {
		pj.Candidate = toJSON(*c.Candidate)
	}
	return pj
}

// policyJSON is the JSON form of one policy, for MarshalJSON.
type policyJSON struct {
	Algorithm  string              `json:"algorithm"`
	Limit      *int64              `json:"limit,omitempty"`
	Window     string              `json:"window,omitempty"`
	Burst      int64               `json:"burst,omitempty"`
	Shards     int                 `json:"shards,omitempty"`
	Prefix     string              `json:"prefix,omitempty"`
	Rules      []ruleJSON          `json:"rules,omitempty"`
	Mode       string              `json:"mode,omitempty"`
	Tiers      map[string]tierJSON `json:"tiers,omitempty"`
	OnFailure  string              `json:"on_failure,omitempty"`
	LocalShare float64             `json:"local_share,omitempty"`
	Timeout    string              `json:"timeout,omitempty"`
	Candidate  *policyJSON         `json:"candidate,omitempty"`
}

// ruleJSON is the JSON form of one rule.
type ruleJSON struct {
	Algorithm string `json:"algorithm"`
	Limit     int64  `json:"limit"`
	Window    string `json:"window"`
}

// tierJSON is the JSON form of one tier.
type tierJSON struct {
	Limit int64 `json:"limit"`
	Burst int64 `json:"burst,omitempty"`
}

// decodePolicy decodes one policy object, field by field, so that every
// error names its field.
func decodePolicy(data []byte) (Config, error) { return decodePolicyAt(data, 0) }

// decodePolicyAt is decodePolicy for a policy at depth (1: a candidate).
func decodePolicyAt(data []byte, depth int) (Config, error) {
	var c Config
	entries, err := objectEntries(data, maxPolicyFields, "fields")
	if err != nil {
		return c, fmt.Errorf("%w: %w", strategy.ErrInvalidOption, err)
	}
	for i, e := range entries {
		fieldErr := func(err error) error { return &PolicyError{Field: e.key, Err: err} }
		if slices.ContainsFunc(entries[:i], func(prev entry) bool { return prev.key == e.key }) {
			return c, fieldErr(fmt.Errorf("%w: the field appears twice", strategy.ErrInvalidOption))
		}
		if bytes.Equal(e.value, []byte("null")) { // json.Unmarshal would leave the zero value
			return c, fieldErr(fmt.Errorf("%w: want a value, got null", strategy.ErrInvalidOption))
		}
		switch e.key {
		case "algorithm":
			var s string
			if err := json.Unmarshal(e.value, &s); err != nil {
				return c, fieldErr(typeError("a string", e.value))
			}
			c.Algorithm = Algorithm(s)
		case "limit", "burst":
			var n int64
			if err := json.Unmarshal(e.value, &n); err != nil {
				return c, fieldErr(typeError("an integer", e.value))
			}
			if e.key == "limit" {
				c.Limit = n
			} else {
				c.Burst = n
			}
		case "shards":
			var n int
			if err := json.Unmarshal(e.value, &n); err != nil {
				return c, fieldErr(typeError("an integer", e.value))
			}
			c.Shards = n
		case "window", "timeout":
			var s string
			if err := json.Unmarshal(e.value, &s); err != nil {
				return c, fieldErr(typeError(`a duration string like "1m"`, e.value))
			}
			d, err := time.ParseDuration(s)
			if err != nil {
				return c, fieldErr(fmt.Errorf("%w: want a duration string like \"1m\" or \"1h30m\", got %s", strategy.ErrInvalidOption, quote.Value(s)))
			}
			if e.key == "window" {
				c.Window = d
			} else {
				c.Timeout = d
			}
		case "prefix", "on_failure":
			var s string
			if err := json.Unmarshal(e.value, &s); err != nil {
				return c, fieldErr(typeError("a string", e.value))
			}
			if e.key == "prefix" {
				c.Prefix = s
			} else {
				c.OnFailure = FailurePolicy(s)
			}
		case "mode":
			var m string
			if err := json.Unmarshal(e.value, &m); err != nil {
				return c, fieldErr(typeError("a string", e.value))
			}
			c.Mode = Mode(m)
		case "candidate":
			if depth > 0 {
				return c, fieldErr(fmt.Errorf("%w: a candidate cannot have a candidate", strategy.ErrInvalidOption))
			}
			cand, err := decodePolicyAt(e.value, depth+1)
			if err != nil {
				var pe *PolicyError
				if errors.As(err, &pe) && pe.Field != "" {
					return c, &PolicyError{Field: "candidate." + pe.Field, Err: pe.Err, json: pe.json}
				}
				return c, fieldErr(err)
			}
			c.Candidate = &cand
		case "rules":
			rules, err := decodeRules(e.value)
			if err != nil {
				return c, fieldErr(err)
			}
			c.Rules = rules
		case "tiers":
			tiers, err := decodeTiers(e.value)
			if err != nil {
				return c, fieldErr(err)
			}
			c.Tiers = tiers
		case "local_share":
			var f float64
			if err := json.Unmarshal(e.value, &f); err != nil {
				return c, fieldErr(typeError("a number", e.value))
			}
			c.LocalShare = f
		default:
			return c, fieldErr(fmt.Errorf("%w: unknown field; the fields are %s", strategy.ErrInvalidOption, policyFields))
		}
	}
	// an unknown algorithm is the fault, whatever else is missing: the
	// fields required depend on it
	if slices.ContainsFunc(entries, func(e entry) bool { return e.key == "algorithm" }) {
		if err := checkAlgorithm(c.Algorithm); err != nil {
			return c, &PolicyError{Field: "algorithm", Err: err, json: true}
		}
	}
	required := []string{"algorithm", "limit", "window"}
	if c.Algorithm == Multi {
		required = []string{"rules"}
	}
	for _, required := range required {
		if !slices.ContainsFunc(entries, func(e entry) bool { return e.key == required }) {
			return c, &PolicyError{Field: required, Err: fmt.Errorf("%w: missing", strategy.ErrInvalidOption)}
		}
	}
	return c, nil
}

// maxPolicyFields bounds the members of one policy object: the fields
// there are, once each.
const maxPolicyFields = 13

const policyFields = `"algorithm", "limit", "window", "burst", "shards", "prefix", "rules", "candidate", "mode", "tiers", "on_failure", "local_share", "timeout"`

// decodeRules decodes "rules": an array of at most multilimit.MaxRules
// objects with "algorithm", "limit" and "window", all required.
func decodeRules(data []byte) ([]Rule, error) {
	var raw []json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, typeError("an array of rules", data)
	}
	if len(raw) > multilimit.MaxRules {
		return nil, fmt.Errorf("%w: want at most %d rules (multilimit.MaxRules), got %d", strategy.ErrInvalidOption, multilimit.MaxRules, len(raw))
	}
	rules := make([]Rule, 0, len(raw))
	for i, r := range raw {
		fields, err := objectEntries(r, 3, "fields")
		if err != nil {
			return nil, fmt.Errorf("%w: rule %d: %w", strategy.ErrInvalidOption, i, err)
		}
		var rule Rule
		seen := 0
		for _, f := range fields {
			bad := func(want string) error {
				return fmt.Errorf("rule %d: field %s: %w", i, quote.Value(f.key), typeError(want, f.value))
			}
			switch f.key {
			case "algorithm":
				var a string
				if json.Unmarshal(f.value, &a) != nil {
					return nil, bad("a string")
				}
				rule.Algorithm = Algorithm(a)
			case "limit":
				if json.Unmarshal(f.value, &rule.Limit.Limit) != nil {
					return nil, bad("an integer")
				}
			case "window":
				var w string
				if json.Unmarshal(f.value, &w) != nil {
					return nil, bad(`a duration string like "1m"`)
				}
				d, err := time.ParseDuration(w)
				if err != nil {
					return nil, fmt.Errorf("%w: rule %d: want a duration string like \"1m\", got %s", strategy.ErrInvalidOption, i, quote.Value(w))
				}
				rule.Limit.Window = d
			default:
				return nil, fmt.Errorf("%w: rule %d: unknown field %s; the fields are \"algorithm\", \"limit\" and \"window\"", strategy.ErrInvalidOption, i, quote.Value(f.key))
			}
			seen++
		}
		if seen != 3 {
			return nil, fmt.Errorf("%w: rule %d: \"algorithm\", \"limit\" and \"window\" are required", strategy.ErrInvalidOption, i)
		}
		rules = append(rules, rule)
	}
	return rules, nil
}

// decodeTiers decodes "tiers": an object of tier names to objects with
// "limit" (required) and "burst".
func decodeTiers(data []byte) (map[string]Limit, error) {
	entries, err := objectEntries(data, MaxTiers, "tiers (MaxTiers)")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", strategy.ErrInvalidOption, err)
	}
	tiers := make(map[string]Limit, len(entries))
	for _, e := range entries {
		if _, dup := tiers[e.key]; dup {
			return nil, fmt.Errorf("%w: tier %s appears twice", strategy.ErrInvalidOption, quote.Value(e.key))
		}
		fields, err := objectEntries(e.value, 2, "fields")
		if err != nil {
			return nil, fmt.Errorf("%w: tier %s: %w", strategy.ErrInvalidOption, quote.Value(e.key), err)
		}
		var lim Limit
		var hasLimit bool
		for _, f := range fields {
			if f.key != "limit" && f.key != "burst" {
				return nil, fmt.Errorf("%w: tier %s: unknown field %s; the fields are \"limit\" and \"burst\"", strategy.ErrInvalidOption, quote.Value(e.key), quote.Value(f.key))
			}
			var n int64
			if err := json.Unmarshal(f.value, &n); err != nil {
				return nil, fmt.Errorf("tier %s: field %s: %w", quote.Value(e.key), quote.Value(f.key), typeError("an integer", f.value))
			}
			if f.key == "limit" {
				lim.Limit, hasLimit = n, true
			} else {
				lim.Burst = n
			}
		}
		if !hasLimit {
			return nil, fmt.Errorf("%w: tier %s: \"limit\" missing", strategy.ErrInvalidOption, quote.Value(e.key))
		}
		tiers[e.key] = lim
	}
	return tiers, nil
}

func typeError(want string, got json.RawMessage) error {
	return fmt.Errorf("%w: want %s, got %s", strategy.ErrInvalidOption, want, prefixOf(got))
}

// prefixOf returns a JSON value for an error message: as is when short,
// its first bytes then "..." otherwise.
func prefixOf(v []byte) string {
	if len(v) <= quote.MaxBytes {
		return string(v)
	}
	return string(v[:quote.MaxBytes]) + "..."
}

// tokenText returns a JSON token for an error message, bounded.
func tokenText(tok json.Token) string {
	switch t := tok.(type) {
	case string:
		return quote.Value(t)
	case json.Number:
		return prefixOf([]byte(t))
	}
	return fmt.Sprint(tok)
}

type entry struct {
	key   string
	value json.RawMessage
}

// objectEntries returns the members of the JSON object in data, in order
// (repeated names included), and fails on anything but one object, or on
// more than max members. Its errors wrap no sentinel: the callers add one.
func objectEntries(data []byte, max int, what string) ([]entry, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("want a JSON object, got %s", tokenText(tok))
	}
	var out []entry
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("invalid JSON: %w", err)
		}
		if len(out) == max {
			return nil, fmt.Errorf("want at most %d %s", max, what)
		}
		key, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("invalid JSON: want a member name, got %s", tokenText(tok))
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("invalid JSON after %s: %w", quote.Value(key), err)
		}
		out = append(out, entry{key, v})
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("invalid JSON: data after the object")
	}
	return out, nil
}

package rls

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"gopkg.in/yaml.v3"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/strategy"
)

// ConfigError is a configuration problem at one place of one file.
type ConfigError struct {
	File  string // the file, as given to Load (or found in its directory)
	Line  int    // 1-based; 0 when the problem is the file as a whole
	Field string // the YAML field, dotted from the document's root: "descriptors[1].rate_limit.unit"
	Err   error  // what is wrong
}

func (e *ConfigError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	if e.Field != "" {
		b.WriteString(": ")
		b.WriteString(e.Field)
	}
	b.WriteString(": ")
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *ConfigError) Unwrap() error { return e.Err }

// Units maps envoyproxy/ratelimit's unit names to the window each stands
// for. A month is 30 days and a year 365 days: the library's windows are
// durations, not calendar periods.
var Units = map[string]struct {
	Window time.Duration
	Unit   rlsv3.RateLimitResponse_RateLimit_Unit
}{
	"second": {time.Second, rlsv3.RateLimitResponse_RateLimit_SECOND},
	"minute": {time.Minute, rlsv3.RateLimitResponse_RateLimit_MINUTE},
	"hour":   {time.Hour, rlsv3.RateLimitResponse_RateLimit_HOUR},
	"day":    {24 * time.Hour, rlsv3.RateLimitResponse_RateLimit_DAY},
	"week":   {7 * 24 * time.Hour, rlsv3.RateLimitResponse_RateLimit_WEEK},
	"month":  {30 * 24 * time.Hour, rlsv3.RateLimitResponse_RateLimit_MONTH},
	"year":   {365 * 24 * time.Hour, rlsv3.RateLimitResponse_RateLimit_YEAR},
}

// Builder makes the limiter of one descriptor's rate limit. The Server's
// is ratelimit.New on its Redis client with its options.
type Builder func(cfg ratelimit.Config) (*ratelimit.Limiter, error)

// Config is a loaded configuration: every domain's descriptor tree with a
// limiter built for each rate limit. It is immutable and safe for
// concurrent use.
type Config struct {
	domains map[string]*level
	files   []string
	print   string // the files' fingerprint, taken before they were read
	build   Builder
	over    overrides
}

// Domains returns the domains of c, sorted.
func (c *Config) Domains() []string {
	ds := make([]string, 0, len(c.domains))
	for d := range c.domains {
		ds = append(ds, d)
	}
	sort.Strings(ds)
	return ds
}

// level is one descriptor list: its entries by key and value, by key
// alone, and wildcard values (a value ending in "*") in file order.
type level struct {
	byValue   map[entry]*node
	byKey     map[string]*node
	wildcards []*node
}

type entry struct{ key, value string }

// hasKey reports whether a descriptor of lv has key.
func (lv *level) hasKey(key string) bool {
	if lv.byKey[key] != nil {
		return true
	}
	for e := range lv.byValue {
		if e.key == key {
			return true
		}
	}
	for _, w := range lv.wildcards {
		if w.key == key {
			return true
		}
	}
	return false
}

// node is one descriptor of the configuration.
type node struct {
	key, value string // value "" for key only; a wildcard keeps its "*"
	rule       *rule  // nil: no rate_limit block (or unlimited)
	unlimited  bool
	share      bool // share_threshold: every value under the wildcard is one subject
	children   *level
}

// rule is one rate limit: its limiter and what the response reports.
type rule struct {
	limiter   *ratelimit.Limiter
	name      string // the path in the tree, "domain.key_value.key" (telemetry, never a request's own values)
	limitName string // rate_limit.name, for replaces
	replaces  []string
	rpu       uint32
	unit      rlsv3.RateLimitResponse_RateLimit_Unit
	shadow    bool
	tag       string // a limit override's: its limit, in its subjects
	// tierKey, when set, is the request entry that names a subject's tier
	// (rate_limit.tier_key): a request descriptor that ends with it, right
	// after this descriptor's own entries, is decided under that tier.
	tierKey string
	tiers   map[string]*rule  // the tiers' rules, each deciding through st
	st      strategy.Strategy // a tier's: the limiter's Tier; nil: limiter
}

// allowN decides n units of subject under r: its tier's limit, or the
// limiter's own.
func (r *rule) allowN(ctx context.Context, subject string, n int64) (ratelimit.Result, error) {
	if r.st != nil {
		return r.st.AllowN(ctx, subject, n)
	}
	return r.limiter.AllowN(ctx, subject, n)
}

// Load reads path, a YAML file or a directory of them (*.yaml and *.yml,
// not recursively, hidden files skipped), each document one domain in
// envoyproxy/ratelimit's format, and builds a limiter for each rate limit
// with build. Any error, a *ConfigError naming file, line and field, fails
// the whole load.
func Load(path string, build Builder) (*Config, error) {
	print := fingerprint(path) // before reading: a change while reading is seen by the next poll
	files, err := configFiles(path)
	if err != nil {
		return nil, err
	}
	c := &Config{domains: map[string]*level{}, files: files, print: print, build: build}
	domainFile := map[string]string{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, &ConfigError{File: f, Err: err}
		}
		if err := c.parseFile(f, data, build, domainFile); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// configFiles lists the files Load reads for path.
func configFiles(path string) ([]string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, &ConfigError{File: path, Err: err}
	}
	if !fi.IsDir() {
		return []string{path}, nil
	}
	ents, err := os.ReadDir(path)
	if err != nil {
		return nil, &ConfigError{File: path, Err: err}
	}
	var files []string
	for _, e := range ents {
		n := e.Name()
		if strings.HasPrefix(n, ".") || !(strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml")) {
			continue
		}
		p := filepath.Join(path, n)
		if st, err := os.Stat(p); err != nil || st.IsDir() { // follows symlinks (Kubernetes ConfigMaps)
			continue
		}
		files = append(files, p)
	}
	sort.Strings(files)
	return files, nil
}

func (c *Config) parseFile(file string, data []byte, build Builder, domainFile map[string]string) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return &ConfigError{File: file, Line: yamlErrLine(err), Err: err}
		}
		if len(doc.Content) == 0 {
			continue
		}
		p := &parser{file: file, build: build}
		domain, lv, err := p.document(doc.Content[0])
		if err != nil {
			return err
		}
		if domain == "" && lv == nil {
			continue // an empty document
		}
		if prev, ok := domainFile[domain]; ok {
			return &ConfigError{File: file, Line: doc.Content[0].Line, Field: "domain",
				Err: fmt.Errorf("duplicate domain %q (also in %s)", domain, prev)}
		}
		domainFile[domain] = file
		c.domains[domain] = lv
	}
}

// yamlErrLine finds the line in a yaml.v3 syntax error ("yaml: line 3: ...").
func yamlErrLine(err error) int {
	var n int
	if _, e := fmt.Sscanf(strings.TrimPrefix(err.Error(), "yaml: "), "line %d:", &n); e == nil {
		return n
	}
	return 0
}

type parser struct {
	file  string
	build Builder
}

func (p *parser) errf(n *yaml.Node, field, format string, args ...any) error {
	return &ConfigError{File: p.file, Line: n.Line, Field: field, Err: fmt.Errorf(format, args...)}
}

// fields iterates the pairs of a mapping, refusing keys not in known.
func (p *parser) fields(n *yaml.Node, path string, known map[string]bool, f func(key string, v *yaml.Node) error) error {
	if n.Kind != yaml.MappingNode {
		return p.errf(n, path, "must be a mapping, got %s", kindName(n))
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		name := k.Value
		fp := join(path, name)
		if !known[name] {
			return p.errf(k, fp, "unknown field")
		}
		if seen[name] {
			return p.errf(k, fp, "duplicate field")
		}
		seen[name] = true
		if err := f(name, v); err != nil {
			return err
		}
	}
	return nil
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	case yaml.AliasNode:
		return "an alias"
	}
	if n.Tag == "!!null" {
		return "null"
	}
	return fmt.Sprintf("%q", n.Value)
}

func (p *parser) scalar(v *yaml.Node, field string, out any) error {
	if v.Kind != yaml.ScalarNode {
		return p.errf(v, field, "must be a scalar, got %s", kindName(v))
	}
	if err := v.Decode(out); err != nil {
		return p.errf(v, field, "cannot read %q: %s", v.Value, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	return nil
}

var documentFields = map[string]bool{"domain": true, "descriptors": true}

func (p *parser) document(root *yaml.Node) (string, *level, error) {
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return "", nil, nil
	}
	var domain string
	var lv *level
	var domainNode *yaml.Node
	var descs *yaml.Node
	err := p.fields(root, "", documentFields, func(k string, v *yaml.Node) error {
		switch k {
		case "domain":
			domainNode = v
			return p.scalar(v, "domain", &domain)
		case "descriptors":
			descs = v
		}
		return nil
	})
	if err != nil {
		return "", nil, err
	}
	if domain == "" {
		n := root
		if domainNode != nil {
			n = domainNode
		}
		return "", nil, p.errf(n, "domain", "must be set and not empty")
	}
	lv = &level{}
	if descs != nil {
		if lv, err = p.descriptors(descs, "descriptors", domain); err != nil {
			return "", nil, err
		}
	}
	return domain, lv, nil
}

var descriptorFields = map[string]bool{
	"key": true, "value": true, "rate_limit": true, "descriptors": true,
	"shadow_mode": true, "detailed_metric": true, "value_to_metric": true, "share_threshold": true,
	"quota_mode": true,
}

func (p *parser) descriptors(seq *yaml.Node, path, name string) (*level, error) {
	lv := &level{byValue: map[entry]*node{}, byKey: map[string]*node{}}
	if seq.Kind == yaml.ScalarNode && seq.Tag == "!!null" {
		return lv, nil
	}
	if seq.Kind != yaml.SequenceNode {
		return nil, p.errf(seq, path, "must be a list, got %s", kindName(seq))
	}
	for i, dn := range seq.Content {
		dp := fmt.Sprintf("%s[%d]", path, i)
		n, err := p.descriptor(dn, dp, name)
		if err != nil {
			return nil, err
		}
		switch {
		case n.value == "":
			if _, dup := lv.byKey[n.key]; dup {
				return nil, p.errf(dn, dp, "duplicate descriptor key %q (without value)", n.key)
			}
			lv.byKey[n.key] = n
		default:
			e := entry{n.key, n.value}
			if _, dup := lv.byValue[e]; dup {
				return nil, p.errf(dn, dp, "duplicate descriptor %q: %q", n.key, n.value)
			}
			lv.byValue[e] = n
			if strings.HasSuffix(n.value, "*") {
				lv.wildcards = append(lv.wildcards, n)
			}
		}
	}
	return lv, nil
}

func (p *parser) descriptor(dn *yaml.Node, path, name string) (*node, error) {
	n := &node{}
	var rl, children *yaml.Node
	var shadow, quota, keySet bool
	err := p.fields(dn, path, descriptorFields, func(k string, v *yaml.Node) error {
		f := join(path, k)
		switch k {
		case "key":
			keySet = true
			return p.scalar(v, f, &n.key)
		case "value":
			return p.scalar(v, f, &n.value)
		case "rate_limit":
			rl = v
		case "descriptors":
			children = v
		case "shadow_mode":
			return p.scalar(v, f, &shadow)
		case "share_threshold":
			return p.scalar(v, f, &n.share)
		case "quota_mode":
			// envoyproxy/ratelimit answers a quota-mode violation OK (with
			// metadata we do not send): decided as shadow mode is
			return p.scalar(v, f, &quota)
		case "detailed_metric", "value_to_metric":
			var b bool // metrics naming: read, checked, not used
			return p.scalar(v, f, &b)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !keySet || n.key == "" {
		return nil, p.errf(dn, join(path, "key"), "must be set and not empty")
	}
	if n.share && !strings.HasSuffix(n.value, "*") {
		return nil, p.errf(dn, join(path, "share_threshold"), "needs a wildcard value (ending in \"*\"), got %q", n.value)
	}
	name = name + "." + n.key
	if n.value != "" {
		name += "_" + n.value
	}
	if rl != nil {
		if err := p.rateLimit(rl, join(path, "rate_limit"), name, shadow || quota, n); err != nil {
			return nil, err
		}
	}
	if children != nil {
		lv, err := p.descriptors(children, join(path, "descriptors"), name)
		if err != nil {
			return nil, err
		}
		n.children = lv
		if n.rule != nil && n.rule.tierKey != "" && lv.hasKey(n.rule.tierKey) {
			at := rl
			p.fields(rl, "", rateLimitFields, func(f string, v *yaml.Node) error { // read already: no error
				if f == "tier_key" {
					at = v
				}
				return nil
			})
			return nil, p.errf(at, join(path, "rate_limit.tier_key"), "%q is also the key of a nested descriptor: a request could not tell the tier from it", n.rule.tierKey)
		}
	}
	return n, nil
}

var rateLimitFields = map[string]bool{
	"unit": true, "requests_per_unit": true, "unlimited": true, "name": true, "replaces": true,
	// ours
	"algorithm": true, "burst": true, "shards": true, "on_failure": true, "local_share": true, "timeout": true,
	"replicas": true, "replica_timeout": true, "lease": true, "candidate": true, "tiers": true, "tier_key": true,
}

var tierFields = map[string]bool{"requests_per_unit": true, "burst": true}

var candidateFields = map[string]bool{"algorithm": true, "unit": true, "requests_per_unit": true, "burst": true}

var replaceFields = map[string]bool{"name": true}

// Algorithms are the values of the algorithm field.
var Algorithms = []strategy.Algorithm{
	ratelimit.SlidingLog, ratelimit.CompactLog, ratelimit.FixedWindow,
	ratelimit.TokenBucket, ratelimit.GCRA, ratelimit.SlidingCounter,
}

func (p *parser) rateLimit(rl *yaml.Node, path, name string, shadow bool, n *node) error {
	var unit, alg, onFailure, timeout, replicaTimeout string
	var rpu uint64
	var rpuNode, unitNode, algNode, failNode, timeoutNode, replicasNode, replicaTimeoutNode, candNode, leaseNode, tiersNode, tierKeyNode *yaml.Node
	tierRPU := map[string]uint32{}
	var unlimited bool
	cfg := ratelimit.Config{Name: name, Algorithm: ratelimit.FixedWindow}
	r := &rule{name: name, shadow: shadow}
	err := p.fields(rl, path, rateLimitFields, func(k string, v *yaml.Node) error {
		f := join(path, k)
		switch k {
		case "unit":
			unitNode = v
			return p.scalar(v, f, &unit)
		case "requests_per_unit":
			rpuNode = v
			return p.scalar(v, f, &rpu)
		case "unlimited":
			return p.scalar(v, f, &unlimited)
		case "name":
			return p.scalar(v, f, &r.limitName)
		case "replaces":
			if v.Kind != yaml.SequenceNode {
				return p.errf(v, f, "must be a list, got %s", kindName(v))
			}
			for i, e := range v.Content {
				ep := fmt.Sprintf("%s[%d]", f, i)
				var rn string
				if err := p.fields(e, ep, replaceFields, func(_ string, v *yaml.Node) error {
					return p.scalar(v, join(ep, "name"), &rn)
				}); err != nil {
					return err
				}
				if rn == "" {
					return p.errf(e, join(ep, "name"), "must be set and not empty")
				}
				r.replaces = append(r.replaces, rn)
			}
		case "algorithm":
			algNode = v
			return p.scalar(v, f, &alg)
		case "burst":
			return p.scalar(v, f, &cfg.Burst)
		case "shards":
			return p.scalar(v, f, &cfg.Shards)
		case "local_share":
			return p.scalar(v, f, &cfg.LocalShare)
		case "on_failure":
			failNode = v
			return p.scalar(v, f, &onFailure)
		case "timeout":
			timeoutNode = v
			return p.scalar(v, f, &timeout)
		case "replicas":
			replicasNode = v
			return p.scalar(v, f, &cfg.Replicas)
		case "replica_timeout":
			replicaTimeoutNode = v
			return p.scalar(v, f, &replicaTimeout)
		case "lease":
			leaseNode = v
			return p.scalar(v, f, &cfg.Lease)
		case "candidate":
			candNode = v
			return p.fields(v, f, candidateFields, func(string, *yaml.Node) error { return nil }) // read below
		case "tier_key":
			tierKeyNode = v
			return p.scalar(v, f, &r.tierKey)
		case "tiers":
			tiersNode = v
			return p.tiers(v, f, &cfg, tierRPU)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if unlimited {
		if unitNode != nil || rpuNode != nil {
			return p.errf(rl, path, "unlimited must not set unit or requests_per_unit")
		}
		n.unlimited = true
		return nil
	}
	u, ok := Units[strings.ToLower(unit)]
	if !ok {
		at := rl
		if unitNode != nil {
			at = unitNode
		}
		return p.errf(at, join(path, "unit"), "must be one of second, minute, hour, day, week, month, year, got %q", unit)
	}
	if rpu > math.MaxUint32 {
		return p.errf(rpuNode, join(path, "requests_per_unit"), "must be at most %d, got %d", uint32(math.MaxUint32), rpu)
	}
	if alg != "" {
		cfg.Algorithm = strategy.Algorithm(alg)
		known := false
		for _, a := range Algorithms {
			known = known || a == cfg.Algorithm
		}
		if !known {
			return p.errf(algNode, join(path, "algorithm"), "must be one of %v, got %q", Algorithms, alg)
		}
	}
	switch ratelimit.FailurePolicy(onFailure) {
	case "", ratelimit.FailOpen, ratelimit.FailClosed, ratelimit.FailLocal:
		cfg.OnFailure = ratelimit.FailurePolicy(onFailure)
	default:
		return p.errf(failNode, join(path, "on_failure"), "must be open, closed or local, got %q", onFailure)
	}
	if timeoutNode != nil {
		d, err := time.ParseDuration(timeout)
		if err != nil {
			return p.errf(timeoutNode, join(path, "timeout"), "must be a duration such as 100ms, got %q", timeout)
		}
		cfg.Timeout = d
	}
	if replicaTimeoutNode != nil {
		d, err := time.ParseDuration(replicaTimeout)
		if err != nil {
			return p.errf(replicaTimeoutNode, join(path, "replica_timeout"), "must be a duration such as 20ms, got %q", replicaTimeout)
		}
		cfg.ReplicaTimeout = d
	}
	switch {
	case tiersNode != nil && r.tierKey == "":
		return p.errf(tiersNode, join(path, "tiers"), "needs tier_key: the request entry whose value names the tier")
	case tierKeyNode != nil && tiersNode == nil:
		return p.errf(tierKeyNode, join(path, "tier_key"), "names the entry of a tier, but there are no tiers")
	case tierKeyNode != nil && r.tierKey == "":
		return p.errf(tierKeyNode, join(path, "tier_key"), "must not be empty")
	}
	cfg.Limit = int64(rpu)
	cfg.Window = u.Window
	r.rpu = uint32(rpu)
	r.unit = u.Unit
	// Each algorithm keeps its keys apart, so a reload that changes a
	// descriptor's algorithm never reads another algorithm's state.
	cfg.Prefix = string(cfg.Algorithm) + ":"
	if candNode != nil {
		cc, err := p.candidate(candNode, join(path, "candidate"), cfg)
		if err != nil {
			return err
		}
		cfg.Candidate = cc
	}
	lim, err := p.build(cfg)
	if err != nil {
		// the errors of the durability, lease and candidate fields point at the field (the library
		// names it in its policy-document spelling)
		var fe *ratelimit.FieldError
		if errors.As(err, &fe) {
			field := fe.JSON
			at := map[string]*yaml.Node{"replicas": replicasNode, "replica_timeout": replicaTimeoutNode, "lease": leaseNode}[field]
			if field == "candidate" || strings.HasPrefix(field, "candidate.") {
				at, field = candNode, "candidate"
			}
			if field == "tiers" || strings.HasPrefix(field, "tiers.") {
				at, field = tiersNode, "tiers"
			}
			if at == nil && field == "replica_timeout" { // missing: it is the replicas that want it
				at, field = replicasNode, "replicas"
			}
			if at != nil {
				return p.errf(at, join(path, field), "%v", err)
			}
		}
		return p.errf(rl, path, "%v", err)
	}
	r.limiter = lim
	for name, rpu := range tierRPU {
		st, err := lim.Tier(name)
		if err != nil {
			return p.errf(tiersNode, join(path, "tiers"), "%v", err)
		}
		t := *r
		t.rpu, t.st, t.tierKey, t.tiers = rpu, st, "", nil
		if r.tiers == nil {
			r.tiers = make(map[string]*rule, len(tierRPU))
		}
		r.tiers[name] = &t
	}
	n.rule = r
	return nil
}

// tiers reads a rate limit's tiers (ratelimit.Config.Tiers): per name, a
// requests_per_unit and optionally a burst, in the descriptor's unit.
func (p *parser) tiers(v *yaml.Node, path string, cfg *ratelimit.Config, rpus map[string]uint32) error {
	if v.Kind != yaml.MappingNode {
		return p.errf(v, path, "must be a mapping of tier names, got %s", kindName(v))
	}
	cfg.Tiers = map[string]ratelimit.Limit{}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, tv := v.Content[i], v.Content[i+1]
		tp := join(path, k.Value)
		if k.Value == "" {
			return p.errf(k, path, "a tier name must not be empty")
		}
		if _, dup := cfg.Tiers[k.Value]; dup {
			return p.errf(k, tp, "duplicate tier")
		}
		var rpu uint64
		var burst int64
		var rpuNode *yaml.Node
		if err := p.fields(tv, tp, tierFields, func(f string, fv *yaml.Node) error {
			switch f {
			case "requests_per_unit":
				rpuNode = fv
				return p.scalar(fv, join(tp, f), &rpu)
			default:
				return p.scalar(fv, join(tp, f), &burst)
			}
		}); err != nil {
			return err
		}
		if rpuNode == nil {
			return p.errf(tv, join(tp, "requests_per_unit"), "must be set")
		}
		if rpu > math.MaxUint32 {
			return p.errf(rpuNode, join(tp, "requests_per_unit"), "must be at most %d, got %d", uint32(math.MaxUint32), rpu)
		}
		cfg.Tiers[k.Value] = ratelimit.Limit{Limit: int64(rpu), Burst: burst}
		rpus[k.Value] = uint32(rpu)
	}
	return nil
}

// candidate reads a descriptor's candidate (ratelimit.Config.Candidate): an
// algorithm or limit tried in shadow beside the descriptor's own, each
// field defaulting to the descriptor's, on keys of its own.
func (p *parser) candidate(n *yaml.Node, path string, own ratelimit.Config) (*ratelimit.Config, error) {
	cc := &ratelimit.Config{Algorithm: own.Algorithm, Limit: own.Limit, Window: own.Window, Burst: own.Burst}
	var alg, unit string
	var rpu uint64
	var algNode, unitNode, rpuNode *yaml.Node
	err := p.fields(n, path, candidateFields, func(k string, v *yaml.Node) error {
		f := join(path, k)
		switch k {
		case "algorithm":
			algNode = v
			return p.scalar(v, f, &alg)
		case "unit":
			unitNode = v
			return p.scalar(v, f, &unit)
		case "requests_per_unit":
			rpuNode = v
			return p.scalar(v, f, &rpu)
		case "burst":
			return p.scalar(v, f, &cc.Burst)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if algNode != nil {
		cc.Algorithm = strategy.Algorithm(alg)
		if !slices.Contains(Algorithms, cc.Algorithm) {
			return nil, p.errf(algNode, join(path, "algorithm"), "must be one of %v, got %q", Algorithms, alg)
		}
	}
	if unitNode != nil {
		u, ok := Units[strings.ToLower(unit)]
		if !ok {
			return nil, p.errf(unitNode, join(path, "unit"), "must be one of second, minute, hour, day, week, month, year, got %q", unit)
		}
		cc.Window = u.Window
	}
	if rpuNode != nil {
		if rpu > math.MaxUint32 {
			return nil, p.errf(rpuNode, join(path, "requests_per_unit"), "must be at most %d, got %d", uint32(math.MaxUint32), rpu)
		}
		cc.Limit = int64(rpu)
	}
	if cc.Algorithm == own.Algorithm && cc.Limit == own.Limit && cc.Window == own.Window && cc.Burst == own.Burst {
		return nil, p.errf(n, path, "must differ from the descriptor's own algorithm or limit")
	}
	cc.Prefix = "candidate:" + string(cc.Algorithm) + ":"
	return cc, nil
}

package httplimit_test

import (
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/ratekit/ratelimit/httplimit"
)

func prefixes(t *testing.T, cidrs ...string) []netip.Prefix {
	t.Helper()
	var out []netip.Prefix
	for _, c := range cidrs {
		out = append(out, netip.MustParsePrefix(c))
	}
	return out
}

func TestClientIP(t *testing.T) {
	proxies := []string{"10.0.0.0/8", "2001:db8:ffff::/48"}
	for _, c := range []struct {
		name    string
		remote  string
		header  string   // the header ClientIP is told the proxies set
		trusted []string // CIDRs
		xff     []string // X-Forwarded-For lines
		fwd     []string // Forwarded lines
		want    string
	}{
		{name: "no proxies: the peer", remote: "203.0.113.7:4711", want: "203.0.113.7"},
		{name: "no proxies: a forged X-Forwarded-For is ignored", remote: "203.0.113.7:4711",
			xff: []string{"198.51.100.1"}, want: "203.0.113.7"},
		{name: "no proxies: a forged Forwarded is ignored", remote: "203.0.113.7:4711",
			fwd: []string{"for=198.51.100.1"}, want: "203.0.113.7"},
		{name: "header named but no proxy trusted", remote: "203.0.113.7:4711", header: "X-Forwarded-For",
			xff: []string{"198.51.100.1"}, want: "203.0.113.7"},
		{name: "untrusted peer: its X-Forwarded-For is ignored", remote: "198.51.100.9:1", header: "X-Forwarded-For",
			trusted: proxies, xff: []string{"10.0.0.5"}, want: "198.51.100.9"},
		{name: "trusted peer: the hop it appended", remote: "10.0.0.1:80", header: "X-Forwarded-For",
			trusted: proxies, xff: []string{"203.0.113.7"}, want: "203.0.113.7"},
		{name: "a client-forged hop left of the real one is skipped", remote: "10.0.0.1:80", header: "X-Forwarded-For",
			trusted: proxies, xff: []string{"6.6.6.6, 203.0.113.7"}, want: "203.0.113.7"},
		{name: "a client forging a trusted proxy's address gains nothing", remote: "10.0.0.1:80", header: "X-Forwarded-For",
			trusted: proxies, xff: []string{"10.9.9.9, 203.0.113.7"}, want: "203.0.113.7"},
		{name: "several trusted hops", remote: "10.0.0.1:80", header: "X-Forwarded-For",
			trusted: proxies, xff: []string{"6.6.6.6, 203.0.113.7, 10.0.0.3", "10.0.0.2"}, want: "203.0.113.7"},
		{name: "every hop trusted: the left-most", remote: "10.0.0.1:80", header: "X-Forwarded-For",
			trusted: proxies, xff: []string{"10.0.0.3, 10.0.0.2"}, want: "10.0.0.3"},
		{name: "garbage right of the client stops at the trusted proxy", remote: "10.0.0.1:80", header: "X-Forwarded-For",
			trusted: proxies, xff: []string{"203.0.113.7, garbage"}, want: "10.0.0.1"},
		{name: "garbage left of the client is never read", remote: "10.0.0.1:80", header: "x-forwarded-for",
			trusted: proxies, xff: []string{"garbage, 203.0.113.7"}, want: "203.0.113.7"},
		{name: "empty header from a trusted proxy: the proxy", remote: "10.0.0.1:80", header: "X-Forwarded-For",
			trusted: proxies, want: "10.0.0.1"},
		{name: "hops with ports and brackets", remote: "10.0.0.1:80", header: "X-Forwarded-For",
			trusted: proxies, xff: []string{"[2001:db8:1::7]:4711"}, want: "2001:db8:1::7"},
		{name: "IPv4 hop with a port", remote: "10.0.0.1:80", header: "X-Forwarded-For",
			trusted: proxies, xff: []string{"203.0.113.7:4711"}, want: "203.0.113.7"},
		{name: "IPv4-mapped peer is trusted as IPv4", remote: "[::ffff:10.0.0.1]:80", header: "X-Forwarded-For",
			trusted: proxies, xff: []string{"::ffff:203.0.113.7"}, want: "203.0.113.7"},
		{name: "IPv6 peer with a zone", remote: "[fe80::1%eth0]:80", want: "fe80::1"},
		{name: "trusted IPv6 proxy", remote: "[2001:db8:ffff::1]:443", header: "X-Forwarded-For",
			trusted: proxies, xff: []string{"2001:db8:1::7"}, want: "2001:db8:1::7"},
		{name: "Forwarded: the right-most untrusted for=", remote: "10.0.0.1:80", header: "Forwarded",
			trusted: proxies, fwd: []string{`for=6.6.6.6, for="[2001:db8:1::7]:4711";proto=https, for=10.0.0.2;by=10.0.0.1`},
			want: "2001:db8:1::7"},
		{name: "Forwarded: quoted commas and semicolons", remote: "10.0.0.1:80", header: "Forwarded",
			trusted: proxies, fwd: []string{`for=6.6.6.6;ext="a,b;c", For="203.0.113.7"`}, want: "203.0.113.7"},
		{name: "Forwarded: unknown stops at the trusted proxy", remote: "10.0.0.1:80", header: "Forwarded",
			trusted: proxies, fwd: []string{"for=203.0.113.7, for=unknown"}, want: "10.0.0.1"},
		{name: "Forwarded: an obfuscated node stops too", remote: "10.0.0.1:80", header: "Forwarded",
			trusted: proxies, fwd: []string{"for=203.0.113.7, for=_hidden"}, want: "10.0.0.1"},
		{name: "Forwarded: an element without for= stops too", remote: "10.0.0.1:80", header: "Forwarded",
			trusted: proxies, fwd: []string{"for=203.0.113.7, proto=https"}, want: "10.0.0.1"},
		{name: "Forwarded named: a forged X-Forwarded-For is ignored", remote: "10.0.0.1:80", header: "Forwarded",
			trusted: proxies, xff: []string{"6.6.6.6"}, fwd: []string{"for=203.0.113.7"}, want: "203.0.113.7"},
		{name: "X-Forwarded-For named: a forged Forwarded is ignored", remote: "10.0.0.1:80", header: "X-Forwarded-For",
			trusted: proxies, xff: []string{"203.0.113.7"}, fwd: []string{"for=6.6.6.6"}, want: "203.0.113.7"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = c.remote
			for _, v := range c.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			for _, v := range c.fwd {
				r.Header.Add("Forwarded", v)
			}
			got, err := httplimit.ClientIP(r, c.header, prefixes(t, c.trusted...))
			if err != nil {
				t.Fatal(err)
			}
			if got != netip.MustParseAddr(c.want) {
				t.Fatalf("ClientIP = %v; want %v", got, c.want)
			}
		})
	}
}

func TestClientIPBadRemoteAddr(t *testing.T) {
	for _, remote := range []string{"", "@", "example.com:80", "/run/app.sock"} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = remote
		if a, err := httplimit.ClientIP(r, "", nil); err == nil || !strings.Contains(err.Error(), "RemoteAddr") {
			t.Errorf("ClientIP with RemoteAddr %q = %v, %v; want an error naming RemoteAddr", remote, a, err)
		}
	}
}

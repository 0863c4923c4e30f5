package httplimit

import (
	"fmt"
	"net/http"
	"net/netip"
	"net/textproto"
	"strings"
)

// ClientIP returns the address of the client that sent r.
//
// Without trusted proxies it is the TCP peer, r.RemoteAddr: forwarding
// headers are ignored, since any client can write them. With trusted
// proxies, and only when the peer is one of them, it reads the forwarding
// header named header: "Forwarded" is parsed as RFC 7239 (its for=
// parameters), any other name (usually "X-Forwarded-For") as a
// comma-separated list of addresses; several lines of the header are one
// list, in order. Each proxy appends the address it received the request
// from, so the list reads client, proxy1, proxy2, ... and the peer is the
// last proxy. ClientIP walks it from the right, skipping trusted proxies,
// and returns the first hop that is not one: the right-most address that a
// trusted proxy wrote and the client did not choose. When every hop is
// trusted it returns the left-most. A hop that is not an address ("unknown",
// an RFC 7239 obfuscated identifier, garbage) ends the walk at the trusted
// proxy to its right, which is then the client as far as anyone can tell.
//
// Addresses may carry a port ("203.0.113.7:4711", "[2001:db8::1]:4711") and
// IPv4-mapped IPv6 addresses are returned as IPv4. The error, for a
// RemoteAddr that is not an IP address (a Unix socket, say), names it.
func ClientIP(r *http.Request, header string, trusted []netip.Prefix) (netip.Addr, error) {
	peer, ok := parseHop(r.RemoteAddr)
	if !ok {
		return netip.Addr{}, fmt.Errorf("httplimit: RemoteAddr %q is not an IP address", r.RemoteAddr)
	}
	if len(trusted) == 0 || header == "" || !isTrusted(peer, trusted) {
		return peer, nil
	}
	header = textproto.CanonicalMIMEHeaderKey(header)
	var hops []string
	if header == "Forwarded" {
		hops = forwardedFor(r.Header.Values(header))
	} else {
		for _, line := range r.Header.Values(header) {
			hops = append(hops, strings.Split(line, ",")...)
		}
	}
	client := peer
	for i := len(hops) - 1; i >= 0; i-- {
		a, ok := parseHop(hops[i])
		if !ok {
			return client, nil
		}
		client = a
		if !isTrusted(a, trusted) {
			return a, nil
		}
	}
	return client, nil
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// parseHop parses an address with or without a port, an IPv6 one with or
// without brackets, and returns it unmapped and without a zone.
func parseHop(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	a, err := netip.ParseAddr(s)
	if err != nil {
		ap, err2 := netip.ParseAddrPort(s)
		switch {
		case err2 == nil:
			a = ap.Addr()
		case len(s) > 2 && s[0] == '[' && s[len(s)-1] == ']':
			if a, err = netip.ParseAddr(s[1 : len(s)-1]); err != nil {
				return netip.Addr{}, false
			}
		default:
			return netip.Addr{}, false
		}
	}
	return a.Unmap().WithZone(""), true
}

// forwardedFor returns the for= value of each element of the Forwarded
// header lines (RFC 7239), in order, unquoted; "" for an element without one.
func forwardedFor(lines []string) []string {
	var out []string
	for _, line := range lines {
		for _, elem := range splitQuoted(line, ',') {
			node := ""
			for _, pair := range splitQuoted(elem, ';') {
				name, value, ok := strings.Cut(strings.TrimSpace(pair), "=")
				if ok && strings.EqualFold(strings.TrimSpace(name), "for") {
					node = unquote(strings.TrimSpace(value))
				}
			}
			out = append(out, node)
		}
	}
	return out
}

// splitQuoted splits s at sep outside double-quoted strings.
func splitQuoted(s string, sep byte) []string {
	var parts []string
	start, quoted := 0, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case quoted && c == '\\':
			i++ // an escaped byte
		case c == '"':
			quoted = !quoted
		case !quoted && c == sep:
			parts = append(parts, s[start:i])
			start = i + 1
		}
	}
	return append(parts, s[start:])
}

// unquote returns the content of a quoted-string, or s when it is a token.
func unquote(s string) string {
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return s
	}
	var b strings.Builder
	for i := 1; i < len(s)-1; i++ {
		if s[i] == '\\' && i+1 < len(s)-1 {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

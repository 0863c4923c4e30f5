package strategy

import (
	"fmt"
	"strconv"
)

// MaxKeyLen is the longest subject key accepted, in bytes.
const MaxKeyLen = 4096

// NoShard is the shard index of a subject that is not sharded.
const NoShard = -1

// ValidateKey reports whether key can name a subject: non-empty and at most
// MaxKeyLen bytes. Any bytes are allowed.
func ValidateKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: key must not be empty", ErrInvalidKey)
	case len(key) > MaxKeyLen:
		return fmt.Errorf("%w: key must be at most %d bytes, got %d", ErrInvalidKey, MaxKeyLen, len(key))
	}
	return nil
}

// ValidateCost reports whether n can be the cost of a request.
func ValidateCost(n int64) error {
	switch {
	case n < 0:
		return fmt.Errorf("%w: n must be >= 0, got %d", ErrInvalidCost, n)
	case n > MaxUnits:
		return fmt.Errorf("%w: n must be <= %d, got %d", ErrInvalidCost, int64(MaxUnits), n)
	}
	return nil
}

// KeyFor returns the Redis key of a subject: prefix, the algorithm's tag,
// ':', then the subject between braces so that it is the key's Redis Cluster
// hash tag. Inside the braces '%', '{', '}' and '#' are written as %25, %7B,
// %7D and %23, and nothing else is changed, so "user:42" stays readable:
//
//	KeyFor("rl:", "sl", "user:42", NoShard) == "rl:sl:{user:42}"
//	KeyFor("rl:", "sl", "user:42", 3)       == "rl:sl:{user:42#3}"
//
// The shard index sits inside the hash tag so that the shards of one subject
// spread over the nodes of a cluster. Distinct (tag, subject, shard) triples
// never share a key, since the escaped subject contains no '#' or '}'.
func KeyFor(prefix, tag, subject string, shard int) string {
	b := make([]byte, 0, len(prefix)+len(tag)+len(subject)+8)
	b = append(b, prefix...)
	b = append(b, tag...)
	b = append(b, ':', '{')
	b = appendEscaped(b, subject)
	if shard >= 0 {
		b = append(b, '#')
		b = strconv.AppendInt(b, int64(shard), 10)
	}
	b = append(b, '}')
	return string(b)
}

// appendEscaped appends subject to b with '%', '{', '}' and '#'
// percent-escaped.
func appendEscaped(b []byte, subject string) []byte {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(subject); i++ {
		c := subject[i]
		switch c {
		case '%', '{', '}', '#':
			b = append(b, '%', hex[c>>4], hex[c&15])
		default:
			b = append(b, c)
		}
	}
	return b
}

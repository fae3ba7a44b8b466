// Package units reads and writes byte counts the way collmux's rules,
// reports and tools show them: 4096 is "4K", 3 MiB is "3M" (binary
// multiples, written only when exact).
package units

import (
	"fmt"
	"strconv"
	"strings"
)

var suffixes = []struct {
	s string
	v uint64
}{{"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}}

// Bytes writes n with a K/M/G suffix when it is an exact multiple.
func Bytes(n uint64) string {
	for _, u := range suffixes {
		if n >= u.v && n%u.v == 0 {
			return fmt.Sprintf("%d%s", n/u.v, u.s)
		}
	}
	return strconv.FormatUint(n, 10)
}

// Parse reads 123, 4K, 16M or 1G.
func Parse(s string) (uint64, error) {
	mult := uint64(1)
	for _, u := range suffixes {
		if strings.HasSuffix(s, u.s) {
			mult, s = u.v, s[:len(s)-1]
			break
		}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || (n > 0 && n*mult/n != mult) {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return n * mult, nil
}

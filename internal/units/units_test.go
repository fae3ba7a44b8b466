package units

import "testing"

func TestRoundTrip(t *testing.T) {
	for n, want := range map[uint64]string{0: "0", 8: "8", 1023: "1023", 4096: "4K", 3 << 20: "3M", 1 << 30: "1G", 4<<20 + 1: "4194305"} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %s, want %s", n, got, want)
		}
		if back, err := Parse(want); err != nil || back != n {
			t.Errorf("Parse(%q) = %d, %v", want, back, err)
		}
	}
	for _, bad := range []string{"", "12Q", "-1", "99999999999999999999G", "K"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

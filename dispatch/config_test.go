package dispatch

import (
	"strings"
	"testing"
)

func TestLoadConfig(t *testing.T) {
	cases := []struct {
		env   map[string]string
		stats StatsMode
		path  string
		log   LogLevel
		err   string
	}{
		{env: nil},
		{env: map[string]string{"COLLMUX_STATS": "1"}, stats: StatsText},
		{env: map[string]string{"COLLMUX_STATS": "off"}},
		{env: map[string]string{"COLLMUX_STATS": "out/s.json"}, stats: StatsJSON, path: "out/s.json"},
		{env: map[string]string{"COLLMUX_STATS": "report.txt"}, stats: StatsText, path: "report.txt"},
		{env: map[string]string{"COLLMUX_LOG": "decisions"}, log: LogDecisions},
		{env: map[string]string{"COLLMUX_LOG": "loud"}, err: "COLLMUX_LOG"},
	}
	for _, tc := range cases {
		c, err := LoadConfig(func(k string) string { return tc.env[k] })
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: error %v, want one naming %s", tc.env, err, tc.err)
			}
			continue
		}
		if err != nil || c.Stats != tc.stats || c.StatsPath != tc.path || c.Log != tc.log {
			t.Errorf("%v: got %+v, %v", tc.env, c, err)
		}
	}
}

func TestNamesRoundTrip(t *testing.T) {
	for c := Coll(0); c < NumColl; c++ {
		if got, ok := ParseColl(c.String()); !ok || got != c {
			t.Errorf("collective %v does not round-trip", c)
		}
	}
	for b := Backend(0); b < NumBackend; b++ {
		if got, ok := ParseBackend(b.String()); !ok || got != b {
			t.Errorf("backend %v does not round-trip", b)
		}
	}
	if _, ok := ParseColl("allreduce_c"); ok {
		t.Error("ParseColl accepted an unknown name")
	}
}

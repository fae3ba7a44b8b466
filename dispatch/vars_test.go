// SPDX-License-Identifier: Apache-2.0

package dispatch

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestUnknownVars(t *testing.T) {
	cases := []struct {
		env  []string
		want []string
	}{
		{env: []string{"COLLMUX_LOG=info", "COLLMUX_LIB=/x/libcollmux.so", "PATH=/bin", "collmux_logg=1"}},
		{env: []string{"COLLMUX_LOGG=info"}, want: []string{"COLLMUX_LOGG is not a collmux variable; did you mean COLLMUX_LOG?"}},
		{env: []string{"COLLMUX_log=info"}, want: []string{"COLLMUX_log is not a collmux variable; did you mean COLLMUX_LOG?"}},
		{env: []string{"COLLMUX_FUSED_LINGERS=5", "COLLMUX_TIMEOUT=9"},
			want: []string{"COLLMUX_FUSED_LINGERS is not a collmux variable; did you mean COLLMUX_FUSED_LINGER?"}},
		{env: []string{"COLLMUX_STREAMORDER=none"}, want: []string{"COLLMUX_STREAMORDER is not a collmux variable; did you mean COLLMUX_STREAM_ORDER?"}},
		{env: []string{"COLLMUX_NCCL_LIBRARY=x"}, want: []string{"COLLMUX_NCCL_LIBRARY is not a collmux variable; did you mean COLLMUX_NCCL_LIB?"}},
		{env: []string{"COLLMUX_DEBUG=1"}, want: []string{"COLLMUX_DEBUG is not a collmux variable"}}, // nothing near enough
		{env: []string{"COLLMUX_="}, want: []string{"COLLMUX_ is not a collmux variable"}},
	}
	for _, tc := range cases {
		if got := UnknownVars(tc.env); !slices.Equal(got, tc.want) {
			t.Errorf("%v: %q, want %q", tc.env, got, tc.want)
		}
	}
}

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{{"", "", 0}, {"", "abc", 3}, {"kitten", "sitting", 3}, {"LOG", "LOGG", 1}, {"flaw", "lawn", 2}} {
		if got := editDistance(tc.a, tc.b); got != tc.want || editDistance(tc.b, tc.a) != tc.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

// The choice constants follow the order of their variable's Values, as
// choiceVar returns an index into them.
func TestVarChoicesOrder(t *testing.T) {
	for _, tc := range []struct {
		name string
		i    int
		want string
	}{
		{"COLLMUX_LOG", int(LogWarn), "warn"}, {"COLLMUX_LOG", int(LogDecisions), "decisions"}, {"COLLMUX_LOG", int(LogDebug), "debug"},
		{"COLLMUX_FUSED_ALGO", int(AlgoAuto), "auto"}, {"COLLMUX_FUSED_ALGO", int(AlgoTwoShot), "twoshot"},
		{"COLLMUX_STREAM_ORDER", 1, "none"}, // Config.Unordered
	} {
		v := LookupVar(tc.name)
		if v.Values[tc.i] != tc.want || v.Default != v.Values[0] {
			t.Errorf("%s: value %d is %q, want %q (default %q)", tc.name, tc.i, v.Values[tc.i], tc.want, v.Default)
		}
	}
}

// README's Variables table documents exactly the variables the library reads.
func TestVarsMatchREADME(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, _ := strings.Cut(string(b), "\n## Variables\n")
	table, _, _ = strings.Cut(table, "\n## ")
	var documented []string
	for _, m := range regexp.MustCompile("(?m)^\\| `(COLLMUX_[A-Z0-9_]+)").FindAllStringSubmatch(table, -1) {
		if !slices.Contains(documented, m[1]) {
			documented = append(documented, m[1])
		}
	}
	var lib []string
	for _, v := range Vars {
		if v.Library {
			lib = append(lib, v.Name)
		}
	}
	if !slices.Equal(documented, lib) {
		t.Errorf("README's Variables table lists %v;\nVars has the library variables %v, in that order", documented, lib)
	}
}

// Every COLLMUX_* name the Go and C sources spell out is in Vars, so that
// `collmux info` shows it and does not call it unknown.
func TestVarsInSource(t *testing.T) {
	quoted := regexp.MustCompile(`"(COLLMUX_[A-Z0-9_]+)"`)
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "build" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") && path != "..") {
			return filepath.SkipDir
		}
		ext := filepath.Ext(path)
		if d.IsDir() || strings.HasSuffix(path, "_test.go") || (ext != ".go" && ext != ".c" && ext != ".h") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range quoted.FindAllStringSubmatch(string(src), -1) {
			if !slices.ContainsFunc(Vars, func(v Var) bool { return v.Name == m[1] }) {
				t.Errorf("%s reads %s, which is not in Vars", path, m[1])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

package tests

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// The floor plan (docs/design.md): calls go down, from capi through the
// router to the backends and the layers below them, so no folder's C calls
// a function another folder defines while that folder calls back into it.
// The check reads the library's C: which folder defines each cmx_ and
// collmux_ function, and which folders each folder calls or names (a
// backend table names its entries).
func TestNoFolderCallsBack(t *testing.T) {
	root := repoRoot()
	var files []string
	for _, dir := range []string{"capi", "dispatch", "copy", "fused", "nccl", "staged", "mpi", "gate", "cuda", "internal/cmx"} {
		m, _ := filepath.Glob(filepath.Join(root, dir, "*.c"))
		files = append(files, m...)
	}
	if len(files) < 20 {
		t.Fatalf("found only %d C files", len(files))
	}
	def := regexp.MustCompile(`(?m)^[A-Za-z_][\w \*]*?\b((?:cmx|collmux)_\w+)\s*\([^;{]*\)\s*\{`)
	call := regexp.MustCompile(`\b(cmx_\w+)\b`)
	comment := regexp.MustCompile(`(?s)/\*.*?\*/|//[^\n]*`)
	src := map[string]string{}
	where := map[string]map[string]bool{} // function -> folders defining it
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src[f] = comment.ReplaceAllString(string(b), "")
		dir, _ := filepath.Rel(root, filepath.Dir(f))
		for _, m := range def.FindAllStringSubmatch(src[f], -1) {
			if where[m[1]] == nil {
				where[m[1]] = map[string]bool{}
			}
			where[m[1]][dir] = true
		}
	}
	calls := map[string]map[string][]string{} // folder -> folder it calls -> functions
	for f, s := range src {
		dir, _ := filepath.Rel(root, filepath.Dir(f))
		for _, m := range call.FindAllStringSubmatch(s, -1) {
			for to := range where[m[1]] {
				if to == dir {
					continue
				}
				if calls[dir] == nil {
					calls[dir] = map[string][]string{}
				}
				calls[dir][to] = append(calls[dir][to], m[1])
			}
		}
	}
	var loops []string
	for a, tos := range calls {
		for b, fns := range tos {
			if back := calls[b][a]; a < b && back != nil {
				loops = append(loops, a+" calls "+b+" ("+strings.Join(uniq(fns), ", ")+") and "+b+" calls "+a+" ("+strings.Join(uniq(back), ", ")+")")
			}
		}
	}
	sort.Strings(loops)
	for _, l := range loops {
		t.Error(l)
	}
	// the check sees the calls it must: the entry points call the router,
	// which names its backends
	if len(calls["capi"]["dispatch"]) == 0 || len(calls["dispatch"]["nccl"]) == 0 || len(calls["nccl"]["mpi"]) == 0 {
		t.Errorf("the check missed calls: capi to dispatch %d, dispatch to nccl %d, nccl to mpi %d",
			len(calls["capi"]["dispatch"]), len(calls["dispatch"]["nccl"]), len(calls["nccl"]["mpi"]))
	}
}

func uniq(s []string) []string {
	sort.Strings(s)
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

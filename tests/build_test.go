package tests

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// headerDigest is what scripts/build-lib.sh passes the library build as
// CMX_HEADERS: the first 16 hex digits of the SHA-256 of every C header
// of the library's folders, in path order.
func headerDigest(t *testing.T) string {
	root := repoRoot()
	var paths []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() && rel != "." && (strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(rel, "build") || rel == "tests" || rel == "bench") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".h") {
			paths = append(paths, "./"+rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(paths)
	h := sha256.New()
	for _, p := range paths {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// The C of every folder includes the headers of internal/cmx, which Go's
// build cache does not see change (golang/go#24355); the build passes
// their digest in the C flags so that a changed header rebuilds every
// package. The library records the digest it was built with: it must be
// that of the headers in the tree, so a header changed since the build
// (and a build that missed it) fails here.
func TestLibraryBuiltFromCurrentHeaders(t *testing.T) {
	lib, err := os.ReadFile(libPath(t))
	if err != nil {
		t.Fatal(err)
	}
	const marker = "@(#)collmux-headers "
	i := bytes.Index(lib, []byte(marker))
	if i < 0 {
		t.Fatalf("%s records no header digest: not built by scripts/build-lib.sh", libPath(t))
	}
	got := string(lib[i+len(marker) : i+len(marker)+16])
	if want := headerDigest(t); got != want {
		t.Fatalf("the library was built from headers with digest %s, the tree's are %s: a stale build (run make build)", got, want)
	}
}

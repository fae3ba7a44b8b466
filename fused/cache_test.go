package fused

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// nobody is a uid other than the tests' own, for files "of another user"
// (only root can make them).
const nobody = 65534

func needRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("making files of another user needs root")
	}
}

// plant writes an image and its matching digest as an attacker (or an
// accident) would leave them.
func plant(t *testing.T, dir, key string, img string, mode os.FileMode) {
	h := sha256.Sum256([]byte(img))
	for ext, b := range map[string]string{".cubin": img, ".sha256": hex.EncodeToString(h[:]) + "\n"} {
		p := filepath.Join(dir, key+ext)
		if err := os.WriteFile(p, []byte(b), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // past the umask
			t.Fatal(err)
		}
	}
}

// warnings collects what the package warns of while a test runs.
func warnings(t *testing.T) *[]string {
	var got []string
	Warn = func(m string) { got = append(got, m) }
	t.Cleanup(func() { Warn = nil })
	return &got
}

// Load runs only an image this user wrote, in a directory of this user's:
// anything planted, linked, writable by others or damaged is compiled
// again, and an unsafe directory is not used at all.
func TestLoadTrustsOnlyOwnImages(t *testing.T) {
	for _, tc := range []struct {
		name  string
		root  bool                      // needs root (files of another user)
		setup func(t *testing.T) string // returns the cache directory
		how   Outcome
		warn  string // in a warning; "" for none
	}{
		{name: "another user's directory", root: true, how: Private, warn: "belongs to uid", setup: func(t *testing.T) string {
			d := filepath.Join(t.TempDir(), "c")
			os.Mkdir(d, 0o755)
			plant(t, d, "k", "EVIL", 0o644)
			for _, p := range []string{d, filepath.Join(d, "k.cubin"), filepath.Join(d, "k.sha256")} {
				os.Chown(p, nobody, nobody)
			}
			return d
		}},
		{name: "a link to a directory", how: Private, warn: "symbolic link", setup: func(t *testing.T) string {
			real, d := t.TempDir(), filepath.Join(t.TempDir(), "c")
			plant(t, real, "k", "EVIL", 0o600)
			os.Symlink(real, d)
			return d
		}},
		{name: "another user's image", root: true, how: Cached, warn: "belongs to uid", setup: func(t *testing.T) string {
			d := t.TempDir()
			plant(t, d, "k", "EVIL", 0o644)
			os.Chown(filepath.Join(d, "k.cubin"), nobody, nobody)
			return d
		}},
		{name: "an image writable by others", how: Cached, warn: "writable by others", setup: func(t *testing.T) string {
			d := t.TempDir()
			plant(t, d, "k", "EVIL", 0o666)
			return d
		}},
		{name: "an image that is a link", how: Cached, warn: "symbolic link", setup: func(t *testing.T) string {
			d, elsewhere := t.TempDir(), t.TempDir()
			plant(t, d, "k", "EVIL", 0o600)
			plant(t, elsewhere, "k", "EVIL", 0o600)
			os.Remove(filepath.Join(d, "k.cubin"))
			os.Symlink(filepath.Join(elsewhere, "k.cubin"), filepath.Join(d, "k.cubin"))
			return d
		}},
		{name: "an image not matching its digest", how: Cached, warn: "does not match its digest", setup: func(t *testing.T) string {
			d := t.TempDir()
			plant(t, d, "k", "EVIL", 0o600)
			os.WriteFile(filepath.Join(d, "k.cubin"), []byte("DAMAGED"), 0o600)
			return d
		}},
		{name: "an image without digest (older collmux)", how: Cached, setup: func(t *testing.T) string {
			d := t.TempDir()
			os.WriteFile(filepath.Join(d, "k.cubin"), []byte("OLD"), 0o600)
			return d
		}},
		{name: "no cache directory", how: Private, setup: func(t *testing.T) string { return "" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.root {
				needRoot(t)
			}
			dir := tc.setup(t)
			warned := warnings(t)
			calls := 0
			b, how, err := Load(dir, "k", func() ([]byte, error) { calls++; return []byte("CUBIN"), nil })
			if err != nil || string(b) != "CUBIN" || calls != 1 || how != tc.how {
				t.Fatalf("got %q (%v, compiled %d times), %v; want CUBIN compiled once, %v", b, how, calls, err, tc.how)
			}
			all := strings.Join(*warned, "\n")
			if tc.warn == "" && all != "" || !strings.Contains(all, tc.warn) {
				t.Errorf("warnings %q, want one saying %q", all, tc.warn)
			}
			if how == Cached { // the rebuilt image serves the next Load
				if b, how, _ := Load(dir, "k", nil); string(b) != "CUBIN" || how != FromCache {
					t.Errorf("next Load: %q %v", b, how)
				}
			}
			if how == Private && dir != "" { // nothing written into an unsafe directory
				if b, _ := os.ReadFile(filepath.Join(dir, "k.cubin")); string(b) != "EVIL" {
					t.Errorf("the refused directory's image became %q", b)
				}
				if _, err := os.Lstat(filepath.Join(dir, "k.lock")); err == nil {
					t.Error("a lock file was made in the refused directory")
				}
			}
		})
	}
}

// The cache directory and lock file are the user's alone: made 0700 and
// 0600, and a directory an older collmux made 0755 is closed.
func TestCacheIsPrivate(t *testing.T) {
	old := filepath.Join(t.TempDir(), "old")
	os.Mkdir(old, 0o755)
	for _, dir := range []string{filepath.Join(t.TempDir(), "a", "b"), old} {
		if _, how, err := Load(dir, "k", func() ([]byte, error) { return []byte("CUBIN"), nil }); err != nil || how != Cached {
			t.Fatalf("%s: %v %v", dir, how, err)
		}
		for p, want := range map[string]os.FileMode{dir: 0o700, filepath.Join(dir, "k.lock"): 0o600, filepath.Join(dir, "k.cubin"): 0o600, filepath.Join(dir, "k.sha256"): 0o600} {
			if fi, err := os.Lstat(p); err != nil {
				t.Error(err)
			} else if fi.Mode().Perm() != want {
				t.Errorf("%s: mode %04o, want %04o", p, fi.Mode().Perm(), want)
			}
		}
	}
}

// A lock held too long (a stuck rank, or anyone who could open the file)
// costs at most LockWait: then the rank compiles for itself and writes
// nothing.
func TestLoadLockDeadline(t *testing.T) {
	dir := t.TempDir()
	defer func(w time.Duration) { LockWait = w }(LockWait)
	LockWait = 200 * time.Millisecond
	os.Chmod(dir, 0o700)
	f, err := os.OpenFile(filepath.Join(dir, "k.lock"), os.O_CREATE|os.O_RDONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil { // a read-only open suffices
		t.Fatal(err)
	}
	warned := warnings(t)
	type result struct {
		b   []byte
		how Outcome
		err error
	}
	done := make(chan result, 1)
	go func() {
		b, how, err := Load(dir, "k", func() ([]byte, error) { return []byte("CUBIN"), nil })
		done <- result{b, how, err}
	}()
	select {
	case r := <-done:
		if r.err != nil || string(r.b) != "CUBIN" || r.how != Private {
			t.Errorf("got %q %v %v, want CUBIN compiled privately", r.b, r.how, r.err)
		}
		if len(*warned) != 1 || !strings.Contains((*warned)[0], "still locked") {
			t.Errorf("warnings %q", *warned)
		}
		if _, err := os.Stat(filepath.Join(dir, "k.cubin")); err == nil {
			t.Error("an image was cached without the lock")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Load waited for the lock past its deadline")
	}
}

// An image that could not be written is not claimed to be cached.
func TestLoadWriteFailure(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "k.cubin", "x"), 0o700) // the image cannot be renamed into place (even as root)
	warned := warnings(t)
	b, how, err := Load(dir, "k", func() ([]byte, error) { return []byte("CUBIN"), nil })
	if err != nil || string(b) != "CUBIN" || how != Private {
		t.Errorf("got %q %v %v, want CUBIN, not cached", b, how, err)
	}
	if !strings.Contains(strings.Join(*warned, "\n"), "could not be cached") {
		t.Errorf("warnings %q", *warned)
	}
}

// An image the driver refuses is deleted, so that the next Load compiles
// it again; one another rank has replaced meanwhile stays.
func TestReject(t *testing.T) {
	dir := t.TempDir()
	calls := 0
	compile := func() ([]byte, error) { calls++; return []byte("CUBIN"), nil }
	Load(dir, "k", compile)
	Reject(dir, "k", []byte("SOMETHING ELSE"))
	if _, how, _ := Load(dir, "k", compile); how != FromCache {
		t.Errorf("an image other than the refused one was deleted (%v)", how)
	}
	Reject(dir, "k", []byte("CUBIN"))
	if _, how, _ := Load(dir, "k", compile); how != Cached || calls != 2 {
		t.Errorf("the refused image was not compiled again: %v, %d compiles", how, calls)
	}
}

func TestAOTDirFor(t *testing.T) {
	for _, tc := range []struct{ lib, cwd, want string }{
		{"/opt/lib/libcollmux.so", "/anywhere", "/opt/lib/collmux-kernels"},
		{"build/libcollmux.so", "/home/u/src", "/home/u/src/build/collmux-kernels"},
		{"./libcollmux.so", "/w", "/w/collmux-kernels"},
		{"build/libcollmux.so", "", ""}, // where the library was loaded from is unknown
		{"", "/w", ""},                  // dladdr failed: not the current directory
	} {
		if got := AOTDirFor(tc.lib, tc.cwd); got != tc.want {
			t.Errorf("AOTDirFor(%q, %q) = %q, want %q", tc.lib, tc.cwd, got, tc.want)
		}
	}
}

// Ahead-of-time images are taken only from an absolute folder that this
// user or root owns and no one else can write, and only as regular files
// of theirs that no one else can write.
func TestLoadAOTTrust(t *testing.T) {
	for _, tc := range []struct {
		name  string
		root  bool
		setup func(t *testing.T, d string) string // returns the folder to search
		ok    bool
	}{
		{name: "own", ok: true, setup: func(t *testing.T, d string) string { return d }},
		{name: "relative folder", setup: func(t *testing.T, d string) string {
			t.Chdir(filepath.Dir(d))
			return filepath.Base(d)
		}},
		{name: "folder writable by others", setup: func(t *testing.T, d string) string { os.Chmod(d, 0o777); return d }},
		{name: "image writable by others", setup: func(t *testing.T, d string) string {
			os.Chmod(filepath.Join(d, AOTName(90)), 0o666)
			return d
		}},
		{name: "image is a link", setup: func(t *testing.T, d string) string {
			p := filepath.Join(d, AOTName(90))
			os.Rename(p, p+".real")
			os.Symlink(p+".real", p)
			return d
		}},
		{name: "folder is a link", setup: func(t *testing.T, d string) string {
			l := filepath.Join(t.TempDir(), AOTDir)
			os.Symlink(d, l)
			return l
		}},
		{name: "image of another user", root: true, setup: func(t *testing.T, d string) string {
			os.Chown(filepath.Join(d, AOTName(90)), nobody, nobody)
			return d
		}},
		{name: "folder of another user", root: true, setup: func(t *testing.T, d string) string { os.Chown(d, nobody, nobody); return d }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.root {
				needRoot(t)
			}
			d := filepath.Join(t.TempDir(), AOTDir)
			os.Mkdir(d, 0o755)
			os.Chmod(d, 0o755)
			if err := os.WriteFile(filepath.Join(d, AOTName(90)), []byte("CUBIN90"), 0o644); err != nil {
				t.Fatal(err)
			}
			dir := tc.setup(t, d)
			warned := warnings(t)
			img, _ := LoadAOT([]string{dir}, 90)
			if (img != nil) != tc.ok {
				t.Errorf("image %q; want one: %v", img, tc.ok)
			}
			if !tc.ok && tc.name != "relative folder" && len(*warned) == 0 {
				t.Error("an untrusted image was passed over without a warning")
			}
		})
	}
}

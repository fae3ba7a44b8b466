// SPDX-License-Identifier: Apache-2.0

package privfile

// What collmux keeps for its user alone and later runs or reads back (the
// fused kernels' cache, the benchmark the tool builds): a folder only
// the user can enter, and files that only the user (or root, where the
// caller allows) could have written.

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// PrivateDir makes dir (0700, and any missing parents) and checks that it
// is the user's alone: a directory, not a symbolic link, owned by the
// effective uid. A directory of the user's that others may enter (older
// collmux made it 0755) is closed to them.
func PrivateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if err := owned(dir, fi, true, false); err != nil {
		return err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return os.Chmod(dir, 0o700)
	}
	return nil
}

// owned checks what Lstat or Fstat said of path: a directory (dir) or a
// regular file, owned by the effective uid, or by root where rootOK.
func owned(path string, fi fs.FileInfo, dir, rootOK bool) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("%s is a symbolic link", path)
	case dir && !fi.IsDir():
		return fmt.Errorf("%s is not a directory", path)
	case !dir && !fi.Mode().IsRegular():
		return fmt.Errorf("%s is not a regular file", path)
	case !ok:
		return fmt.Errorf("%s: owner unknown", path)
	case int(st.Uid) != os.Geteuid() && !(rootOK && st.Uid == 0):
		return fmt.Errorf("%s belongs to uid %d, not to this user (uid %d)", path, st.Uid, os.Geteuid())
	}
	return nil
}

// Trusted is owned, and writable by neither group nor others.
func Trusted(path string, fi fs.FileInfo, dir, rootOK bool) error {
	if err := owned(path, fi, dir, rootOK); err != nil {
		return err
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s is writable by others (mode %04o)", path, fi.Mode().Perm())
	}
	return nil
}

// ReadTrusted reads the file at path, opened without following a symbolic
// link, if trusted accepts the file opened.
func ReadTrusted(path string, rootOK bool) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("%s is a symbolic link", path)
		}
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := Trusted(path, fi, false, rootOK); err != nil {
		return nil, err
	}
	return io.ReadAll(f)
}

// SPDX-License-Identifier: Apache-2.0

// Package privfile holds the files collmux keeps for its user alone. It
// writes the ones it leaves for the user (the statistics report,
// timelines): made 0600, since they show what the job did, and truncated,
// with a symbolic link at the path refused rather than followed: in a
// directory others can write, a link could aim the truncating write at any
// file of the user's. And it checks the ones collmux runs or reads back
// (private.go).
package privfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// Create opens path for writing, as the package says.
func Create(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o600)
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("%s is a symbolic link: not written", path)
	}
	return f, err
}

// Write creates path and fills it with write; a failed close is an error
// too (the data may not have reached the file).
func Write(path string, write func(io.Writer) error) error {
	f, err := Create(path)
	if err != nil {
		return err
	}
	err = write(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

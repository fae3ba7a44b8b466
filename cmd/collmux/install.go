// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"strings"
)

// The installation's layout, as CMake configured it (CMAKE_INSTALL_BINDIR,
// _LIBDIR and _DATADIR under the prefix), which CMakeLists.txt hands the
// tool with -ldflags -X; a plain `go build` keeps GNU's defaults. The tool
// finds the library and the benchmark's source of its installation by
// them, wherever the prefix is (`make install PREFIX=...`).
var (
	binDir  = "bin"
	libDir  = "lib"
	dataDir = "share"
)

// toolDir is the folder of the running tool, links resolved; "" if unknown.
func toolDir() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		return ""
	}
	return filepath.Dir(exe)
}

// installed is the path of rel under dir (libDir or dataDir) of the
// installation whose binDir holds the tool at exeDir; "" when the tool is
// not in such a folder (the build tree). An absolute dir stands alone.
func installed(exeDir, dir, rel string) string {
	if filepath.IsAbs(dir) {
		return filepath.Join(dir, rel)
	}
	prefix, ok := strings.CutSuffix(filepath.Clean(exeDir), string(filepath.Separator)+filepath.Clean(binDir))
	if !ok || exeDir == "" {
		return ""
	}
	return filepath.Join(prefix, dir, rel)
}

// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"debug/buildinfo"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// version is the tool's version: CMakeLists.txt sets it from the file
// VERSION (-ldflags -X main.version=...); a plain `go build` leaves "devel".
var version = "devel"

// libMarker precedes the version in the library's what(1) ident
// (capi/api.c). The tool reads the version from the file because it cannot
// load the library: that would start a second Go runtime in its process.
const libMarker = "@(#)collmux "

func versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Show the versions of the tool, the library it finds and Go, and how the tool was built",
		Long: "version prints the tool's version, the version of the library at $COLLMUX_LIB or else the one beside the tool " +
			"(the build tree, or the installation the tool belongs to), the Go release, and the tool's build settings " +
			"(with the VCS revision where the build recorded one). `collmux --version` prints the same.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			writeVersion(cmd.OutOrStdout())
			return nil
		},
	}
}

// writeVersion writes what `collmux version` shows, one "key  value" line
// each, keys padded so that the values line up.
func writeVersion(w io.Writer) {
	line := func(k, v string) { fmt.Fprintf(w, "%-8s %s\n", k, v) }
	line("collmux", version)
	lib, tried := findLib(os.Getenv)
	switch v, err := libVersion(lib); {
	case lib == "":
		line("library", "not found (looked for "+strings.Join(tried, ", ")+"; set COLLMUX_LIB)")
	case err != nil:
		line("library", "unknown: "+err.Error())
	default:
		about := lib
		if bi, err := buildinfo.ReadFile(lib); err == nil {
			about += ", " + bi.GoVersion
		}
		if v != version {
			about += "; not the tool's version"
		}
		line("library", v+" ("+about+")")
	}
	line("go", runtime.Version()+" "+runtime.GOOS+"/"+runtime.GOARCH)
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return
	}
	var build []string
	vcs := map[string]string{}
	for _, s := range bi.Settings {
		if k, ok := strings.CutPrefix(s.Key, "vcs."); ok {
			vcs[k] = s.Value
		} else {
			build = append(build, s.Key+"="+s.Value)
		}
	}
	if len(build) > 0 {
		line("build", strings.Join(build, " "))
	}
	if rev := vcs["revision"]; rev != "" {
		if vcs["modified"] == "true" {
			rev += " (modified)"
		}
		line("vcs", strings.TrimSpace(vcs["system"]+" "+rev+" "+vcs["time"]))
	}
}

// findLib returns the library `collmux version` describes, or "" and the
// places it looked: $COLLMUX_LIB alone when set (the modulefile and the
// tests set it, and another library found instead would mislead); else
// beside the tool (the build tree: build/collmux, build/libcollmux.so), the
// installation the tool is part of (<prefix>/bin/collmux,
// <prefix>/<libdir>/libcollmux.so), and build/ under the working
// directory (`go run ./cmd/collmux` in a checkout).
func findLib(getenv func(string) string) (path string, tried []string) {
	if p := getenv("COLLMUX_LIB"); p != "" {
		tried = []string{p}
	} else {
		if dir := toolDir(); dir != "" {
			tried = append(tried, filepath.Join(dir, "libcollmux.so"))
			if p := installed(dir, libDir, "libcollmux.so"); p != "" {
				tried = append(tried, p)
			}
		}
		tried = append(tried, filepath.Join("build", "libcollmux.so"))
	}
	for _, p := range tried {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			if abs, err := filepath.Abs(p); err == nil {
				p = abs
			}
			return filepath.Clean(p), tried
		}
	}
	return "", tried
}

// libVersion reads the version from the library's ident: the text after
// libMarker up to the NUL that ends the C string.
func libVersion(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	i := bytes.Index(b, []byte(libMarker))
	if i < 0 {
		return "", fmt.Errorf("%s has no collmux version string (not collmux, or older than 0.1.0)", path)
	}
	v, _, ok := bytes.Cut(b[i+len(libMarker):], []byte{0})
	if !ok || len(v) == 0 || len(v) > 64 {
		return "", fmt.Errorf("%s: malformed collmux version string", path)
	}
	return string(v), nil
}

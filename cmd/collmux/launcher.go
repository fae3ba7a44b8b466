// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"unicode"
)

// launcherHelp documents --launcher's template syntax.
const launcherHelp = `command line that starts the benchmark's ranks, a template: words split at spaces (not inside braces), with
{np}         the number of ranks
{env:FORMAT} the variables the ranks need (LD_PRELOAD=...), FORMAT written once per VAR=VALUE: its words (split at spaces) with
             one %s replaced by VAR=VALUE, or two by VAR and VALUE. As a word of its own, the variables' words follow one
             another; inside a word, they are joined by commas
{env}        {env:%s}
{prog}       the benchmark and its arguments (a word of its own; at the end where the template has none)
{{ }}        literal braces
Open MPI: 'mpirun -np {np} {env:-x %s}'; MPICH: 'mpirun.mpich -n {np} {env:-genv %s %s}'; Slurm: 'srun -n {np} --export=ALL,{env}'.
Default: --mpirun with Open MPI's or MPICH's flags, as its --version tells`

// A launcher is a parsed --launcher template: words made of segments.
type launcher struct {
	words [][]segment
}

// A segment is literal text, or a placeholder (name "np", "env" or "prog";
// format: env's words).
type segment struct {
	text, name string
	format     []string
}

// parseLauncher reads a --launcher template.
func parseLauncher(tmpl string) (launcher, error) {
	var l launcher
	var word []segment
	var lit strings.Builder
	flushLit := func() {
		if lit.Len() > 0 {
			word = append(word, segment{text: lit.String()})
			lit.Reset()
		}
	}
	flushWord := func() {
		flushLit()
		if len(word) > 0 {
			l.words = append(l.words, word)
			word = nil
		}
	}
	envs, progs := 0, 0
	for i := 0; i < len(tmpl); i++ {
		c := tmpl[i]
		switch {
		case c == '{' && strings.HasPrefix(tmpl[i:], "{{"), c == '}' && strings.HasPrefix(tmpl[i:], "}}"):
			lit.WriteByte(c)
			i++
		case c == '}':
			return l, fmt.Errorf("--launcher %q: a } without its { (write }} for a brace)", tmpl)
		case c == '{':
			end := strings.IndexAny(tmpl[i+1:], "{}")
			if end < 0 || tmpl[i+1+end] != '}' {
				return l, fmt.Errorf("--launcher %q: a { without its } (write {{ for a brace)", tmpl)
			}
			body := tmpl[i+1 : i+1+end]
			i += 1 + end
			name, format, hasFormat := strings.Cut(body, ":")
			s := segment{name: name}
			switch {
			case name == "np" && !hasFormat, name == "prog" && !hasFormat:
			case name == "env":
				if !hasFormat {
					format = "%s"
				}
				s.format = strings.Fields(format)
				if n := strings.Count(format, "%s"); n != 1 && n != 2 {
					return l, fmt.Errorf("--launcher %q: {env:%s} has %d %%s; want one (VAR=VALUE) or two (VAR, then VALUE)", tmpl, format, n)
				}
				envs++
			default:
				return l, fmt.Errorf("--launcher %q: unknown placeholder {%s}; want {np}, {env}, {env:FORMAT} or {prog}", tmpl, body)
			}
			if name == "prog" {
				progs++
			}
			flushLit()
			word = append(word, s)
		case unicode.IsSpace(rune(c)):
			flushWord()
		default:
			lit.WriteByte(c)
		}
	}
	flushWord()
	for _, w := range l.words {
		for _, s := range w {
			if len(w) > 1 && (s.name == "prog" || s.name == "env" && len(s.format) > 1) {
				return l, fmt.Errorf("--launcher %q: {%s} with several words must be a word of its own", tmpl, s.name)
			}
		}
	}
	switch {
	case envs == 0:
		return l, fmt.Errorf("--launcher %q: no {env}: LD_PRELOAD must reach the ranks (and the ranks alone)", tmpl)
	case progs > 1:
		return l, fmt.Errorf("--launcher %q: {prog} more than once", tmpl)
	case progs == 0:
		l.words = append(l.words, []segment{{name: "prog"}})
	}
	return l, nil
}

// render is the command line that starts np ranks of prog with env
// (VAR=VALUE entries).
func (l launcher) render(np int, env, prog []string) ([]string, error) {
	var args []string
	for _, w := range l.words {
		if len(w) == 1 && w[0].name == "prog" {
			args = append(args, prog...)
			continue
		}
		if len(w) == 1 && w[0].name == "env" {
			for _, kv := range env {
				args = append(args, w[0].expand(kv)...)
			}
			continue
		}
		var b strings.Builder
		for _, s := range w {
			switch s.name {
			case "":
				b.WriteString(s.text)
			case "np":
				b.WriteString(strconv.Itoa(np))
			case "env":
				var each []string
				for _, kv := range env {
					e := strings.Join(s.expand(kv), " ")
					if strings.Contains(e, ",") {
						return nil, fmt.Errorf("--launcher: %s cannot go into a comma-separated list", kv)
					}
					each = append(each, e)
				}
				b.WriteString(strings.Join(each, ","))
			}
		}
		args = append(args, b.String())
	}
	return args, nil
}

// expand is an {env:FORMAT} segment's words for one VAR=VALUE.
func (s segment) expand(kv string) []string {
	vals := []string{kv}
	if strings.Count(strings.Join(s.format, " "), "%s") == 2 {
		name, value, _ := strings.Cut(kv, "=")
		vals = []string{name, value}
	}
	out := make([]string, len(s.format))
	for i, f := range s.format {
		for strings.Contains(f, "%s") && len(vals) > 0 {
			f = strings.Replace(f, "%s", vals[0], 1)
			vals = vals[1:]
		}
		out[i] = f
	}
	return out
}

// The launchers collmux knows by the --version of their mpirun.
func openMPILauncher(mpirun string) launcher {
	return launcher{[][]segment{{{text: mpirun}}, {{text: "-np"}}, {{name: "np"}}, {{name: "env", format: []string{"-x", "%s"}}}, {{name: "prog"}}}}
}

func mpichLauncher(mpirun string) launcher {
	return launcher{[][]segment{{{text: mpirun}}, {{text: "-n"}}, {{name: "np"}}, {{name: "env", format: []string{"-genv", "%s", "%s"}}}, {{name: "prog"}}}}
}

// detectLauncher picks the flags of the MPI that mpirun belongs to, from
// what `mpirun --version` says: Open MPI's (also where it says nothing
// known, with a note), or Hydra's (MPICH, MVAPICH, Intel MPI).
func detectLauncher(mpirun string) (l launcher, note string, err error) {
	out, err := exec.Command(mpirun, "--version").CombinedOutput()
	text := string(out)
	var notFound *exec.Error
	switch {
	case errors.As(err, &notFound):
		return l, "", fmt.Errorf("--mpirun %s: %v (or give --launcher)", mpirun, notFound.Err)
	case err != nil && len(out) == 0:
		return l, "", fmt.Errorf("--mpirun %s: %v (or give --launcher)", mpirun, err)
	case strings.Contains(text, "Open MPI") || strings.Contains(text, "OpenRTE") || strings.Contains(text, "PRRTE"):
		return openMPILauncher(mpirun), "", nil
	case strings.Contains(text, "HYDRA") || strings.Contains(text, "MPICH") || strings.Contains(text, "Intel(R) MPI"):
		return mpichLauncher(mpirun), "", nil
	}
	return openMPILauncher(mpirun), fmt.Sprintf("%s --version names neither Open MPI nor MPICH (Hydra): using Open MPI's flags; give --launcher if they are wrong", mpirun), nil
}

// shellQuote writes args as a shell would need them.
func shellQuote(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = a
		if a == "" || strings.ContainsFunc(a, func(r rune) bool {
			return !(r < 128 && (unicode.IsLetter(r) || unicode.IsDigit(r)) || strings.ContainsRune("@%+=:,./_-", r))
		}) {
			q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(q, " ")
}

package main

// The functions collmux does not serve on device memory: capi/unserved.tab
// (written by internal/genunserved from the MPI Forum's description of the
// MPI API) becomes their exported wrappers (capi/zunserved.c), the tables
// the library reports from (mpi/zunserved.c, internal/cmx/zunserved.h) and
// the section of docs/design.md that says what collmux does with each MPI
// function.

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// ucat is a category of unserved.tab: why collmux does not serve its
// functions on device memory, and whether it wraps them at all.
type ucat struct {
	name, reason string
	wrapped      bool // false: the address only; passed through, not exported
}

// ucats are the categories, in the order of the C enum CMX_UCAT_*.
var ucats = []ucat{
	{"rma", "one-sided communication", true},
	{"io", "MPI-IO", true},
	{"pack", "packing and unpacking", true},
	{"bsend", "the buffer of buffered sends", true},
	{"partitioned", "partitioned communication", true},
	{"p2p", "nonblocking send-receive", true},
	{"tool", "the MPI tool information interface", true},
	{"address", "", false},
}

func ucatByName(name string) (ucat, bool) {
	for _, c := range ucats {
		if c.name == name {
			return c, true
		}
	}
	return ucat{}, false
}

// cparam is one C parameter of an unserved function.
type cparam struct {
	mpiType string // as the standard writes it: "const void *", "MPI_Count *", "const char []"
	ctype   string // as collmux passes it: "const void *", "cmx_count *", "cmx_h "
	name    string
}

// ufn is one line of unserved.tab.
type ufn struct {
	name     string // MPI_Put_c
	category string
	buffers  []string
	params   []cparam
	base     int // for a _c function, the index of its int-count twin; -1 otherwise
}

// handles are the MPI handle types, passed by value as cmx_h (pointers in
// Open MPI, ints in MPICH: forwarded untouched).
var handles = map[string]bool{"MPI_Comm": true, "MPI_Datatype": true, "MPI_Op": true, "MPI_Win": true, "MPI_File": true,
	"MPI_Info": true, "MPI_Session": true, "MPI_T_cvar_handle": true, "MPI_T_pvar_handle": true, "MPI_T_pvar_session": true}

// scalars are the by-value number types and how collmux writes them.
var scalars = map[string]string{"int": "int ", "MPI_Aint": "cmx_aint ", "MPI_Count": "cmx_count ", "MPI_Offset": "cmx_offset "}

// collmuxType maps a standard C parameter type to the one collmux's
// wrappers declare: handles as cmx_h; pointers to handles, statuses and
// requests as void * (their width depends on the ABI); buffers and
// pointers to numbers as themselves.
func collmuxType(t string) (string, error) {
	switch {
	case t == "const void *" || t == "void *":
		return t, nil
	case t == "const char []":
		return "const char *", nil
	case t == "int *":
		return "int *", nil
	case t == "MPI_Aint *":
		return "cmx_aint *", nil
	case t == "MPI_Count *":
		return "cmx_count *", nil
	case strings.HasSuffix(t, " *") && (handles[strings.TrimSuffix(t, " *")] || t == "MPI_Status *" || t == "MPI_Request *"):
		return "void *", nil
	case handles[t]:
		return "cmx_h ", nil
	case scalars[t] != "":
		return scalars[t], nil
	}
	return "", fmt.Errorf("C type %q: genwrap does not know how collmux passes it", t)
}

var paramRE = regexp.MustCompile(`^(.*?)\s*(\**)\s*([A-Za-z_][A-Za-z0-9_]*)(\[\])?$`)

func parseParams(list string) ([]cparam, error) {
	var out []cparam
	for _, p := range strings.Split(list, ",") {
		m := paramRE.FindStringSubmatch(strings.TrimSpace(p))
		if m == nil || m[1] == "" {
			return nil, fmt.Errorf("parameter %q: want a C declaration", p)
		}
		t := m[1]
		if m[2] != "" {
			t += " " + m[2]
		}
		if m[4] != "" {
			t += " []"
		}
		ct, err := collmuxType(t)
		if err != nil {
			return nil, err
		}
		out = append(out, cparam{t, ct, m[3]})
	}
	return out, nil
}

func readUnserved(path string) ([]ufn, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var fns []ufn
	index := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		head, list, ok := strings.Cut(line, "(")
		fields := strings.Fields(head)
		if !ok || !strings.HasSuffix(list, ")") || len(fields) != 3 {
			return nil, fmt.Errorf("%s:%d: want name category buffers (parameters)", path, n)
		}
		fn := ufn{name: fields[0], category: fields[1], buffers: strings.Split(fields[2], ","), base: -1}
		if _, ok := ucatByName(fn.category); !ok {
			return nil, fmt.Errorf("%s:%d: unknown category %q", path, n, fn.category)
		}
		if fn.params, err = parseParams(strings.TrimSuffix(list, ")")); err != nil {
			return nil, fmt.Errorf("%s:%d: %s: %v", path, n, fn.name, err)
		}
		for _, b := range fn.buffers {
			if p, ok := fn.param(b); !ok || !strings.HasSuffix(p.ctype, "void *") {
				return nil, fmt.Errorf("%s:%d: %s: buffer %s is not a void * parameter", path, n, fn.name, b)
			}
		}
		if base, ok := strings.CutSuffix(fn.name, "_c"); ok {
			i, ok := index[base]
			if !ok {
				return nil, fmt.Errorf("%s:%d: %s does not follow its int-count twin %s", path, n, fn.name, base)
			}
			fn.base = i
			if _, err := narrowing(fns[i], fn); err != nil {
				return nil, fmt.Errorf("%s:%d: %v", path, n, err)
			}
		}
		if _, dup := index[fn.name]; dup {
			return nil, fmt.Errorf("%s:%d: %s twice", path, n, fn.name)
		}
		index[fn.name] = len(fns)
		fns = append(fns, fn)
	}
	return fns, sc.Err()
}

func (f ufn) param(name string) (cparam, bool) {
	for _, p := range f.params {
		if p.name == name {
			return p, true
		}
	}
	return cparam{}, false
}

func (f ufn) wrapped() bool { c, _ := ucatByName(f.category); return c.wrapped }

// enum is the C name of f's index: CMX_UFN_PUT_C.
func (f ufn) enum() string { return "CMX_UFN_" + upper(strings.TrimPrefix(f.name, "MPI_")) }

// errh says whose error handler a refused call raises its error on, and the
// parameter holding that object ("0": none).
func (f ufn) errh() (kind, obj string) {
	if f.category == "tool" {
		return "CMX_ERRH_NONE", "0" // MPI_T calls return their error; there is no handler
	}
	for _, want := range []struct{ t, kind string }{{"MPI_Win", "CMX_ERRH_WIN"}, {"MPI_File", "CMX_ERRH_FILE"},
		{"MPI_Comm", "CMX_ERRH_COMM"}, {"MPI_Session", "CMX_ERRH_SESSION"}} {
		for _, p := range f.params {
			if p.mpiType == want.t {
				return want.kind, p.name
			}
		}
	}
	return "CMX_ERRH_WORLD", "0" // no object: MPI_COMM_WORLD's, as Open MPI 4.1 and MPICH 4.0 raise such errors
}

// request is the name of f's MPI_Request * parameter, "NULL" when none: a
// refused call sets it to MPI_REQUEST_NULL.
func (f ufn) request() string {
	for _, p := range f.params {
		if p.mpiType == "MPI_Request *" {
			return p.name
		}
	}
	return "NULL"
}

func (f ufn) ptrType() string {
	var ts []string
	for _, p := range f.params {
		ts = append(ts, strings.TrimSpace(p.ctype))
	}
	return "int (*)(" + strings.Join(ts, ", ") + ")"
}

// narrowing says how a _c function's arguments become those of its
// int-count twin, for an MPI that lacks the _c one (Open MPI 4.1): per
// parameter, the expression to pass, and the checks and temporaries that
// need. Values that do not fit fail with MPI_ERR_COUNT, as an MPI without
// large counts could only fail.
type narrowed struct {
	args   []string // the twin's arguments
	checks []string // conditions under which every value fits
	pre    []string // temporaries set before the call
	post   []string // copied back after it
}

func narrowing(base, large ufn) (narrowed, error) {
	var n narrowed
	if len(base.params) != len(large.params) {
		return n, fmt.Errorf("%s and %s differ in their parameters", base.name, large.name)
	}
	for i, b := range base.params {
		l := large.params[i]
		switch {
		case b.name != l.name:
			return n, fmt.Errorf("%s and %s differ in parameter %d (%s, %s)", base.name, large.name, i, b.name, l.name)
		case b.ctype == l.ctype:
			n.args = append(n.args, l.name)
		case b.ctype == "int " && (l.ctype == "cmx_count " || l.ctype == "cmx_aint "):
			n.checks = append(n.checks, fmt.Sprintf("cmx_fits_int(%s)", l.name))
			n.args = append(n.args, "(int)"+l.name)
		case b.ctype == "cmx_aint " && l.ctype == "cmx_count ":
			n.args = append(n.args, "(cmx_aint)"+l.name) // one width on every platform collmux builds for
		case b.ctype == "cmx_aint *" && l.ctype == "cmx_count *":
			n.args = append(n.args, "(cmx_aint *)"+l.name)
		case b.ctype == "int *" && l.ctype == "cmx_count *":
			// an in-out count (MPI_Pack's position): an int copy, copied back
			n.checks = append(n.checks, fmt.Sprintf("(!%s || cmx_fits_int(*%s))", l.name, l.name))
			n.pre = append(n.pre, fmt.Sprintf("int %s_n = %s ? (int)*%s : 0;", l.name, l.name, l.name))
			n.args = append(n.args, fmt.Sprintf("%s ? &%s_n : NULL", l.name, l.name))
			n.post = append(n.post, fmt.Sprintf("if (%s)\n\t\t\t\t*%s = %s_n;", l.name, l.name, l.name))
		default:
			return n, fmt.Errorf("%s: parameter %s is %s in %s: genwrap cannot narrow it", large.name, l.name, b.mpiType, base.name)
		}
	}
	return n, nil
}

const unservedHeader = "// Code generated by internal/genwrap from capi/unserved.tab; DO NOT EDIT.\n\n"

// genUnservedH writes the C enums of the wrapped functions and the
// categories.
func genUnservedH(fns []ufn) []byte {
	var b bytes.Buffer
	b.WriteString(unservedHeader)
	b.WriteString("#ifndef CMX_ZUNSERVED_H\n#define CMX_ZUNSERVED_H\n\n")
	b.WriteString("/* Why collmux does not serve a function on device memory. */\nenum {\n")
	for _, c := range ucats {
		if c.wrapped {
			fmt.Fprintf(&b, "\tCMX_UCAT_%s,\n", upper(c.name))
		}
	}
	b.WriteString("\tCMX_NUCAT\n};\n\n")
	b.WriteString("/* The functions of capi/unserved.tab collmux exports (not the address-only ones). */\nenum {\n")
	for _, f := range fns {
		if f.wrapped() {
			fmt.Fprintf(&b, "\t%s,\n", f.enum())
		}
	}
	b.WriteString("\tCMX_NUFN\n};\n\n#endif\n")
	return b.Bytes()
}

// genUnservedTables writes what the library reports from: each function's
// name, category, error handler and int-count twin, and each category's
// name and reason.
func genUnservedTables(fns []ufn) []byte {
	var b bytes.Buffer
	b.WriteString(unservedHeader)
	b.WriteString("#include \"cmx.h\"\n\n")
	b.WriteString("const char *const cmx_ucat_names[CMX_NUCAT] = {")
	for _, c := range ucats {
		if c.wrapped {
			fmt.Fprintf(&b, "%q, ", c.name)
		}
	}
	b.WriteString("};\n\nconst char *const cmx_ucat_reasons[CMX_NUCAT] = {\n")
	for _, c := range ucats {
		if c.wrapped {
			fmt.Fprintf(&b, "\t%q,\n", c.reason)
		}
	}
	b.WriteString("};\n\nconst cmx_ufn_info cmx_ufn[CMX_NUFN] = {\n")
	for _, f := range fns {
		if !f.wrapped() {
			continue
		}
		kind, _ := f.errh()
		base := "-1"
		if f.base >= 0 {
			base = fns[f.base].enum()
		}
		fmt.Fprintf(&b, "\t{%q, CMX_UCAT_%s, %s, %s},\n", f.name, upper(f.category), kind, base)
	}
	b.WriteString("};\n")
	return b.Bytes()
}

// genUnservedWrappers writes the exported entry points: forwarded at once
// while no CUDA context is up (one load, as every intercepted call);
// otherwise a device buffer fails the call, and a function the MPI lacks
// fails too, unless it is a _c one whose int-count twin can take its values.
// Each export is an ifunc whose resolver answers null where the MPI lacks
// the function (and its twin), as the program would find it without
// collmux (mpi/unserved.c).
func genUnservedWrappers(fns []ufn) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(unservedHeader)
	b.WriteString("#include \"cmx.h\"\n\n")
	for _, f := range fns {
		if !f.wrapped() {
			continue
		}
		var decl, call, dev []string
		for _, p := range f.params {
			decl = append(decl, p.ctype+p.name)
			call = append(call, p.name)
		}
		for _, buf := range f.buffers {
			dev = append(dev, "cmx_on_device("+buf+")")
		}
		_, obj := f.errh()
		req := f.request()
		fmt.Fprintf(&b, "static int wrap_%s(%s)\n{\n", f.name, strings.Join(decl, ", "))
		fmt.Fprintf(&b, "\tif (CMX_UNLIKELY(!cmx_unserved_pass(%s))) {\n", f.enum())
		fmt.Fprintf(&b, "\t\tif (%s)\n\t\t\treturn cmx_unserved_refuse(%s, %s, %s, CMX_REFUSE_DEVICE);\n", strings.Join(dev, " || "), f.enum(), obj, req)
		if f.base < 0 {
			fmt.Fprintf(&b, "\t\tif (!cmx_upmpi[%s])\n\t\t\treturn cmx_unserved_refuse(%s, %s, %s, CMX_REFUSE_ABSENT);\n", f.enum(), f.enum(), obj, req)
		} else {
			base := fns[f.base]
			n, err := narrowing(base, f)
			if err != nil {
				return nil, err
			}
			fmt.Fprintf(&b, "\t\tif (!cmx_upmpi[%s]) {\n", f.enum())
			fmt.Fprintf(&b, "\t\t\tif (!cmx_upmpi[%s])\n\t\t\t\treturn cmx_unserved_refuse(%s, %s, %s, CMX_REFUSE_ABSENT);\n", base.enum(), f.enum(), obj, req)
			if len(n.checks) > 0 {
				fmt.Fprintf(&b, "\t\t\tif (!(%s))\n\t\t\t\treturn cmx_unserved_fail(%s, %s, %s, CMX_ERR_COUNT);\n", strings.Join(n.checks, " && "), f.enum(), obj, req)
			}
			for _, s := range n.pre {
				fmt.Fprintf(&b, "\t\t\t%s\n", s)
			}
			call := fmt.Sprintf("((%s)cmx_upmpi[%s])(%s)", base.ptrType(), base.enum(), strings.Join(n.args, ", "))
			if len(n.post) == 0 {
				fmt.Fprintf(&b, "\t\t\treturn %s;\n\t\t}\n", call)
			} else {
				fmt.Fprintf(&b, "\t\t\tint rc = %s;\n", call)
				for _, s := range n.post {
					fmt.Fprintf(&b, "\t\t\t%s\n", s)
				}
				b.WriteString("\t\t\treturn rc;\n\t\t}\n")
			}
		}
		b.WriteString("\t}\n")
		fmt.Fprintf(&b, "\treturn ((%s)cmx_upmpi[%s])(%s);\n}\n\n", f.ptrType(), f.enum(), strings.Join(call, ", "))
		pbase := "NULL"
		if f.base >= 0 {
			pbase = fmt.Sprintf("%q", "P"+fns[f.base].name)
		}
		fmt.Fprintf(&b, "static void *resolve_%s(void) { return cmx_export_unless_absent((void *)wrap_%s, %q, %s); }\n", f.name, f.name, "P"+f.name, pbase)
		fmt.Fprintf(&b, "CMX_EXPORT int %s(%s) __attribute__((ifunc(\"resolve_%s\")));\n\n", f.name, strings.Join(decl, ", "), f.name)
	}
	return b.Bytes(), nil
}

// The section of docs/design.md between these markers is generated.
const (
	docBegin = "<!-- generated by internal/genwrap from capi/collectives.tab and capi/unserved.tab: edit those, then `make generate` -->\n"
	docEnd   = "<!-- end of generated section -->\n"
)

// withTwins lists names, a _c twin folded into its base: `MPI_Put`(`_c`).
func withTwins(names []string) string {
	has := map[string]bool{}
	for _, n := range names {
		has[n] = true
	}
	var out []string
	for _, n := range names {
		if strings.HasSuffix(n, "_c") && has[strings.TrimSuffix(n, "_c")] {
			continue
		}
		s := "`" + n + "`"
		if has[n+"_c"] {
			s = "`" + n + "`(`_c`)"
		}
		out = append(out, s)
	}
	return strings.Join(out, ", ")
}

// genDesign returns docs/design.md with its generated section made from
// the two tables.
func genDesign(design []byte, colls []coll, fns []ufn) ([]byte, error) {
	before, rest, ok := bytes.Cut(design, []byte(docBegin))
	_, after, ok2 := bytes.Cut(rest, []byte(docEnd))
	if !ok || !ok2 {
		return nil, fmt.Errorf("docs/design.md: the generated section's markers are missing")
	}
	var b bytes.Buffer
	b.Write(before)
	b.WriteString(docBegin)
	var coll, p2p []string
	for _, c := range colls {
		names := []string{"MPI_" + c.name}
		if len(variants(c)) == 2 {
			names = append(names, "MPI_"+c.name+"_c")
		}
		if c.p2p {
			p2p = append(p2p, names...)
		} else {
			coll = append(coll, names...)
		}
	}
	fmt.Fprintf(&b, "**Intercepted and served** on host, device and managed memory (`capi/collectives.tab`, %d C functions, large-count twins included):\n\n", len(coll)+len(p2p))
	fmt.Fprintf(&b, "- collectives: %s;\n- point-to-point: %s.\n\n", withTwins(coll), withTwins(p2p))
	nwrapped := 0
	for _, f := range fns {
		if f.wrapped() {
			nwrapped++
		}
	}
	fmt.Fprintf(&b, "**Refused on device memory** (`capi/unserved.tab`, %d C functions): collmux exports them and passes them straight to the MPI, but a buffer in device memory fails the call with `MPI_ERR_OTHER` and one message per function (`collmux: MPI_Put: device memory is not supported for one-sided communication (rma) ...`) instead of reaching an MPI that would fault on it.\n\n", nwrapped)
	b.WriteString("| category | what collmux does not serve on device memory | functions |\n| --- | --- | --- |\n")
	for _, c := range ucats {
		var names []string
		for _, f := range fns {
			if f.category == c.name {
				names = append(names, f.name)
			}
		}
		if !c.wrapped || len(names) == 0 {
			continue
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", c.name, c.reason, withTwins(names))
	}
	var addr []string
	for _, f := range fns {
		if !f.wrapped() {
			addr = append(addr, f.name)
		}
	}
	fmt.Fprintf(&b, "\n**Passed through**: %s take a buffer's address only, never its bytes, and are not intercepted; neither is any MPI function without a buffer (communicators, datatypes, groups, info, attributes, topologies, errors, ...), except those named in this section.\n", withTwins(addr))
	b.WriteString(docEnd)
	b.Write(after)
	return b.Bytes(), nil
}

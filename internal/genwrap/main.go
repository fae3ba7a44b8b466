// Command genwrap generates the repetitive C surface of the interposer from
// data: capi/collectives.tab (which MPI functions are intercepted, with
// their parameters), capi/unserved.tab (the functions with buffers collmux
// does not serve on device memory; see internal/genunserved) and the
// predefined-handle tables of package mpi. It writes capi/zwrappers.c (the
// exported C entry points), capi/zfortran.c (the Fortran ones),
// mpi/zforward.c (the calls into the real MPI and the tables of the
// functions), mpi/zabi.c (predefined handles), internal/cmx/zcoll.h (the C
// enums), dispatch/zcoll.go (the Go ones), capi/zunserved.c,
// mpi/zunserved.c and internal/cmx/zunserved.h (the unserved functions'
// wrappers and tables) and the section of docs/design.md that lists what
// collmux does with each MPI function.
//
// Run it with `go generate ./capi` (or `make generate`); a test checks that
// the committed files are what it produces.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"log"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"collmux/mpi"
)

// param is one parameter kind of the table and how it looks in C.
type param struct {
	ctype, ctypeLarge string // C type in the int and the large-count (_c) variant
	field             string // assignment into cmx_args ("" = none)
	name              string
}

var params = map[string]param{
	"sbuf":    {"const void *", "const void *", "a.sbuf = sbuf;", "sbuf"},
	"rbuf":    {"void *", "void *", "a.rbuf = rbuf;", "rbuf"},
	"buf":     {"void *", "void *", "a.sbuf = buf; a.rbuf = buf;", "buf"},
	"count":   {"int ", "cmx_count ", "a.scount = count; a.rcount = count;", "count"},
	"scount":  {"int ", "cmx_count ", "a.scount = scount;", "scount"},
	"rcount":  {"int ", "cmx_count ", "a.rcount = rcount;", "rcount"},
	"scounts": {"const int *", "const cmx_count *", "a.scounts = scounts;", "scounts"},
	"rcounts": {"const int *", "const cmx_count *", "a.rcounts = rcounts;", "rcounts"},
	"sdispls": {"const int *", "const cmx_aint *", "a.sdispls = sdispls;", "sdispls"},
	"rdispls": {"const int *", "const cmx_aint *", "a.rdispls = rdispls;", "rdispls"},
	"dtype":   {"cmx_h ", "cmx_h ", "a.stype = dtype; a.rtype = dtype;", "dtype"},
	"stype":   {"cmx_h ", "cmx_h ", "a.stype = stype;", "stype"},
	"rtype":   {"cmx_h ", "cmx_h ", "a.rtype = rtype;", "rtype"},
	"op":      {"cmx_h ", "cmx_h ", "a.op = op;", "op"},
	"root":    {"int ", "int ", "a.root = root;", "root"},
	"comm":    {"cmx_h ", "cmx_h ", "a.comm = comm;", "comm"},
	"dest":    {"int ", "int ", "a.dest = dest;", "dest"},
	"source":  {"int ", "int ", "a.source = source;", "source"},
	"tag":     {"int ", "int ", "a.stag = tag; a.rtag = tag;", "tag"},
	"stag":    {"int ", "int ", "a.stag = stag;", "stag"},
	"rtag":    {"int ", "int ", "a.rtag = rtag;", "rtag"},
	"status":  {"void *", "void *", "a.status = status;", "status"},
	"req":     {"void *", "void *", "a.req = req;", "req"},
	"info":    {"cmx_h ", "cmx_h ", "a.info = info;", "info"},
	"msg":     {"void *", "void *", "a.msg = msg;", "msg"},
	"stypes":  {"const void *", "const void *", "a.stypes = stypes;", "stypes"},
	"rtypes":  {"const void *", "const void *", "a.rtypes = rtypes;", "rtypes"},
	// the Aint width in both variants: narrowing must leave them alone
	"sadispls": {"const cmx_aint *", "const cmx_aint *", "a.sdispls = sadispls;", "sadispls"},
	"radispls": {"const cmx_aint *", "const cmx_aint *", "a.rdispls = radispls;", "radispls"},
}

// forwardExpr is how cmx_forward reads each parameter back out of cmx_args.
var forwardExpr = map[string][2]string{ // int variant, large variant
	"sbuf": {"a->sbuf", "a->sbuf"}, "rbuf": {"a->rbuf", "a->rbuf"}, "buf": {"a->rbuf", "a->rbuf"},
	"count": {"(int)a->scount", "a->scount"}, "scount": {"(int)a->scount", "a->scount"}, "rcount": {"(int)a->rcount", "a->rcount"},
	"scounts": {"a->scounts", "a->scounts"}, "rcounts": {"a->rcounts", "a->rcounts"},
	"sdispls": {"a->sdispls", "a->sdispls"}, "rdispls": {"a->rdispls", "a->rdispls"},
	"dtype": {"a->stype", "a->stype"}, "stype": {"a->stype", "a->stype"}, "rtype": {"a->rtype", "a->rtype"},
	"op": {"a->op", "a->op"}, "root": {"a->root", "a->root"}, "comm": {"a->comm", "a->comm"},
	"dest": {"a->dest", "a->dest"}, "source": {"a->source", "a->source"}, "tag": {"a->stag", "a->stag"},
	"stag": {"a->stag", "a->stag"}, "rtag": {"a->rtag", "a->rtag"}, "status": {"a->status", "a->status"},
	"req": {"a->req", "a->req"}, "info": {"a->info", "a->info"}, "msg": {"a->msg", "a->msg"},
	"stypes": {"a->stypes", "a->stypes"}, "rtypes": {"a->rtypes", "a->rtypes"},
	"sadispls": {"a->sdispls", "a->sdispls"}, "radispls": {"a->rdispls", "a->rdispls"},
}

// coll is one line of the table: an intercepted function.
type coll struct {
	name   string
	family string // what statistics and rules call it (allreduce for Iallreduce)
	p2p    bool   // a point-to-point family
	local  bool   // a family without a communicator
	form   byte   // 'b' blocking, 'i' nonblocking, 'p' persistent
	params []string
	bufs   family // its family's buffer rules
}

// family is a family line of the table: its buffer rules.
type family struct {
	who, span [2]string // per side (send, receive): "all", "root", "leaf" or "none"; the span
	sized     int       // the side (0 send, 1 receive) that gives the message size
	uneven    bool      // the message size may differ between ranks
}

var whoNames = map[string]string{"all": "CMX_WHO_ALL", "root": "CMX_WHO_ROOT", "leaf": "CMX_WHO_LEAF", "none": "0"}
var spanNames = map[string]string{"one": "CMX_SPAN_ONE", "each": "CMX_SPAN_EACH", "v": "CMX_SPAN_V", "w": "CMX_SPAN_W",
	"total": "CMX_SPAN_TOTAL", "own": "CMX_SPAN_OWN", "": "0"}

// parseFamily reads "family NAME SEND RECV [uneven]".
func parseFamily(fields []string) (string, family, error) {
	var f family
	if len(fields) < 4 || len(fields) > 5 || (len(fields) == 5 && fields[4] != "uneven") {
		return "", f, fmt.Errorf("want family NAME SEND RECV [uneven]")
	}
	f.uneven, f.sized = len(fields) == 5, -1
	for w, side := range fields[2:4] {
		if strings.HasSuffix(side, "*") {
			if f.sized >= 0 {
				return "", f, fmt.Errorf("two sides marked * (the message size)")
			}
			f.sized, side = w, strings.TrimSuffix(side, "*")
		}
		who, span, _ := strings.Cut(side, ":")
		if whoNames[who] == "" || spanNames[span] == "" || (who == "none") != (span == "") {
			return "", f, fmt.Errorf("side %q: want who:span (who all, root or leaf; span one, each, v, w, total or own) or none", side)
		}
		f.who[w], f.span[w] = who, span
	}
	if f.sized < 0 && (f.who[0] != "none" || f.who[1] != "none") {
		return "", f, fmt.Errorf("no side marked * (the message size)")
	}
	f.sized = max(f.sized, 0)
	return fields[1], f, nil
}

// class is what a family is: CMX_CLASS_* in C.
func (c coll) class() string {
	switch {
	case c.p2p:
		return "CMX_CLASS_P2P"
	case c.local:
		return "CMX_CLASS_LOCAL"
	}
	return "CMX_CLASS_COLLECTIVE"
}

// families lists the distinct families of the table in order of first
// appearance (the C enum CMX_COLL_*), with the class of each.
func families(colls []coll) (names, classes []string) {
	for _, c := range firstOfFamilies(colls) {
		names = append(names, c.family)
		classes = append(classes, c.class())
	}
	return names, classes
}

// firstOfFamilies lists the first function of each family, in family order.
func firstOfFamilies(colls []coll) []coll {
	seen := map[string]bool{}
	var first []coll
	for _, c := range colls {
		if !seen[c.family] {
			seen[c.family] = true
			first = append(first, c)
		}
	}
	return first
}

// nonblocking is the name of the nonblocking function a persistent one
// starts (Allreduce_init: Iallreduce, Send_init: Isend).
func nonblocking(c coll) string {
	base := strings.TrimSuffix(c.name, "_init")
	return "I" + strings.ToLower(base[:1]) + base[1:]
}

var formNames = map[byte]string{'b': "CMX_FORM_BLOCKING", 'i': "CMX_FORM_NONBLOCKING", 'p': "CMX_FORM_PERSISTENT"}

func main() {
	root := flag.String("root", ".", "repository root")
	flag.Parse()
	out, err := generate(*root)
	if err != nil {
		log.Fatal(err)
	}
	for name, b := range out {
		if err := os.WriteFile(filepath.Join(*root, name), b, 0o644); err != nil {
			log.Fatal(err)
		}
	}
}

// generate returns the generated files, by path relative to root.
func generate(root string) (map[string][]byte, error) {
	colls, err := readTable(filepath.Join(root, "capi", "collectives.tab"))
	if err != nil {
		return nil, err
	}
	enums, err := readEnums(root)
	if err != nil {
		return nil, err
	}
	fns, err := readUnserved(filepath.Join(root, "capi", "unserved.tab"))
	if err != nil {
		return nil, err
	}
	for _, f := range fns {
		for _, c := range colls {
			if f.name == "MPI_"+c.name || f.name == "MPI_"+c.name+"_c" {
				return nil, fmt.Errorf("capi/unserved.tab: %s is intercepted (capi/collectives.tab)", f.name)
			}
		}
	}
	wrappers, err := genUnservedWrappers(fns)
	if err != nil {
		return nil, err
	}
	design, err := os.ReadFile(filepath.Join(root, "docs", "design.md"))
	if err != nil {
		return nil, err
	}
	if design, err = genDesign(design, colls, fns); err != nil {
		return nil, err
	}
	return map[string][]byte{
		"internal/cmx/zcoll.h":     genHeader(colls, enums),
		"capi/zwrappers.c":         libOnly(genWrappers(colls)),
		"mpi/zforward.c":           libOnly(genForward(colls)),
		"capi/zfortran.c":          libOnly(genFortran(colls)),
		"mpi/zabi.c":               libOnly(genABI()),
		"dispatch/zcoll.go":        genGo(colls),
		"internal/cmx/zunserved.h": genUnservedH(fns),
		"mpi/zunserved.c":          libOnly(genUnservedTables(fns)),
		"capi/zunserved.c":         libOnly(wrappers),
		"docs/design.md":           design,
	}, nil
}

func readTable(path string) ([]coll, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var colls []coll
	fams := map[string]family{}
	used := map[string]bool{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		fields := strings.Fields(line)
		if fields[0] == "family" {
			name, fam, err := parseFamily(fields)
			if _, dup := fams[name]; err == nil && dup {
				err = fmt.Errorf("family %s twice", name)
			}
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %v", path, n, err)
			}
			fams[name] = fam
			continue
		}
		if len(fields) < 3 {
			return nil, fmt.Errorf("%s:%d: want name family [p2p|local] form parameters...", path, n)
		}
		c := coll{name: fields[0], family: fields[1]}
		fam, ok := fams[c.family]
		if !ok {
			return nil, fmt.Errorf("%s:%d: family %s has no family line before it", path, n, c.family)
		}
		c.bufs, used[c.family] = fam, true
		rest := fields[2:]
		switch rest[0] {
		case "p2p":
			c.p2p, rest = true, rest[1:]
		case "local":
			c.local, rest = true, rest[1:]
		}
		if len(rest) == 0 || len(rest[0]) != 1 || formNames[rest[0][0]] == "" {
			return nil, fmt.Errorf("%s:%d: want a form (b, i or p) after the family", path, n)
		}
		c.form, c.params = rest[0][0], rest[1:]
		for _, p := range c.params {
			if _, ok := params[p]; !ok {
				return nil, fmt.Errorf("%s:%d: unknown parameter kind %q", path, n, p)
			}
		}
		colls = append(colls, c)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	for name := range fams {
		if !used[name] {
			return nil, fmt.Errorf("%s: family %s has no functions", path, name)
		}
	}
	names := map[string]bool{}
	for _, c := range colls {
		names[c.name] = true
	}
	for _, c := range colls {
		if c.form == 'p' && !names[nonblocking(c)] {
			return nil, fmt.Errorf("%s: %s has no nonblocking twin %s in the table", path, c.name, nonblocking(c))
		}
	}
	return colls, nil
}

const header = "// Code generated by internal/genwrap from capi/collectives.tab and package mpi; DO NOT EDIT.\n\n"

func upper(s string) string { return strings.ToUpper(s) }

// libOnly puts C for package mpi behind the build tag of the library
// build: package mpi is also plain Go for the collmux tool, which links
// none of the library's C.
func libOnly(src []byte) []byte { return append([]byte("//go:build collmux_lib\n\n"), src...) }

// goEnum is a Go enum whose values C uses too: its C names are made from
// the Go constants' names (less a prefix), so the two cannot drift apart.
type goEnum struct {
	file, typ, strip string // where the const block is, its type, what to drop from each name
	prefix, count    string // the C names' prefix; the C name of the Num* constant ("" if none)
	values           []string
}

var goEnums = []goEnum{
	{file: "mpi/abi.go", typ: "ABI", strip: "ABI", prefix: "CMX_ABI_"},
	{file: "dispatch/dispatch.go", typ: "Mem", prefix: "CMX_MEM_", count: "CMX_NMEM"},
	{file: "dispatch/rules.go", typ: "DClass", strip: "D", prefix: "CMX_DCLASS_", count: "CMX_NDCLASS"},
	{file: "dispatch/dispatch.go", typ: "Backend", prefix: "CMX_BACKEND_", count: "CMX_NBACKEND"},
	{file: "dispatch/config.go", typ: "FusedAlgo", strip: "Algo", prefix: "CMX_ALGO_"},
	{file: "dispatch/config.go", typ: "LogLevel", strip: "Log", prefix: "CMX_LOG_"},
}

// readEnums reads each goEnum's constants, in order, from its Go source:
// the const block whose first constant has the enum's type and iota.
func readEnums(root string) ([]goEnum, error) {
	out := append([]goEnum(nil), goEnums...)
	for i := range out {
		e := &out[i]
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(root, e.file), nil, 0)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST || len(g.Specs) == 0 {
				continue
			}
			first := g.Specs[0].(*ast.ValueSpec)
			if t, ok := first.Type.(*ast.Ident); !ok || t.Name != e.typ {
				continue
			}
			for _, sp := range g.Specs {
				for _, n := range sp.(*ast.ValueSpec).Names {
					e.values = append(e.values, n.Name)
				}
			}
		}
		if len(e.values) == 0 {
			return nil, fmt.Errorf("%s: no const block of type %s", e.file, e.typ)
		}
	}
	return out, nil
}

func genHeader(colls []coll, enums []goEnum) []byte {
	var b bytes.Buffer
	b.WriteString(header)
	b.WriteString("#ifndef CMX_ZCOLL_H\n#define CMX_ZCOLL_H\n\n")
	b.WriteString("/* Enums shared with Go, named after its constants. */\n")
	for _, e := range enums {
		var names []string
		for _, v := range e.values {
			if strings.HasPrefix(v, "Num") {
				if e.count != "" {
					names = append(names, e.count)
				}
				continue
			}
			names = append(names, e.prefix+upper(strings.TrimPrefix(v, e.strip)))
		}
		fmt.Fprintf(&b, "enum { %s }; /* %s.%s */\n", strings.Join(names, ", "), filepath.Dir(e.file), e.typ)
	}
	b.WriteString("\n")
	b.WriteString("/* Families (collectives, then point-to-point), in table order. */\nenum {\n")
	fams, _ := families(colls)
	for _, f := range fams {
		fmt.Fprintf(&b, "\tCMX_COLL_%s,\n", upper(f))
	}
	b.WriteString("\tCMX_NCOLL\n};\n\n")
	b.WriteString("/* Forms of a call. */\nenum { CMX_FORM_BLOCKING, CMX_FORM_NONBLOCKING, CMX_FORM_PERSISTENT };\n\n")
	b.WriteString("/* Classes of a family: collective over a communicator, point-to-point, or\n * local (no communicator). Only collectives may communicate on their path. */\n")
	b.WriteString("enum { CMX_CLASS_COLLECTIVE, CMX_CLASS_P2P, CMX_CLASS_LOCAL };\n\n")
	b.WriteString("/* Exported functions: each line of the table and its large-count twin (fn = 2*line + large). */\nenum {\n")
	for _, c := range colls {
		fmt.Fprintf(&b, "\tCMX_FN_%s,\n\tCMX_FN_%s_C,\n", upper(c.name), upper(c.name))
	}
	b.WriteString("\tCMX_NFN\n};\n\n")
	b.WriteString("/* Element kinds and ops, as in package mpi. */\nenum {\n")
	for _, k := range kinds() {
		fmt.Fprintf(&b, "\tCMX_KIND_%s,\n", upper(k.String()))
	}
	b.WriteString("\tCMX_NKIND\n};\nenum {\n")
	for _, o := range ops() {
		fmt.Fprintf(&b, "\tCMX_OP_%s,\n", upper(o.String()))
	}
	b.WriteString("\tCMX_NOP\n};\n\n#endif\n")
	return b.Bytes()
}

func signature(c coll, large bool) (decl, call string) {
	var ds, cs []string
	for _, p := range c.params {
		pp := params[p]
		t := pp.ctype
		if large {
			t = pp.ctypeLarge
		}
		ds = append(ds, t+pp.name)
		cs = append(cs, pp.name)
	}
	return strings.Join(ds, ", "), strings.Join(cs, ", ")
}

func ptrType(c coll, large bool) string {
	var ts []string
	for _, p := range c.params {
		pp := params[p]
		t := pp.ctype
		if large {
			t = pp.ctypeLarge
		}
		ts = append(ts, strings.TrimSpace(t))
	}
	return "int (*)(" + strings.Join(ts, ", ") + ")"
}

func fnName(c coll, large bool) string {
	if large {
		return "CMX_FN_" + upper(c.name) + "_C"
	}
	return "CMX_FN_" + upper(c.name)
}

func genWrappers(colls []coll) []byte {
	var b bytes.Buffer
	b.WriteString(header)
	b.WriteString("#include \"cmx.h\"\n\n")
	for _, c := range colls {
		for _, large := range variants(c) {
			name, fn := "MPI_"+c.name, fnName(c, large)
			if large {
				name += "_c"
			}
			decl, call := signature(c, large)
			// The wrapper's first test is loads only, so that the
			// pass-through of a job that never leaves MPI sets up no
			// stack frame; everything else (initialisation, the CUDA
			// probe, the call's descriptor) is in route_*.
			fmt.Fprintf(&b, "static CMX_NOINLINE int route_%s(%s)\n{\n", name, decl)
			fmt.Fprintf(&b, "\tif (cmx_passthrough(%s))\n", fn)
			fmt.Fprintf(&b, "\t\treturn ((%s)cmx_pmpi[%s])(%s);\n", ptrType(c, large), fn, call)
			fmt.Fprintf(&b, "\tcmx_args a = {.fn = %s, .coll = CMX_COLL_%s, .form = %s, .large = %d, .root = -1};\n",
				fn, upper(c.family), formNames[c.form], btoi(large))
			for _, p := range c.params {
				fmt.Fprintf(&b, "\t%s\n", params[p].field)
			}
			b.WriteString("\treturn cmx_dispatch(&a);\n}\n\n")
			fmt.Fprintf(&b, "CMX_EXPORT int %s(%s)\n{\n", name, decl)
			fmt.Fprintf(&b, "\tif (CMX_LIKELY(cmx_forward_now(%s)))\n", fn)
			fmt.Fprintf(&b, "\t\treturn ((%s)cmx_pmpi[%s])(%s);\n", ptrType(c, large), fn, call)
			fmt.Fprintf(&b, "\treturn route_%s(%s);\n}\n\n", name, call)
		}
	}
	return b.Bytes()
}

// genForward writes the tables of the intercepted functions and the
// forwarder that calls the real MPI's function of a call.
func genForward(colls []coll) []byte {
	var b bytes.Buffer
	b.WriteString(header)
	b.WriteString("#include \"cmx.h\"\n\n")
	b.WriteString("const char *const cmx_fn_names[CMX_NFN] = {\n")
	for _, c := range colls {
		fmt.Fprintf(&b, "\t\"MPI_%s\", \"MPI_%s_c\",\n", c.name, c.name)
	}
	b.WriteString("};\n\n")
	b.WriteString("/* the nonblocking function a persistent one starts; -1 for the others */\nconst short cmx_fn_nb[CMX_NFN] = {\n")
	for _, c := range colls {
		if c.form != 'p' {
			b.WriteString("\t-1, -1,\n")
			continue
		}
		nb := coll{name: nonblocking(c)}
		fmt.Fprintf(&b, "\t%s, %s,\n", fnName(nb, false), fnName(nb, true))
	}
	b.WriteString("};\n\n")
	_, classes := families(colls)
	b.WriteString("const unsigned char cmx_coll_class[CMX_NCOLL] = {")
	for _, cl := range classes {
		fmt.Fprintf(&b, "%s, ", cl)
	}
	b.WriteString("};\n\n")
	b.WriteString("/* the buffer rules of each family (capi/collectives.tab's family lines) */\nconst cmx_family cmx_families[CMX_NCOLL] = {\n")
	for _, c := range firstOfFamilies(colls) {
		f := c.bufs
		flags := []string{}
		if slices.Contains(c.params, "root") {
			flags = append(flags, "CMX_FAM_ROOTED")
		}
		if slices.Contains(c.params, "op") {
			flags = append(flags, "CMX_FAM_REDUCES")
		}
		if strings.HasPrefix(c.family, "neighbor_") {
			flags = append(flags, "CMX_FAM_NEIGHBORS")
		}
		if f.uneven {
			flags = append(flags, "CMX_FAM_UNEVEN")
		}
		if len(flags) == 0 {
			flags = append(flags, "0")
		}
		fmt.Fprintf(&b, "\t{%s, %d, {%s, %s}, {%s, %s}}, /* %s */\n", strings.Join(flags, " | "), f.sized,
			whoNames[f.who[0]], whoNames[f.who[1]], spanNames[f.span[0]], spanNames[f.span[1]], c.family)
	}
	b.WriteString("};\n\n")
	b.WriteString("int cmx_forward_fn(const cmx_args *a)\n{\n\tswitch (a->fn) {\n")
	for _, c := range colls {
		for _, large := range variants(c) {
			fn := fnName(c, large)
			var args []string
			for _, p := range c.params {
				args = append(args, forwardExpr[p][btoi(large)])
			}
			fmt.Fprintf(&b, "\tcase %s:\n\t\treturn ((%s)cmx_pmpi[%s])(%s);\n", fn, ptrType(c, large), fn, strings.Join(args, ", "))
		}
	}
	b.WriteString("\t}\n\treturn cmx_abi.err_other;\n}\n")
	return b.Bytes()
}

// fortranArg is how a Fortran argument (always a pointer; handles are
// MPI_Fint, which collmux takes to be int) becomes the C one.
var fortranArg = map[string]struct{ ctype, expr string }{
	"sbuf": {"void *", "cmx_f_buf(%s)"}, "rbuf": {"void *", "cmx_f_buf(%s)"}, "buf": {"void *", "cmx_f_buf(%s)"},
	"count": {"int *", "*%s"}, "scount": {"int *", "*%s"}, "rcount": {"int *", "*%s"}, "root": {"int *", "*%s"},
	"scounts": {"const int *", "%s"}, "rcounts": {"const int *", "%s"}, "sdispls": {"const int *", "%s"}, "rdispls": {"const int *", "%s"},
	"dtype": {"int *", "cmx_px.Type_f2c(*%s)"}, "stype": {"int *", "cmx_px.Type_f2c(*%s)"}, "rtype": {"int *", "cmx_px.Type_f2c(*%s)"},
	"op": {"int *", "cmx_px.Op_f2c(*%s)"}, "comm": {"int *", "cmx_px.Comm_f2c(*%s)"}, "info": {"int *", "cmx_px.Info_f2c(*%s)"},
	"dest": {"int *", "*%s"}, "source": {"int *", "*%s"}, "tag": {"int *", "*%s"}, "stag": {"int *", "*%s"}, "rtag": {"int *", "*%s"},
	// a C status the call fills, converted back after it (fortran.c)
	"status": {"int *", "cmx_f_status(%s, &st)"},
	// the C request a nonblocking call returns, converted for Fortran after it
	"req": {"int *", "%.0s&creq"},
}

// fortranFamily: the functions that have Fortran entry points: the
// collectives (but the neighborhood ones and Alltoallw) and
// point-to-point sends and receives (no probes, no matched receives:
// their MPI_Message handles would need converting too), in every form;
// the requests of the nonblocking and persistent ones are started and
// completed by the Fortran calls of fortran.c.
func fortranFamily(c coll) bool {
	if c.p2p {
		return (c.family == "send" || c.family == "recv" || c.family == "sendrecv") && !slices.Contains(c.params, "msg")
	}
	return c.class() == "CMX_CLASS_COLLECTIVE" && !strings.HasPrefix(c.family, "neighbor_") && c.family != "alltoallw"
}

// FortranNames are the symbols Fortran compilers call for an MPI function
// (MPI_Allreduce: mpi_allreduce_, mpi_allreduce__, mpi_allreduce,
// MPI_ALLREDUCE).
func FortranNames(name string) []string {
	l := strings.ToLower(name)
	return []string{"mpi_" + l + "_", "mpi_" + l + "__", "mpi_" + l, "MPI_" + strings.ToUpper(name)}
}

// genFortran writes the Fortran entry points (mpif.h and `use mpi`) of
// every collective: under Open MPI, whose Fortran binding calls PMPI_*
// directly, they convert the arguments and call collmux's own C entry
// point; under any other MPI they forward to its Fortran binding, which
// calls the C MPI_* collmux already intercepts.
func genFortran(all []coll) []byte {
	var colls []coll
	for _, c := range all {
		if fortranFamily(c) {
			colls = append(colls, c)
		}
	}
	var b bytes.Buffer
	b.WriteString(header)
	b.WriteString("#include \"cmx.h\"\n\n")
	for _, c := range colls {
		decl, _ := signature(c, false)
		fmt.Fprintf(&b, "int MPI_%s(%s);\n", c.name, decl)
	}
	b.WriteString("\n")
	for _, c := range colls {
		var fdecl, ftypes, fargs, cargs []string
		for _, p := range c.params {
			fa := fortranArg[p]
			fdecl = append(fdecl, fa.ctype+params[p].name)
			ftypes = append(ftypes, strings.TrimSpace(fa.ctype))
			fargs = append(fargs, params[p].name)
			cargs = append(cargs, fmt.Sprintf(fa.expr, params[p].name))
		}
		fdecl = append(fdecl, "int *ierr")
		ftypes = append(ftypes, "int *")
		fargs = append(fargs, "ierr")
		// out of line: each exported name below forwards to the MPI's own
		// binding by a tail call, with no frame of its own, once it can
		fmt.Fprintf(&b, "static CMX_NOINLINE void f_%s(void **next, const char *sym, %s)\n{\n", c.name, strings.Join(fdecl, ", "))
		fmt.Fprintf(&b, "\tif (!cmx_fortran_direct()) {\n\t\t((void (*)(%s))cmx_fortran_next(next, sym))(%s);\n\t\treturn;\n\t}\n",
			strings.Join(ftypes, ", "), strings.Join(fargs, ", "))
		status, req := slices.Contains(c.params, "status"), slices.Contains(c.params, "req")
		if status {
			b.WriteString("\tcmx_f_status_t st;\n")
		}
		if req {
			b.WriteString("\tcmx_h creq = 0;\n")
		}
		fmt.Fprintf(&b, "\tint rc = MPI_%s(%s);\n", c.name, strings.Join(cargs, ", "))
		if status {
			b.WriteString("\tcmx_f_status_back(status, &st, rc);\n")
		}
		if req {
			b.WriteString("\tif (rc == 0)\n\t\t*req = cmx_px.Request_c2f(creq);\n")
		}
		b.WriteString("\tif (ierr)\n\t\t*ierr = rc;\n}\n")
		for _, sym := range FortranNames(c.name) {
			fmt.Fprintf(&b, "CMX_EXPORT void %s(%s)\n{\n\tstatic void *next;\n", sym, strings.Join(fdecl, ", "))
			fmt.Fprintf(&b, "\tvoid *f = cmx_fortran_forward(&next);\n\tif (CMX_LIKELY(f != NULL)) {\n\t\t((void (*)(%s))f)(%s);\n\t\treturn;\n\t}\n",
				strings.Join(ftypes, ", "), strings.Join(fargs, ", "))
			fmt.Fprintf(&b, "\tf_%s(&next, \"%s\", %s);\n}\n", c.name, sym, strings.Join(fargs, ", "))
		}
		b.WriteString("\n")
	}
	return b.Bytes()
}

// kinds and ops list package mpi's enums, in order, up to the first value
// without a name.
func kinds() []mpi.Kind {
	var out []mpi.Kind
	for k := mpi.KindOther; k.String() != fmt.Sprintf("kind(%d)", k); k++ {
		out = append(out, k)
	}
	return out
}

func ops() []mpi.Op {
	var out []mpi.Op
	for o := mpi.OpUser; o.String() != fmt.Sprintf("op(%d)", o); o++ {
		out = append(out, o)
	}
	return out
}

// goName turns an MPI name (Reduce_scatter_block) into a Go one (ReduceScatterBlock).
func goName(s string) string {
	parts := strings.Split(s, "_")
	for i, p := range parts {
		parts[i] = strings.ToUpper(p[:1]) + p[1:]
	}
	return strings.Join(parts, "")
}

// variants lists the int-count function and, when it has counts, its MPI-4
// large-count twin (MPI_Barrier has none).
func variants(c coll) []bool {
	for _, p := range c.params {
		if params[p].ctype != params[p].ctypeLarge {
			return []bool{false, true}
		}
	}
	return []bool{false}
}

func btoi(v bool) int {
	if v {
		return 1
	}
	return 0
}

func genABI() []byte {
	var b bytes.Buffer
	b.WriteString(header)
	b.WriteString("#include \"cmx.h\"\n\n")
	b.WriteString("const cmx_predef cmx_predef_dtypes[] = {\n")
	for _, d := range mpi.Datatypes {
		fmt.Fprintf(&b, "\t{\"%s\", %q, 0x%x, 0x%x, CMX_KIND_%s, %d},\n", d.Name, d.OMPI, d.MPICH, d.Std, upper(d.Kind.String()), d.Size)
	}
	b.WriteString("\t{0},\n};\n\nconst cmx_predef cmx_predef_ops[] = {\n")
	for _, o := range mpi.Ops {
		fmt.Fprintf(&b, "\t{\"%s\", %q, 0x%x, 0x%x, CMX_OP_%s, 0},\n", o.Name, o.OMPI, o.MPICH, o.Std, upper(o.Op.String()))
	}
	b.WriteString("\t{0},\n};\n\n")
	b.WriteString("/* op_valid[op][kind]: MPI accepts op on elements of kind. */\n")
	b.WriteString("const unsigned char cmx_op_valid[CMX_NOP][CMX_NKIND] = {\n")
	for _, o := range ops() {
		b.WriteString("\t{")
		for _, k := range kinds() {
			fmt.Fprintf(&b, "%d,", btoi(o.Valid(k)))
		}
		b.WriteString("},\n")
	}
	b.WriteString("};\n\n")
	for _, a := range []mpi.ABI{mpi.ABIMPICH, mpi.ABIStandard, mpi.ABIOpenMPI} {
		c := mpi.ABIConstants[a]
		fmt.Fprintf(&b, "const cmx_abi_consts cmx_consts_%s = {%d, 0x%x, 0x%x, 0x%x, 0x%x, 0x%x, 0x%x, %d, %d, %d, %d, %d, 0x%x, %d, %d, %d, %d, %d, %d};\n",
			strings.ReplaceAll(a.String(), "-", "_"), c.InPlace, c.CommWorld, c.CommSelf, c.CommNull, c.DatatypeNull, c.OpNull, c.InfoNull, c.Root, c.ProcNull, c.ErrOther, c.ErrInStatus, c.StatusError,
			c.RequestNull, c.StatusIgnore, c.StatusSize, c.Cart, c.Graph, c.DistGraph, c.ThreadMultiple)
	}
	return b.Bytes()
}

func genGo(colls []coll) []byte {
	var b bytes.Buffer
	fams, classes := families(colls)
	b.WriteString(header)
	b.WriteString("package dispatch\n\n")
	b.WriteString("// The families of intercepted functions (collectives, then point-to-point),\n// in the order of the C enum CMX_COLL_*.\nconst (\n")
	for i, f := range fams {
		if i == 0 {
			fmt.Fprintf(&b, "\t%s Coll = iota\n", goName(f))
		} else {
			fmt.Fprintf(&b, "\t%s\n", goName(f))
		}
	}
	b.WriteString("\tNumColl\n)\n\n")
	b.WriteString("var collNames = [...]string{\n")
	for _, f := range fams {
		fmt.Fprintf(&b, "\t%q,\n", f)
	}
	b.WriteString("}\n\n")
	b.WriteString("// collCollective: the family is collective over a communicator (not\n// point-to-point, not local).\nvar collCollective = [...]bool{\n")
	for _, cl := range classes {
		fmt.Fprintf(&b, "\t%v,\n", cl == "CMX_CLASS_COLLECTIVE")
	}
	b.WriteString("}\n")
	src, err := format.Source(b.Bytes())
	if err != nil {
		log.Fatalf("generated Go does not format: %v\n%s", err, b.Bytes())
	}
	return src
}

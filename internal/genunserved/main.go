// Command genunserved writes capi/unserved.tab: every C function of the MPI
// standard that takes a choice buffer (a parameter of kind BUFFER: the
// void * an MPI reads or writes data through) and that collmux does not
// intercept (capi/collectives.tab), with its C parameters, which of them
// are buffers, and a category that says why collmux does not serve it on
// device memory. internal/genwrap turns the table into the wrappers that
// refuse a device buffer with an error instead of letting the MPI fault.
//
// Its input is the MPI Forum's machine-readable description of the MPI API:
// the apis.json that the pympistandard package ships
// (github.com/mpi-forum/pympistandard, src/pympistandard/data/apis.json),
// which the MPI standard's build extracts from its LaTeX sources. The file
// is not part of collmux; the table made from it is:
//
//	go run ./internal/genunserved -api path/to/apis.json \
//	    -source 'mpi-forum/pympistandard@<commit> src/pympistandard/data/apis.json' > capi/unserved.tab
//
// The C bindings are rendered from the description's parameter kinds the
// way the standard renders them (const, pointer level, []), so the table's
// parameter lists are the standard's prototypes; tests/unserved_test.go
// compiles them against each installed MPI's mpi.h.
package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"sort"
	"strings"
)

// procedure is one entry of apis.json (the fields genunserved reads).
type procedure struct {
	Name       string `json:"name"`
	Attributes struct {
		CExpressible       bool `json:"c_expressible"`
		Callback           bool `json:"callback"`
		PredefinedFunction any  `json:"predefined_function"`
	} `json:"attributes"`
	Parameters []parameter `json:"parameters"`
	ReturnKind string      `json:"return_kind"`
}

type parameter struct {
	Name      string `json:"name"`
	Kind      string `json:"kind"`
	Constant  any    `json:"constant"` // a bool; two entries of the 4.0 data have the string "true"
	Direction string `json:"param_direction"`
	Pointer   *bool  `json:"pointer"`
	Length    any    `json:"length"` // null, a string, or a list (2-D arrays)
	LargeOnly bool   `json:"large_only"`
	Suppress  string `json:"suppress"`
}

func (p parameter) constant() bool {
	switch v := p.Constant.(type) {
	case bool:
		return v
	case string:
		return v == "true"
	}
	return false
}

// cTypes gives, for each parameter kind that occurs in a function of the
// table, its C type in the int-count binding and in the large-count (_c)
// one. Kinds whose name starts with POLY differ between the two; a function
// with one has a _c twin. A kind missing here stops the generator, so a new
// version of the description is looked at rather than guessed.
var cTypes = map[string][2]string{
	"BUFFER":                 {"void", "void"},
	"COMMUNICATOR":           {"MPI_Comm", "MPI_Comm"},
	"CVAR":                   {"MPI_T_cvar_handle", "MPI_T_cvar_handle"},
	"DATATYPE":               {"MPI_Datatype", "MPI_Datatype"},
	"DISPLACEMENT":           {"MPI_Aint", "MPI_Aint"},
	"FILE":                   {"MPI_File", "MPI_File"},
	"INFO":                   {"MPI_Info", "MPI_Info"},
	"OFFSET":                 {"MPI_Offset", "MPI_Offset"},
	"OPERATION":              {"MPI_Op", "MPI_Op"},
	"PARTITION":              {"int", "int"},
	"POLYDISPLACEMENT_COUNT": {"int", "MPI_Count"},
	"POLYDTYPE_NUM_ELEM":     {"int", "MPI_Count"},
	"POLYDTYPE_NUM_ELEM_NNI": {"int", "MPI_Count"},
	"POLYDTYPE_PACK_SIZE":    {"MPI_Aint", "MPI_Count"},
	"POLYLOCATION":           {"MPI_Aint", "MPI_Count"},
	"POLYNUM_BYTES_NNI":      {"int", "MPI_Count"},
	"POLYRMA_DISPLACEMENT":   {"int", "MPI_Aint"},
	"POLYXFER_NUM_ELEM":      {"int", "MPI_Count"},
	"POLYXFER_NUM_ELEM_NNI":  {"int", "MPI_Count"},
	"PVAR":                   {"MPI_T_pvar_handle", "MPI_T_pvar_handle"},
	"PVAR_SESSION":           {"MPI_T_pvar_session", "MPI_T_pvar_session"},
	"RANK":                   {"int", "int"},
	"RANK_NNI":               {"int", "int"},
	"REQUEST":                {"MPI_Request", "MPI_Request"},
	"RMA_DISPLACEMENT_NNI":   {"MPI_Aint", "MPI_Aint"},
	"SESSION":                {"MPI_Session", "MPI_Session"},
	"STATUS":                 {"MPI_Status", "MPI_Status"},
	"STRING":                 {"char", "char"},
	"TAG":                    {"int", "int"},
	"WINDOW":                 {"MPI_Win", "MPI_Win"},
	"WINDOW_SIZE":            {"MPI_Aint", "MPI_Aint"},
	"WIN_ATTACH_SIZE":        {"MPI_Aint", "MPI_Aint"},
	"XFER_NUM_ELEM_NNI":      {"MPI_Count", "MPI_Count"},
}

// alwaysPointer are the kinds C passes by address whatever their direction.
var alwaysPointer = map[string]bool{"BUFFER": true, "STRING": true, "STATUS": true}

// addressOnly are functions whose buffer parameter is an address the MPI
// never reads or writes through: collmux passes them through.
var addressOnly = map[string]bool{"MPI_Get_address": true, "MPI_Free_mem": true, "MPI_Win_detach": true}

// Categories, in the order the table lists them. genwrap knows each one's
// reason and rejects any other.
var categoryOrder = []string{"rma", "io", "pack", "bsend", "partitioned", "p2p", "tool", "address"}

// category says why collmux does not serve fn on device memory; "" when no
// rule matches (the generator then stops: a new function needs a decision).
func category(p procedure) string {
	kinds := map[string]bool{}
	for _, q := range p.Parameters {
		kinds[q.Kind] = true
	}
	base := strings.TrimPrefix(p.Name, "MPI_")
	switch {
	case addressOnly[p.Name]:
		return "address" // the address only: passed through
	case strings.HasPrefix(p.Name, "MPI_T_"):
		return "tool" // the tool information interface
	case kinds["FILE"]:
		return "io"
	case kinds["WINDOW"]:
		return "rma"
	case strings.HasPrefix(base, "Pack") || strings.HasPrefix(base, "Unpack"):
		return "pack"
	case kinds["PARTITION"]:
		return "partitioned"
	case base == "Buffer_attach" || strings.HasSuffix(base, "_attach_buffer"):
		return "bsend" // the buffer of buffered sends
	case kinds["TAG"]:
		return "p2p" // point-to-point calls collectives.tab does not list (MPI_Isendrecv)
	}
	return ""
}

// supplement are functions of MPI 4.1 that take a buffer and that the
// description (the MPI 4.0 data pympistandard ships) lacks, written in its
// form from the MPI 4.1 standard (section 3.6, buffer allocation).
var supplement = []procedure{
	attachBuffer("MPI_Comm_attach_buffer", "comm", "COMMUNICATOR"),
	attachBuffer("MPI_Session_attach_buffer", "session", "SESSION"),
}

func attachBuffer(name, obj, kind string) procedure {
	p := procedure{Name: name, ReturnKind: "ERROR_CODE"}
	p.Attributes.CExpressible = true
	p.Parameters = []parameter{
		{Name: obj, Kind: kind, Direction: "in"},
		{Name: "buffer", Kind: "BUFFER", Direction: "in"},
		{Name: "size", Kind: "POLYNUM_BYTES_NNI", Direction: "in"},
	}
	return p
}

// binding is one C function of the table.
type binding struct {
	name, category string
	buffers        []string
	params         []string // "const void *origin_addr", ...
}

// cParams renders p's C parameters (large: the _c binding) and names the
// buffers among them.
func cParams(p procedure, large bool) (params, buffers []string, err error) {
	for _, q := range p.Parameters {
		if strings.Contains(q.Suppress, "c_parameter") || (q.LargeOnly && !large) {
			continue
		}
		t, ok := cTypes[q.Kind]
		if !ok {
			return nil, nil, fmt.Errorf("%s: parameter %s has kind %s, which genunserved cannot render in C: add it to cTypes", p.Name, q.Name, q.Kind)
		}
		typ := t[0]
		if large {
			typ = t[1]
		}
		length, _ := q.Length.(string)
		isList := false
		if _, l := q.Length.([]any); l {
			isList = true
		}
		explicitNo := q.Pointer != nil && !*q.Pointer
		explicitYes := q.Pointer != nil && *q.Pointer
		stars, array := 0, ""
		switch {
		case q.Kind == "STRING" && length == "*" && !explicitYes:
			array = "[]" // const char datarep[]
		case explicitNo:
		case alwaysPointer[q.Kind]:
			stars = 1
		case (q.Direction == "out" || q.Direction == "inout" || explicitYes) && q.Length == nil:
			stars = 1
		}
		if array == "" && q.Kind != "STRING" && q.Length != nil && !isList && !explicitYes {
			array = "[]"
		}
		if isList {
			return nil, nil, fmt.Errorf("%s: parameter %s is a 2-D array, which genunserved does not render", p.Name, q.Name)
		}
		s := typ + " "
		if q.constant() {
			s = "const " + s
		}
		s += strings.Repeat("*", stars) + q.Name + array
		params = append(params, s)
		if q.Kind == "BUFFER" {
			buffers = append(buffers, q.Name)
		}
	}
	return params, buffers, nil
}

// takesBuffer: one of p's C parameters is a choice buffer.
func takesBuffer(p procedure) bool {
	for _, q := range p.Parameters {
		if q.Kind == "BUFFER" && !strings.Contains(q.Suppress, "c_parameter") && !q.LargeOnly {
			return true
		}
	}
	return false
}

func hasLarge(p procedure) bool {
	for _, q := range p.Parameters {
		if strings.HasPrefix(q.Kind, "POLY") && !strings.Contains(q.Suppress, "c_parameter") {
			return true
		}
	}
	return false
}

// served reads the names collectives.tab intercepts (Allreduce, Send, ...).
func served(r io.Reader) (map[string]bool, error) {
	out := map[string]bool{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		out["MPI_"+strings.Fields(line)[0]] = true
	}
	return out, sc.Err()
}

// select_ returns the table's functions from the description, in category
// order, then by name, each int-count binding followed by its _c twin.
func select_(procs []procedure, intercepted map[string]bool) ([]binding, error) {
	var out []binding
	for _, p := range procs {
		a := p.Attributes
		if !a.CExpressible || a.Callback || a.PredefinedFunction != nil || intercepted[p.Name] || !strings.HasPrefix(p.Name, "MPI_") {
			continue
		}
		if !takesBuffer(p) {
			continue
		}
		params, bufs, err := cParams(p, false)
		if err != nil {
			return nil, err
		}
		cat := category(p)
		if cat == "" {
			return nil, fmt.Errorf("%s takes a buffer and no category fits it: decide what collmux does with it (genunserved's category)", p.Name)
		}
		out = append(out, binding{p.Name, cat, bufs, params})
		if hasLarge(p) {
			params, bufs, err := cParams(p, true)
			if err != nil {
				return nil, err
			}
			out = append(out, binding{p.Name + "_c", cat, bufs, params})
		}
	}
	rank := map[string]int{}
	for i, c := range categoryOrder {
		rank[c] = i
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].category != out[j].category {
			return rank[out[i].category] < rank[out[j].category]
		}
		return strings.TrimSuffix(out[i].name, "_c") < strings.TrimSuffix(out[j].name, "_c")
	})
	return out, nil
}

// parse reads apis.json into its procedures, adding the supplement where
// the description lacks a function (named in added).
func parse(data []byte) (procs []procedure, added []string, err error) {
	var m map[string]procedure
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, nil, fmt.Errorf("the API description: %v", err)
	}
	if len(m) == 0 {
		return nil, nil, fmt.Errorf("the API description has no procedures")
	}
	names := map[string]bool{}
	for _, p := range m {
		names[p.Name] = true
		procs = append(procs, p)
	}
	for _, p := range supplement {
		if !names[p.Name] {
			procs = append(procs, p)
			added = append(added, p.Name)
		}
	}
	sort.Slice(procs, func(i, j int) bool { return procs[i].Name < procs[j].Name })
	return procs, added, nil
}

const tableHeader = `# capi/unserved.tab: the C functions of the MPI standard that take a buffer
# (a choice parameter, kind BUFFER) and that collmux does not intercept
# (capi/collectives.tab). internal/genwrap turns the table into the exported
# wrappers (capi/zunserved.c): a call passes straight to the MPI, except
# that a buffer in device memory fails with MPI_ERR_OTHER and a message
# naming the call and the category's reason, instead of the MPI faulting on
# it. The category address marks functions that use a buffer's address only:
# they are passed through, not wrapped.
#
# Generated by internal/genunserved from the MPI Forum's machine-readable
# description of the MPI API; DO NOT EDIT. Regenerate with
#   go run ./internal/genunserved -api apis.json -source '<where it came from>' > capi/unserved.tab
#
# category     why collmux does not serve it on device memory
#   rma          one-sided communication (windows, put, get, accumulate)
#   io           MPI-IO (file reads and writes)
#   pack         packing and unpacking
#   bsend        the buffer of buffered sends
#   partitioned  partitioned communication
#   p2p          point-to-point calls collmux does not intercept
#   tool         the MPI tool information interface
#   address      uses the address only: passed through
#
# buffers: the parameters a device pointer is looked for in. parameters: the
# C binding, as the standard writes it; a _c line is the MPI-4 large-count
# twin of the line above it.
`

func generate(api []byte, source string, collectives io.Reader) ([]byte, error) {
	procs, added, err := parse(api)
	if err != nil {
		return nil, err
	}
	intercepted, err := served(collectives)
	if err != nil {
		return nil, err
	}
	rows, err := select_(procs, intercepted)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString(tableHeader)
	fmt.Fprintf(&b, "#\n# description: %s\n# sha256 of the description: %x\n", source, sha256.Sum256(api))
	if len(added) > 0 {
		fmt.Fprintf(&b, "# added from the MPI 4.1 standard, which the description predates: %s\n", strings.Join(added, ", "))
	}
	b.WriteString("#\n# name                         category     buffers                                parameters\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "%-30s %-12s %-38s (%s)\n", r.name, r.category, strings.Join(r.buffers, ","), strings.Join(r.params, ", "))
	}
	return b.Bytes(), nil
}

func main() {
	api := flag.String("api", "", "the MPI API description (pympistandard's apis.json)")
	source := flag.String("source", "", "where the description came from, recorded in the table")
	tab := flag.String("collectives", "capi/collectives.tab", "the table of the functions collmux intercepts")
	flag.Parse()
	if *api == "" {
		log.Fatal("usage: genunserved -api apis.json [-source TEXT] [-collectives capi/collectives.tab] > capi/unserved.tab")
	}
	data, err := os.ReadFile(*api)
	if err != nil {
		log.Fatal(err)
	}
	f, err := os.Open(*tab)
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	if *source == "" {
		*source = *api
	}
	out, err := generate(data, *source, f)
	if err != nil {
		log.Fatal(err)
	}
	os.Stdout.Write(out)
}

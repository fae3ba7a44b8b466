// Package mpi describes the real MPI library underneath collmux: the three
// ABIs it may present (Open MPI, the MPICH family, the MPI-5 standard ABI),
// their predefined handles and sentinels, and the element kinds collmux
// understands. These tables are the single source from which the C side of
// the interposer (capi) is generated, so that decoding a handle in the hot
// path is a table lookup and never a guess.
package mpi

import "fmt"

// ABI identifies the calling convention and handle encoding of the MPI
// library loaded into the process.
type ABI int

const (
	ABIUnknown ABI = iota
	// ABIStandard is the MPI-5 standard ABI (libmpi_abi): predefined handles
	// are small integers stored in pointer-sized handles.
	ABIStandard
	// ABIOpenMPI: handles are pointers; predefined ones are addresses of
	// exported objects (ompi_mpi_*), resolved with dlsym at run time.
	ABIOpenMPI
	// ABIMPICH covers MPICH, Intel MPI, Cray MPT, MVAPICH: handles are int.
	ABIMPICH
)

func (a ABI) String() string {
	switch a {
	case ABIStandard:
		return "mpi-abi"
	case ABIOpenMPI:
		return "openmpi"
	case ABIMPICH:
		return "mpich"
	}
	return "unknown"
}

// Kind is the element type of a predefined datatype as a reduction sees it.
type Kind uint8

// The kinds. Their numeric values are part of the C interface (generated
// into capi/zabi.h); append only.
const (
	KindOther Kind = iota // predefined but not understood by any GPU path
	KindInt8
	KindUint8
	KindInt16
	KindUint16
	KindInt32
	KindUint32
	KindInt64
	KindUint64
	KindFloat16
	KindBFloat16
	KindFloat32
	KindFloat64
	KindLongDouble
	KindBool // MPI_C_BOOL: logical ops only
	KindByte // MPI_BYTE: bitwise ops only
	KindChar // MPI_CHAR, MPI_WCHAR: no reduction ops in the standard (one the MPI reduces anyway is decoded as an integer at run time: cmx_mpi_probe)
	KindPair // value/index pairs (MPI_DOUBLE_INT, ...): MINLOC/MAXLOC only
	// complex numbers of two float32 or float64 parts: SUM and PROD
	// (a device SUM runs as a sum of twice as many parts: dispatch)
	KindComplex64
	KindComplex128
	kindCount
)

var kindNames = [...]string{"other", "int8", "uint8", "int16", "uint16", "int32", "uint32",
	"int64", "uint64", "float16", "bfloat16", "float32", "float64", "longdouble",
	"bool", "byte", "char", "pair", "complex64", "complex128"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", k)
}

// Integer reports whether k is a C integer type in the MPI sense.
func (k Kind) Integer() bool { return k >= KindInt8 && k <= KindUint64 }

// Floating reports whether k is a floating-point type.
func (k Kind) Floating() bool { return k >= KindFloat16 && k <= KindLongDouble }

// Complex reports whether k is a complex type.
func (k Kind) Complex() bool { return k == KindComplex64 || k == KindComplex128 }

// Op is a predefined reduction operation.
type Op uint8

// The ops; values are part of the C interface.
const (
	OpUser Op = iota // user-defined or unknown
	OpSum
	OpProd
	OpMin
	OpMax
	OpLand
	OpLor
	OpLxor
	OpBand
	OpBor
	OpBxor
	OpMinloc
	OpMaxloc
	OpReplace
	OpNoOp
	opCount
)

var opNames = [...]string{"user", "sum", "prod", "min", "max", "land", "lor", "lxor",
	"band", "bor", "bxor", "minloc", "maxloc", "replace", "no_op"}

func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return fmt.Sprintf("op(%d)", o)
}

// Valid reports whether MPI allows op on elements of kind k (MPI-4.1
// §6.9.2). A GPU path may only take a reduction that MPI itself accepts, so
// that invalid arguments still reach MPI and get MPI's own error.
func (o Op) Valid(k Kind) bool {
	switch o {
	case OpSum, OpProd:
		return k.Integer() || k.Floating() || k.Complex()
	case OpMin, OpMax:
		return k.Integer() || k.Floating()
	case OpLand, OpLor, OpLxor:
		return k.Integer() || k == KindBool
	case OpBand, OpBor, OpBxor:
		return k.Integer() || k == KindByte
	case OpMinloc, OpMaxloc:
		return k == KindPair
	}
	return false
}

// Datatype is one predefined datatype with its handle in each ABI.
// A zero MPICH or Std value, or an empty OMPI symbol, means that ABI does not
// define it.
type Datatype struct {
	Name  string
	Kind  Kind
	Size  int    // bytes of one element (the type size, not the extent)
	MPICH uint32 // MPICH-family integer handle
	Std   uint32 // MPI-5 ABI handle
	OMPI  string // Open MPI exported object
}

// Datatypes lists the predefined datatypes collmux decodes. LP64 sizes.
var Datatypes = []Datatype{
	{"MPI_CHAR", KindChar, 1, 0x4c000101, 0x243, "ompi_mpi_char"},
	{"MPI_SIGNED_CHAR", KindInt8, 1, 0x4c000118, 0x244, "ompi_mpi_signed_char"},
	{"MPI_UNSIGNED_CHAR", KindUint8, 1, 0x4c000102, 0x245, "ompi_mpi_unsigned_char"},
	{"MPI_BYTE", KindByte, 1, 0x4c00010d, 0x247, "ompi_mpi_byte"},
	{"MPI_WCHAR", KindChar, 4, 0x4c00040e, 0x23c, "ompi_mpi_wchar"},
	{"MPI_SHORT", KindInt16, 2, 0x4c000203, 0x208, "ompi_mpi_short"},
	{"MPI_UNSIGNED_SHORT", KindUint16, 2, 0x4c000204, 0x20c, "ompi_mpi_unsigned_short"},
	{"MPI_INT", KindInt32, 4, 0x4c000405, 0x209, "ompi_mpi_int"},
	{"MPI_UNSIGNED", KindUint32, 4, 0x4c000406, 0x20d, "ompi_mpi_unsigned"},
	{"MPI_LONG", KindInt64, 8, 0x4c000807, 0x20a, "ompi_mpi_long"},
	{"MPI_UNSIGNED_LONG", KindUint64, 8, 0x4c000808, 0x20e, "ompi_mpi_unsigned_long"},
	{"MPI_LONG_LONG", KindInt64, 8, 0x4c000809, 0x20b, "ompi_mpi_long_long_int"},
	{"MPI_UNSIGNED_LONG_LONG", KindUint64, 8, 0x4c000819, 0x20f, "ompi_mpi_unsigned_long_long"},
	{"MPI_INT8_T", KindInt8, 1, 0x4c000137, 0x240, "ompi_mpi_int8_t"},
	{"MPI_UINT8_T", KindUint8, 1, 0x4c00013b, 0x241, "ompi_mpi_uint8_t"},
	{"MPI_INT16_T", KindInt16, 2, 0x4c000238, 0x248, "ompi_mpi_int16_t"},
	{"MPI_UINT16_T", KindUint16, 2, 0x4c00023c, 0x249, "ompi_mpi_uint16_t"},
	{"MPI_INT32_T", KindInt32, 4, 0x4c000439, 0x250, "ompi_mpi_int32_t"},
	{"MPI_UINT32_T", KindUint32, 4, 0x4c00043d, 0x251, "ompi_mpi_uint32_t"},
	{"MPI_INT64_T", KindInt64, 8, 0x4c00083a, 0x258, "ompi_mpi_int64_t"},
	{"MPI_UINT64_T", KindUint64, 8, 0x4c00083e, 0x259, "ompi_mpi_uint64_t"},
	{"MPI_AINT", KindInt64, 8, 0x4c000843, 0x201, "ompi_mpi_aint"},
	{"MPI_OFFSET", KindInt64, 8, 0x4c000844, 0x203, "ompi_mpi_offset"},
	{"MPI_COUNT", KindInt64, 8, 0x4c000845, 0x202, "ompi_mpi_count"},
	{"MPI_C_BOOL", KindBool, 1, 0x4c00013f, 0x238, "ompi_mpi_c_bool"},
	{"MPI_FLOAT", KindFloat32, 4, 0x4c00040a, 0x210, "ompi_mpi_float"},
	// Fortran types (default INTEGER and REAL of 4 bytes), for Fortran
	// programs with device buffers (and C programs passing them)
	{"MPI_INTEGER", KindInt32, 4, 0x4c00041b, 0x219, "ompi_mpi_integer"},
	{"MPI_INTEGER1", KindInt8, 1, 0x4c00012d, 0x2c1, "ompi_mpi_integer1"},
	{"MPI_INTEGER2", KindInt16, 2, 0x4c00022f, 0x2c9, "ompi_mpi_integer2"},
	{"MPI_INTEGER4", KindInt32, 4, 0x4c000430, 0x2d1, "ompi_mpi_integer4"},
	{"MPI_INTEGER8", KindInt64, 8, 0x4c000831, 0x2d9, "ompi_mpi_integer8"},
	{"MPI_REAL", KindFloat32, 4, 0x4c00041c, 0x21a, "ompi_mpi_real"},
	{"MPI_REAL4", KindFloat32, 4, 0x4c000427, 0x2d2, "ompi_mpi_real4"},
	{"MPI_REAL8", KindFloat64, 8, 0x4c000829, 0x2da, "ompi_mpi_real8"},
	{"MPI_DOUBLE_PRECISION", KindFloat64, 8, 0x4c00081f, 0x21c, "ompi_mpi_dblprec"},
	{"MPI_DOUBLE", KindFloat64, 8, 0x4c00080b, 0x214, "ompi_mpi_double"},
	{"MPI_LONG_DOUBLE", KindLongDouble, 16, 0x4c00100c, 0x220, "ompi_mpi_long_double"},
	{"MPI_C_FLOAT_COMPLEX", KindComplex64, 8, 0x4c000840, 0x212, "ompi_mpi_c_float_complex"},
	{"MPI_C_DOUBLE_COMPLEX", KindComplex128, 16, 0x4c001041, 0x216, "ompi_mpi_c_double_complex"},
	{"MPI_CXX_FLOAT_COMPLEX", KindComplex64, 8, 0x4c000834, 0x213, "ompi_mpi_cxx_cplex"},
	{"MPI_CXX_DOUBLE_COMPLEX", KindComplex128, 16, 0x4c001035, 0x217, "ompi_mpi_cxx_dblcplex"},
	{"MPI_COMPLEX", KindComplex64, 8, 0x4c00081e, 0x21b, "ompi_mpi_cplex"},
	{"MPI_DOUBLE_COMPLEX", KindComplex128, 16, 0x4c001022, 0x21d, "ompi_mpi_dblcplex"},
	{"MPI_COMPLEX8", KindComplex64, 8, 0x4c000828, 0x2db, "ompi_mpi_complex8"},
	{"MPI_COMPLEX16", KindComplex128, 16, 0x4c00102a, 0x2e3, "ompi_mpi_complex16"},
	{"MPIX_C_FLOAT16", KindFloat16, 2, 0x4c000246, 0, ""},
	{"MPIX_BFLOAT16", KindBFloat16, 2, 0x4c00024c, 0, ""},
	{"MPI_FLOAT_INT", KindPair, 8, 0x8c000000, 0x228, "ompi_mpi_float_int"},
	{"MPI_DOUBLE_INT", KindPair, 12, 0x8c000001, 0x229, "ompi_mpi_double_int"},
	{"MPI_LONG_INT", KindPair, 12, 0x8c000002, 0x22a, "ompi_mpi_long_int"},
	{"MPI_SHORT_INT", KindPair, 6, 0x8c000003, 0x22c, "ompi_mpi_short_int"},
	{"MPI_2INT", KindPair, 8, 0x4c000816, 0x22b, "ompi_mpi_2int"},
	{"MPI_LONG_DOUBLE_INT", KindPair, 20, 0x8c000004, 0x22d, "ompi_mpi_longdbl_int"},
}

// PredefOp is one predefined op with its handle in each ABI.
type PredefOp struct {
	Name  string
	Op    Op
	MPICH uint32
	Std   uint32
	OMPI  string
}

// Ops lists the predefined reduction operations.
var Ops = []PredefOp{
	{"MPI_MAX", OpMax, 0x58000001, 0x23, "ompi_mpi_op_max"},
	{"MPI_MIN", OpMin, 0x58000002, 0x22, "ompi_mpi_op_min"},
	{"MPI_SUM", OpSum, 0x58000003, 0x21, "ompi_mpi_op_sum"},
	{"MPI_PROD", OpProd, 0x58000004, 0x24, "ompi_mpi_op_prod"},
	{"MPI_LAND", OpLand, 0x58000005, 0x30, "ompi_mpi_op_land"},
	{"MPI_BAND", OpBand, 0x58000006, 0x28, "ompi_mpi_op_band"},
	{"MPI_LOR", OpLor, 0x58000007, 0x31, "ompi_mpi_op_lor"},
	{"MPI_BOR", OpBor, 0x58000008, 0x29, "ompi_mpi_op_bor"},
	{"MPI_LXOR", OpLxor, 0x58000009, 0x32, "ompi_mpi_op_lxor"},
	{"MPI_BXOR", OpBxor, 0x5800000a, 0x2a, "ompi_mpi_op_bxor"},
	{"MPI_MINLOC", OpMinloc, 0x5800000b, 0x38, "ompi_mpi_op_minloc"},
	{"MPI_MAXLOC", OpMaxloc, 0x5800000c, 0x39, "ompi_mpi_op_maxloc"},
	{"MPI_REPLACE", OpReplace, 0x5800000d, 0x3c, "ompi_mpi_op_replace"},
	{"MPI_NO_OP", OpNoOp, 0x5800000e, 0x3d, "ompi_mpi_op_no_op"},
}

// Constants holds the per-ABI sentinels and predefined communicators that
// are plain numbers. Open MPI's communicators are object addresses and are
// named by symbol instead.
type Constants struct {
	InPlace             int64 // value of MPI_IN_PLACE as an address
	CommWorld, CommSelf uint32
	CommNull            uint32
	DatatypeNull        uint32
	OpNull              uint32
	InfoNull            uint32
	Root, ProcNull      int32
	ErrOther            int32
	// ErrInStatus is MPI_ERR_IN_STATUS, what a completion call of many
	// requests returns when one failed; StatusError the offset of
	// MPI_ERROR in MPI_Status, where it says which.
	ErrInStatus, StatusError int32
	// RequestNull is MPI_REQUEST_NULL (Open MPI: the address of
	// ompi_request_null, resolved at run time); StatusIgnore the address
	// MPI_STATUS_IGNORE and MPI_STATUSES_IGNORE stand for; StatusSize
	// sizeof(MPI_Status), the stride of a status array.
	RequestNull  uint32
	StatusIgnore int64
	StatusSize   int32
	// What MPI_Topo_test answers for Cartesian, graph and distributed
	// graph communicators.
	Cart, Graph, DistGraph int32
	// ThreadMultiple is MPI_THREAD_MULTIPLE, which MPI_Query_thread
	// answers when the arrival gate is needed (gate/gate.c): 3 in Open MPI
	// and MPICH, 4096 in the standard ABI, whose levels are bit flags.
	ThreadMultiple int32
}

// ABIConstants gives the Constants of each ABI. The standard ABI's are the
// MPI-5.0 mpi.h's (MPICH 5.0.2's, synced with the MPI Forum's
// mpi_abi.h), checked against that header by TestWorldABIConstants.
var ABIConstants = map[ABI]Constants{
	ABIMPICH: {InPlace: -1, CommWorld: 0x44000000, CommSelf: 0x44000001, CommNull: 0x04000000, DatatypeNull: 0x0c000000, OpNull: 0x18000000, InfoNull: 0x1c000000, Root: -3, ProcNull: -1, ErrOther: 15, ErrInStatus: 17, StatusError: 16,
		RequestNull: 0x2c000000, StatusIgnore: 1, StatusSize: 20, Cart: 2, Graph: 1, DistGraph: 3, ThreadMultiple: 3},
	ABIStandard: {InPlace: 1, CommWorld: 0x101, CommSelf: 0x102, CommNull: 0x100, DatatypeNull: 0x200, OpNull: 0x20, InfoNull: 0x130, Root: -4, ProcNull: -3, ErrOther: 16, ErrInStatus: 19, StatusError: 8,
		RequestNull: 0x180, StatusIgnore: 0, StatusSize: 32, Cart: 211, Graph: 212, DistGraph: 213, ThreadMultiple: 4096},
	ABIOpenMPI: {InPlace: 1, Root: -4, ProcNull: -2, ErrOther: 16, ErrInStatus: 18, StatusError: 8, StatusIgnore: 0, StatusSize: 24, Cart: 1, Graph: 2, DistGraph: 3, ThreadMultiple: 3},
}

// MPICHBuiltinSize decodes the element size encoded in an MPICH builtin
// datatype handle (bits 8-15), the rule MPICH's own MPIR_Datatype_get_basic_size uses.
func MPICHBuiltinSize(h uint32) int { return int(h&0xff00) >> 8 }

// MPICHIsBuiltin reports whether an MPICH handle is a builtin datatype
// (handle kind bits 30-31 == 1, object type DATATYPE == 3).
func MPICHIsBuiltin(h uint32) bool { return h>>30 == 1 && (h&0x3c000000)>>26 == 3 }

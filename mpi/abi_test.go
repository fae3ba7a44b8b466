package mpi

import "testing"

// Handles must be unique within each ABI, or decoding would be ambiguous.
func TestHandlesUnique(t *testing.T) {
	for _, abi := range []ABI{ABIMPICH, ABIStandard} {
		seen := map[uint32]string{}
		for _, d := range Datatypes {
			h := d.MPICH
			if abi == ABIStandard {
				h = d.Std
			}
			if h == 0 {
				continue
			}
			if prev, ok := seen[h]; ok {
				t.Errorf("%v: %s and %s share handle %#x", abi, prev, d.Name, h)
			}
			seen[h] = d.Name
		}
		for _, o := range Ops {
			h := o.MPICH
			if abi == ABIStandard {
				h = o.Std
			}
			if prev, ok := seen[h]; ok {
				t.Errorf("%v: %s and %s share handle %#x", abi, prev, o.Name, h)
			}
			seen[h] = o.Name
		}
	}
}

// MPICH encodes a builtin type's size in its handle; the table must agree
// with that encoding for every builtin (pair types are not builtins).
func TestMPICHSizesMatchEncoding(t *testing.T) {
	for _, d := range Datatypes {
		if !MPICHIsBuiltin(d.MPICH) {
			if d.Kind != KindPair {
				t.Errorf("%s (%#x) is not an MPICH builtin", d.Name, d.MPICH)
			}
			continue
		}
		if d.Kind == KindPair {
			continue // MPI_2INT is builtin; its encoded size is the pair's
		}
		if got := MPICHBuiltinSize(d.MPICH); got != d.Size {
			t.Errorf("%s: handle %#x encodes size %d, table says %d", d.Name, d.MPICH, got, d.Size)
		}
	}
}

// Standard-ABI builtins are below 0x1000, as MPICH's ABI layer assumes.
func TestStandardHandlesAreBuiltins(t *testing.T) {
	for _, d := range Datatypes {
		if d.Std >= 0x1000 || (d.Std != 0 && d.Std < 0x200) {
			t.Errorf("%s: standard handle %#x outside the datatype range", d.Name, d.Std)
		}
	}
	c := ABIConstants[ABIStandard]
	if c.InPlace != 1 || c.CommWorld != 0x101 {
		t.Errorf("standard ABI constants: %+v", c)
	}
}

func TestOpValid(t *testing.T) {
	cases := []struct {
		op   Op
		kind Kind
		want bool
	}{
		{OpSum, KindFloat32, true},
		{OpSum, KindBool, false},
		{OpSum, KindChar, false},
		{OpBand, KindByte, true},
		{OpBand, KindFloat64, false},
		{OpLand, KindBool, true},
		{OpLand, KindFloat32, false},
		{OpMax, KindBFloat16, true},
		{OpMaxloc, KindPair, true},
		{OpMaxloc, KindInt32, false},
		{OpSum, KindComplex64, true},
		{OpProd, KindComplex128, true},
		{OpMax, KindComplex64, false},
		{OpLand, KindComplex128, false},
		{OpUser, KindInt32, false},
	}
	for _, tc := range cases {
		if got := tc.op.Valid(tc.kind); got != tc.want {
			t.Errorf("%v on %v: %v, want %v", tc.op, tc.kind, got, tc.want)
		}
	}
}

func TestNames(t *testing.T) {
	if KindBFloat16.String() != "bfloat16" || OpMaxloc.String() != "maxloc" || ABIMPICH.String() != "mpich" {
		t.Error("names out of step with the enums")
	}
	if int(kindCount) != len(kindNames) || int(opCount) != len(opNames) {
		t.Error("name tables and enums differ in length")
	}
}

package ingest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/big"

	"github.com/nlpodyssey/gopickle/pickle"
	"github.com/nlpodyssey/gopickle/types"
)

// Pickles are read with github.com/nlpodyssey/gopickle behind two gates:
//
//  1. checkPickle walks the opcodes first and refuses every opcode that
//     names or calls Python code (GLOBAL, STACK_GLOBAL, REDUCE, BUILD, INST,
//     OBJ, NEWOBJ, NEWOBJ_EX, EXT1/2/4, PERSID, BINPERSID) and every
//     length field larger than the bytes left, so no input makes the
//     unpickler allocate more than the file's size;
//  2. plainValue converts what gopickle built into plain Go data (maps,
//     slices, strings, integers, floats, bools, nil) and refuses anything
//     else.
//
// A Flight Recorder dump needs nothing more: it is dicts, lists, tuples,
// strings and numbers.

// pickleOp describes an opcode's argument: fixed size n, or a length
// prefix of lenBytes bytes (then the data), or a line (text protocols).
type pickleOp struct {
	n        int
	lenBytes int
	line     bool
	lines    int // lines of a text argument (GLOBAL has two)
	refuse   bool
}

// pickleOps describes every opcode (known false: unknown), indexed by the
// opcode byte: checkPickle looks up one a byte.
var pickleOps = func() (ops [256]struct {
	pickleOp
	known bool
}) {
	m := map[byte]pickleOp{}
	fixed := func(op byte, n int) { m[op] = pickleOp{n: n} }
	for _, op := range []byte{'(', '.', '0', '2', '1', 'N', ')', ']', '}', 'a', 'e', 's', 'u', 't', 'l', 'd', 0x85, 0x86, 0x87, 0x88, 0x89, 0x8f, 0x90, 0x91, 0x94, 0x97, 0x98} {
		fixed(op, 0)
	}
	fixed('K', 1)                   // BININT1
	fixed('M', 2)                   // BININT2
	fixed('J', 4)                   // BININT
	fixed('G', 8)                   // BINFLOAT
	fixed('q', 1)                   // BINPUT
	fixed('r', 4)                   // LONG_BINPUT
	fixed('h', 1)                   // BINGET
	fixed('j', 4)                   // LONG_BINGET
	fixed(0x80, 1)                  // PROTO
	fixed(0x95, 8)                  // FRAME
	m[0x8a] = pickleOp{lenBytes: 1} // LONG1
	m[0x8b] = pickleOp{lenBytes: 4} // LONG4
	m['X'] = pickleOp{lenBytes: 4}  // BINUNICODE
	m[0x8c] = pickleOp{lenBytes: 1} // SHORT_BINUNICODE
	m[0x8d] = pickleOp{lenBytes: 8} // BINUNICODE8
	m['T'] = pickleOp{lenBytes: 4}  // BINSTRING
	m['U'] = pickleOp{lenBytes: 1}  // SHORT_BINSTRING
	m['B'] = pickleOp{lenBytes: 4}  // BINBYTES
	m['C'] = pickleOp{lenBytes: 1}  // SHORT_BINBYTES
	m[0x8e] = pickleOp{lenBytes: 8} // BINBYTES8
	m[0x96] = pickleOp{lenBytes: 8} // BYTEARRAY8
	for _, op := range []byte{'I', 'L', 'F', 'S', 'V', 'p', 'g'} {
		m[op] = pickleOp{line: true, lines: 1} // INT, LONG, FLOAT, STRING, UNICODE, PUT, GET
	}
	for _, op := range []byte{'c', 'i', 0x93, 'R', 'b', 'o', 0x81, 0x92, 0x82, 0x83, 0x84, 'P', 'Q'} {
		m[op] = pickleOp{refuse: true}
	}
	for op, d := range m {
		ops[op].pickleOp, ops[op].known = d, true
	}
	return ops
}()

// pickleOpNames names the refused opcodes in errors.
var pickleOpNames = map[byte]string{'c': "GLOBAL", 'i': "INST", 0x93: "STACK_GLOBAL", 'R': "REDUCE", 'b': "BUILD",
	'o': "OBJ", 0x81: "NEWOBJ", 0x92: "NEWOBJ_EX", 0x82: "EXT1", 0x83: "EXT2", 0x84: "EXT4", 'P': "PERSID", 'Q': "BINPERSID"}

// checkPickle is gate 1: it walks the opcodes of data up to STOP.
func checkPickle(data []byte) error {
	for pos := 0; pos < len(data); {
		op := data[pos]
		d := pickleOps[op]
		if !d.known {
			return fmt.Errorf("pickle: unknown opcode 0x%02x at byte %d", op, pos)
		}
		if d.refuse {
			return fmt.Errorf("pickle: opcode %s at byte %d would build a Python object: refused (only plain data is read)", pickleOpNames[op], pos)
		}
		pos++
		switch {
		case d.line:
			for l := 0; l < d.lines; l++ {
				i := bytes.IndexByte(data[pos:], '\n')
				if i < 0 {
					return errors.New("pickle: cut off inside a text argument")
				}
				pos += i + 1
			}
		case d.lenBytes > 0:
			if pos+d.lenBytes > len(data) {
				return errors.New("pickle: cut off inside a length")
			}
			var n uint64
			switch d.lenBytes {
			case 1:
				n = uint64(data[pos])
			case 4:
				n = uint64(binary.LittleEndian.Uint32(data[pos:]))
			case 8:
				n = binary.LittleEndian.Uint64(data[pos:])
			}
			pos += d.lenBytes
			if n > uint64(len(data)-pos) {
				return fmt.Errorf("pickle: a %d-byte value at byte %d runs past the end of the data", n, pos)
			}
			pos += int(n)
		default:
			if pos+d.n > len(data) {
				return errors.New("pickle: cut off inside an argument")
			}
			if op == 0x95 { // FRAME: its size must fit too
				if binary.LittleEndian.Uint64(data[pos:]) > uint64(len(data)-pos-8) {
					return errors.New("pickle: a frame runs past the end of the data")
				}
			}
			pos += d.n
		}
		if op == '.' {
			return nil
		}
	}
	return errors.New("pickle: no STOP opcode: the data is cut off")
}

// loadPickle reads data as a pickle of plain data.
func loadPickle(data []byte) (v any, err error) {
	if err := checkPickle(data); err != nil {
		return nil, err
	}
	if v, ok := fastPickle(data); ok {
		return v, nil
	}
	return slowPickle(data)
}

// slowPickle is loadPickle's generic path: gopickle, then plainValue.
func slowPickle(data []byte) (v any, err error) {
	defer func() {
		if p := recover(); p != nil {
			v, err = nil, fmt.Errorf("pickle: corrupt data: %v", p)
		}
	}()
	u := pickle.NewUnpickler(bytes.NewReader(data))
	u.FindClass = func(module, name string) (any, error) {
		return nil, fmt.Errorf("pickle refers to %s.%s: refused", module, name)
	}
	u.PersistentLoad = func(any) (any, error) { return nil, errors.New("persistent ids refused") }
	raw, err := u.Load()
	if err != nil {
		return nil, fmt.Errorf("pickle: %w", err)
	}
	budget := 4*len(data) + 1024 // memo references can share values: bound the copy
	return plainValue(raw, 0, &budget)
}

// plainValue is gate 2. budget bounds the values copied.
func plainValue(v any, depth int, budget *int) (any, error) {
	if depth > 64 {
		return nil, errors.New("pickle: nested more than 64 deep")
	}
	if *budget--; *budget < 0 {
		return nil, errors.New("pickle: shared references expand past the data's size: refused")
	}
	switch x := v.(type) {
	case nil, string, bool, int, int64, float64:
		return x, nil
	case int32:
		return int64(x), nil
	case *big.Int:
		if x.IsInt64() {
			return x.Int64(), nil
		}
		f, _ := new(big.Float).SetInt(x).Float64()
		return f, nil
	case float32:
		return float64(x), nil
	case []byte:
		return string(x), nil
	case *types.Dict:
		out := make(map[string]any, x.Len())
		for _, e := range *x {
			k, err := plainValue(e.Key, depth+1, budget)
			if err != nil {
				return nil, err
			}
			val, err := plainValue(e.Value, depth+1, budget)
			if err != nil {
				return nil, err
			}
			if s, ok := k.(string); ok {
				out[s] = val
			} else {
				out[fmt.Sprint(k)] = val
			}
		}
		return out, nil
	case *types.List:
		return plainList(*x, depth, budget)
	case *types.Tuple:
		return plainList(*x, depth, budget)
	case *types.FrozenSet:
		return nil, errors.New("pickle: frozenset refused")
	}
	return nil, fmt.Errorf("pickle: a %T is not plain data: refused", v)
}

func plainList(xs []any, depth int, budget *int) (any, error) {
	out := make([]any, len(xs))
	for i, e := range xs {
		v, err := plainValue(e, depth+1, budget)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// Helpers reading plain data.

func asMap(v any) map[string]any { m, _ := v.(map[string]any); return m }
func asList(v any) []any         { l, _ := v.([]any); return l }
func asString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int64, int, float64:
		return fmt.Sprint(x)
	}
	return ""
}

// asInt reads an integer (or a JSON number, or a string holding one); ok
// false for null and anything else.
func asInt(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case int:
		return int64(x), true
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 9e18 {
			return int64(x), true
		}
	case interface{ Int64() (int64, error) }: // json.Number
		n, err := x.Int64()
		return n, err == nil
	case string:
		var n int64
		_, err := fmt.Sscan(x, &n)
		return n, err == nil
	}
	return 0, false
}

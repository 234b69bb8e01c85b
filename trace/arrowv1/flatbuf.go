package arrowv1

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// This file is a bounds-checked reader for the few flatbuffer tables of
// the Arrow IPC format. arrow-go trusts the flatbuffers it is given: a
// vector length read from a corrupt file goes straight into make(), which
// can exhaust memory (a fatal error, not a panic), and a table that points
// at itself recurses forever. Every message and footer is verified here
// before arrow-go sees it.

// Limits on what a verified flatbuffer may hold.
const (
	maxFieldDepth = 32      // nesting of schema fields (list<struct<...>>)
	maxTables     = 1 << 16 // tables visited in one flatbuffer (no DAG blow-up)
)

var errFlatbuf = errors.New("malformed flatbuffer")

// fbuf is one flatbuffer under verification.
type fbuf struct {
	b      []byte
	tables int // tables visited so far
}

// fbTable is a verified table header: its position, vtable position and
// vtable size in bytes.
type fbTable struct {
	pos, vt, vtLen int
}

func (f *fbuf) fail(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errFlatbuf, fmt.Sprintf(format, args...))
}

// has reports whether n bytes at pos lie inside the buffer.
func (f *fbuf) has(pos, n int) bool {
	return pos >= 0 && n >= 0 && pos <= len(f.b) && n <= len(f.b)-pos
}

func (f *fbuf) u16(pos int) int    { return int(binary.LittleEndian.Uint16(f.b[pos:])) }
func (f *fbuf) u32(pos int) uint32 { return binary.LittleEndian.Uint32(f.b[pos:]) }

// root returns the root table.
func (f *fbuf) root() (fbTable, error) {
	if !f.has(0, 4) {
		return fbTable{}, f.fail("%d bytes, too short for a root offset", len(f.b))
	}
	return f.table(int64(f.u32(0)))
}

// table verifies the table header at pos.
func (f *fbuf) table(pos int64) (fbTable, error) {
	f.tables++
	if f.tables > maxTables {
		return fbTable{}, f.fail("more than %d tables", maxTables)
	}
	if pos < 0 || pos > int64(len(f.b)) || !f.has(int(pos), 4) {
		return fbTable{}, f.fail("table at %d outside %d bytes", pos, len(f.b))
	}
	p := int(pos)
	vt := pos - int64(int32(f.u32(p)))
	if vt < 0 || vt > int64(len(f.b)) || !f.has(int(vt), 4) {
		return fbTable{}, f.fail("vtable at %d outside %d bytes", vt, len(f.b))
	}
	v := int(vt)
	vtLen, tLen := f.u16(v), f.u16(v+2)
	switch {
	case vtLen < 4 || vtLen%2 != 0 || !f.has(v, vtLen):
		return fbTable{}, f.fail("vtable at %d: bad size %d", v, vtLen)
	case tLen < 4 || !f.has(p, tLen):
		return fbTable{}, f.fail("table at %d: bad size %d", p, tLen)
	}
	return fbTable{pos: p, vt: v, vtLen: vtLen}, nil
}

// field returns the position of field i of t, or 0 when it is absent.
func (f *fbuf) field(t fbTable, i int) int {
	voff := 4 + 2*i
	if voff+2 > t.vtLen {
		return 0
	}
	off := f.u16(t.vt + voff)
	if off == 0 {
		return 0
	}
	return t.pos + off
}

// scalar returns the position of scalar field i of size bytes, or 0 when it
// is absent.
func (f *fbuf) scalar(t fbTable, i, size int) (int, error) {
	p := f.field(t, i)
	if p != 0 && !f.has(p, size) {
		return 0, f.fail("field %d at %d outside the buffer", i, p)
	}
	return p, nil
}

// int64Field reads scalar field i as a little-endian int64 (def if absent).
func (f *fbuf) int64Field(t fbTable, i int, def int64) (int64, error) {
	p, err := f.scalar(t, i, 8)
	if err != nil || p == 0 {
		return def, err
	}
	return int64(binary.LittleEndian.Uint64(f.b[p:])), nil
}

// int16Field reads scalar field i as an int16 (def if absent).
func (f *fbuf) int16Field(t fbTable, i int, def int16) (int16, error) {
	p, err := f.scalar(t, i, 2)
	if err != nil || p == 0 {
		return def, err
	}
	return int16(f.u16(p)), nil
}

// byteField reads scalar field i as a byte (def if absent).
func (f *fbuf) byteField(t fbTable, i int, def byte) (byte, error) {
	p, err := f.scalar(t, i, 1)
	if err != nil || p == 0 {
		return def, err
	}
	return f.b[p], nil
}

// indirect follows the offset stored at pos.
func (f *fbuf) indirect(pos int) (int64, error) {
	if !f.has(pos, 4) {
		return 0, f.fail("offset at %d outside the buffer", pos)
	}
	target := int64(pos) + int64(f.u32(pos))
	if target >= int64(len(f.b)) {
		return 0, f.fail("offset at %d points to %d, outside %d bytes", pos, target, len(f.b))
	}
	return target, nil
}

// subTable returns table field i of t; ok is false when it is absent.
func (f *fbuf) subTable(t fbTable, i int) (sub fbTable, ok bool, err error) {
	p := f.field(t, i)
	if p == 0 {
		return fbTable{}, false, nil
	}
	target, err := f.indirect(p)
	if err != nil {
		return fbTable{}, false, err
	}
	sub, err = f.table(target)
	return sub, err == nil, err
}

// vector returns the first element position and length of vector field i
// of t whose elements are elemSize bytes (0, 0 when absent).
func (f *fbuf) vector(t fbTable, i, elemSize int) (start, n int, err error) {
	p := f.field(t, i)
	if p == 0 {
		return 0, 0, nil
	}
	target, err := f.indirect(p)
	if err != nil {
		return 0, 0, err
	}
	if !f.has(int(target), 4) {
		return 0, 0, f.fail("vector at %d outside the buffer", target)
	}
	length := int64(f.u32(int(target)))
	start = int(target) + 4
	if length*int64(elemSize) > int64(len(f.b)-start) {
		return 0, 0, f.fail("vector at %d: %d elements of %d bytes overrun %d bytes", target, length, elemSize, len(f.b))
	}
	return start, int(length), nil
}

// tables verifies vector-of-tables field i of t and calls each for every
// element.
func (f *fbuf) tablesField(t fbTable, i int, each func(fbTable) error) error {
	start, n, err := f.vector(t, i, 4)
	if err != nil {
		return err
	}
	for j := 0; j < n; j++ {
		target, err := f.indirect(start + 4*j)
		if err != nil {
			return err
		}
		sub, err := f.table(target)
		if err != nil {
			return err
		}
		if err := each(sub); err != nil {
			return err
		}
	}
	return nil
}

// str verifies string field i of t.
func (f *fbuf) str(t fbTable, i int) error {
	_, _, err := f.vector(t, i, 1)
	return err
}

// keyValues verifies a [KeyValue] field (custom metadata).
func (f *fbuf) keyValues(t fbTable, i int) error {
	return f.tablesField(t, i, func(kv fbTable) error {
		if err := f.str(kv, 0); err != nil {
			return err
		}
		return f.str(kv, 1)
	})
}

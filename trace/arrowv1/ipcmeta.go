package arrowv1

import (
	"encoding/binary"
	"fmt"
	"unsafe"
)

// Arrow IPC flatbuffer constants (format/Message.fbs, Schema.fbs, File.fbs).
const (
	headerSchema          = 1
	headerDictionaryBatch = 2
	headerRecordBatch     = 3

	metadataV4 = 3 // MetadataVersion.V4, Arrow >= 0.8
	metadataV5 = 4 // MetadataVersion.V5, Arrow >= 1.0

	typeTimestamp = 10
	typeUnion     = 14

	codecLZ4  = 0
	codecZSTD = 1
)

// msgInfo is what the verifier learned about one message.
type msgInfo struct {
	header     byte       // headerSchema, headerDictionaryBatch or headerRecordBatch
	bodyLen    int64      // bytes of body after the metadata
	rows       int64      // record batch (or dictionary batch) length
	buffers    [][2]int64 // (offset, length) of each body buffer
	compressed bool       // buffers start with their uncompressed length
	codec      byte       // codecLZ4 or codecZSTD, when compressed
	variadic   []int64
	dictFields int // schema: its dictionary-encoded fields, at any depth
}

// headerName names a message header type for errors.
func headerName(h byte) string {
	switch h {
	case headerSchema:
		return "schema"
	case headerDictionaryBatch:
		return "dictionary batch"
	case headerRecordBatch:
		return "record batch"
	}
	return fmt.Sprintf("message type %d", h)
}

// verifyMessage checks the Message flatbuffer meta: every offset and vector
// in bounds, a supported metadata version and header type. Buffer ranges
// are checked against the body by msgInfo.checkBody.
func verifyMessage(meta []byte) (msgInfo, error) {
	f := &fbuf{b: meta}
	var info msgInfo
	m, err := f.root()
	if err != nil {
		return info, err
	}
	version, err := f.int16Field(m, 0, 0)
	if err != nil {
		return info, err
	}
	if version != metadataV4 && version != metadataV5 {
		return info, fmt.Errorf("unsupported arrow metadata version V%d", version+1)
	}
	if info.header, err = f.byteField(m, 1, 0); err != nil {
		return info, err
	}
	if info.bodyLen, err = f.int64Field(m, 3, 0); err != nil {
		return info, err
	}
	if info.bodyLen < 0 {
		return info, fmt.Errorf("negative body length %d", info.bodyLen)
	}
	if err := f.keyValues(m, 4); err != nil {
		return info, err
	}
	hdr, ok, err := f.subTable(m, 2)
	if err != nil {
		return info, err
	}
	if !ok {
		return info, fmt.Errorf("%s message without a header", headerName(info.header))
	}
	switch info.header {
	case headerSchema:
		err = verifySchema(f, hdr, &info.dictFields)
	case headerRecordBatch:
		err = verifyRecordBatch(f, hdr, &info)
	case headerDictionaryBatch:
		// DictionaryBatch: id (0), data (1), isDelta (2).
		if _, err = f.int64Field(hdr, 0, 0); err != nil {
			return info, err
		}
		if _, err = f.byteField(hdr, 2, 0); err != nil {
			return info, err
		}
		data, ok, derr := f.subTable(hdr, 1)
		if derr != nil {
			return info, derr
		}
		if !ok {
			return info, fmt.Errorf("dictionary batch without data")
		}
		err = verifyRecordBatch(f, data, &info)
	default:
		err = fmt.Errorf("unsupported %s", headerName(info.header))
	}
	return info, err
}

// verifySchema checks a Schema table: endianness (0), fields (1),
// custom_metadata (2), features (3), and counts its dictionary-encoded
// fields into dicts.
func verifySchema(f *fbuf, s fbTable, dicts *int) error {
	if _, err := f.int16Field(s, 0, 0); err != nil {
		return err
	}
	if _, _, err := f.vector(s, 3, 8); err != nil {
		return err
	}
	if err := f.keyValues(s, 2); err != nil {
		return err
	}
	return f.tablesField(s, 1, func(field fbTable) error { return verifyField(f, field, 1, dicts) })
}

// verifyField checks a Field table: name (0), nullable (1), type_type (2),
// type (3), dictionary (4), children (5), custom_metadata (6), and counts
// the dictionary-encoded fields among it and its children into dicts.
func verifyField(f *fbuf, fl fbTable, depth int, dicts *int) error {
	if depth > maxFieldDepth {
		return fmt.Errorf("schema nested deeper than %d fields", maxFieldDepth)
	}
	if err := f.str(fl, 0); err != nil {
		return err
	}
	if _, err := f.byteField(fl, 1, 0); err != nil {
		return err
	}
	typ, err := f.byteField(fl, 2, 0)
	if err != nil {
		return err
	}
	if tt, ok, err := f.subTable(fl, 3); err != nil {
		return err
	} else if ok {
		switch typ {
		case typeTimestamp: // unit (0), timezone (1)
			if err := f.str(tt, 1); err != nil {
				return err
			}
		case typeUnion: // mode (0), typeIds (1)
			if _, _, err := f.vector(tt, 1, 4); err != nil {
				return err
			}
		}
	}
	// DictionaryEncoding: id (0), indexType (1, an Int table), isOrdered (2),
	// dictionaryKind (3).
	if de, ok, err := f.subTable(fl, 4); err != nil {
		return err
	} else if ok {
		if _, err := f.int64Field(de, 0, 0); err != nil {
			return err
		}
		if _, _, err := f.subTable(de, 1); err != nil {
			return err
		}
		*dicts++
	}
	if err := f.keyValues(fl, 6); err != nil {
		return err
	}
	return f.tablesField(fl, 5, func(child fbTable) error { return verifyField(f, child, depth+1, dicts) })
}

// verifyRecordBatch checks a RecordBatch table: length (0), nodes (1),
// buffers (2), compression (3), variadicBufferCounts (4).
func verifyRecordBatch(f *fbuf, rb fbTable, info *msgInfo) error {
	var err error
	if info.rows, err = f.int64Field(rb, 0, 0); err != nil {
		return err
	}
	if info.rows < 0 || info.rows > 1<<31-1 {
		return fmt.Errorf("batch length %d out of range", info.rows)
	}
	if _, _, err := f.vector(rb, 1, 16); err != nil {
		return err
	}
	bufStart, nbuf, err := f.vector(rb, 2, 16)
	if err != nil {
		return err
	}
	if at := unsafe.Pointer(unsafe.SliceData(f.b[bufStart:])); littleEndian && uintptr(at)%8 == 0 {
		// The flatbuffer's (offset, length) pairs as they lie in the
		// message: a frame already holds the input (its body), and a
		// read of a fleet's rank files allocated 0.7 bytes an event
		// copying them.
		info.buffers = unsafe.Slice((*[2]int64)(at), nbuf)
		return verifyCompression(f, rb, info)
	}
	info.buffers = make([][2]int64, nbuf)
	for i := range info.buffers {
		p := bufStart + 16*i
		info.buffers[i] = [2]int64{
			int64(binary.LittleEndian.Uint64(f.b[p:])),
			int64(binary.LittleEndian.Uint64(f.b[p+8:])),
		}
	}
	return verifyCompression(f, rb, info)
}

// verifyCompression checks a RecordBatch table's compression (3) and
// variadic buffer counts (4), against the nbuf buffers of info.
func verifyCompression(f *fbuf, rb fbTable, info *msgInfo) error {
	nbuf := len(info.buffers)
	if c, ok, err := f.subTable(rb, 3); err != nil {
		return err
	} else if ok {
		codec, err := f.byteField(c, 0, codecLZ4)
		if err != nil {
			return err
		}
		if codec != codecLZ4 && codec != codecZSTD {
			return fmt.Errorf("unknown compression codec %d", codec)
		}
		method, err := f.byteField(c, 1, 0)
		if err != nil {
			return err
		}
		if method != 0 {
			return fmt.Errorf("unknown body compression method %d", method)
		}
		info.compressed, info.codec = true, codec
	}
	vStart, nv, err := f.vector(rb, 4, 8)
	if err != nil {
		return err
	}
	info.variadic = make([]int64, nv)
	for i := range info.variadic {
		v := int64(binary.LittleEndian.Uint64(f.b[vStart+8*i:]))
		if v < 0 || v > int64(nbuf) {
			return fmt.Errorf("variadic buffer count %d out of range", v)
		}
		info.variadic[i] = v
	}
	return nil
}

// checkBody checks that every buffer of a batch lies inside body and that a
// compressed buffer starts with a valid uncompressed length (-1 for a
// buffer stored uncompressed).
func (info *msgInfo) checkBody(body []byte) error {
	if err := info.checkRanges(body); err != nil {
		return err
	}
	if !info.compressed {
		return nil
	}
	for i, b := range info.buffers {
		off, n := b[0], b[1]
		if n == 0 {
			continue
		}
		size := int64(binary.LittleEndian.Uint64(body[off:]))
		if size < -1 {
			return fmt.Errorf("compressed buffer %d: uncompressed length %d", i, size)
		}
		if size >= 0 && info.codec == codecZSTD {
			if err := checkZstd(body[off+8:off+n], size); err != nil {
				return fmt.Errorf("compressed buffer %d: %w", i, err)
			}
		}
	}
	return nil
}

// checkRanges is checkBody without reading the body: every buffer lies
// inside it, and a compressed one is long enough for its length prefix.
// The prefixes are what a decoder of the buffer checks (batchBufs.read):
// framing that reads only the message headers of a mapped file leaves its
// bodies' pages untouched.
func (info *msgInfo) checkRanges(body []byte) error {
	for i, b := range info.buffers {
		off, n := b[0], b[1]
		if off < 0 || n < 0 || off > int64(len(body)) || n > int64(len(body))-off {
			return fmt.Errorf("buffer %d (offset %d, length %d) outside the %d-byte body", i, off, n, len(body))
		}
		if info.compressed && n > 0 && n < 8 {
			return fmt.Errorf("compressed buffer %d: %d bytes, too short for its length prefix", i, n)
		}
	}
	return nil
}

// block is a footer entry: where one message lies in an Arrow file.
type block struct {
	offset  int64 // of the message's continuation marker or length
	metaLen int32 // prefix, flatbuffer and padding
	bodyLen int64
}

// footerInfo is a verified Arrow file footer.
type footerInfo struct {
	dicts, records []block
}

// verifyFooter checks a Footer flatbuffer: version (0), schema (1),
// dictionaries (2), recordBatches (3), custom_metadata (4).
func verifyFooter(meta []byte) (footerInfo, error) {
	f := &fbuf{b: meta}
	var info footerInfo
	ft, err := f.root()
	if err != nil {
		return info, err
	}
	if _, err := f.int16Field(ft, 0, 0); err != nil {
		return info, err
	}
	if s, ok, err := f.subTable(ft, 1); err != nil {
		return info, err
	} else if ok {
		var dicts int // the schema message's count is the one used
		if err := verifySchema(f, s, &dicts); err != nil {
			return info, err
		}
	}
	if err := f.keyValues(ft, 4); err != nil {
		return info, err
	}
	blocks := func(i int) ([]block, error) {
		start, n, err := f.vector(ft, i, 24)
		if err != nil {
			return nil, err
		}
		out := make([]block, n)
		for j := range out {
			p := start + 24*j
			out[j] = block{
				offset:  int64(binary.LittleEndian.Uint64(f.b[p:])),
				metaLen: int32(binary.LittleEndian.Uint32(f.b[p+8:])),
				bodyLen: int64(binary.LittleEndian.Uint64(f.b[p+16:])),
			}
		}
		return out, nil
	}
	if info.dicts, err = blocks(2); err != nil {
		return info, err
	}
	info.records, err = blocks(3)
	return info, err
}

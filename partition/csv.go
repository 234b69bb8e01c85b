package partition

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Reserved layer names: a row named so (any case) is not a layer but an
// extra cost of the first (embedding) or last (loss) stage.
const (
	EmbeddingName = "embedding"
	LossName      = "loss"
)

// ReadCSV reads a model from CSV: one header row naming the columns, then
// one row per layer in model order.
//
//	layer,fwd_ms,bwd_ms,act_bytes
//	embedding,0.4,0.6,0
//	block.0,1.2,2.4,50331648
//	...
//	loss,0.8,0.5,0
//
// layer, fwd_ms and bwd_ms are required, act_bytes is optional (0 when the
// column is absent); columns may come in any order and unknown columns are
// ignored. fwd_ms and bwd_ms are one micro-batch's forward and whole
// backward time of the layer (ms), act_bytes the activation bytes one
// micro-batch keeps on its stage from its forward to its backward. Rows
// named embedding and loss (at most one each, anywhere) are counted on the
// first and the last stage. Blank lines and lines starting with '#' are
// skipped. Errors name the line.
func ReadCSV(r io.Reader) (*Model, error) {
	cr := csv.NewReader(r)
	cr.Comment = '#'
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	header, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("empty layers file: want a header row layer,fwd_ms,bwd_ms,act_bytes")
	}
	if err != nil {
		return nil, fmt.Errorf("reading the header: %w", err)
	}
	col := map[string]int{}
	for i, h := range header {
		h = strings.ToLower(strings.TrimSpace(h))
		if _, dup := col[h]; dup {
			return nil, fmt.Errorf("header: column %q given twice", h)
		}
		col[h] = i
	}
	for _, need := range []string{"layer", "fwd_ms", "bwd_ms"} {
		if _, ok := col[need]; !ok {
			return nil, fmt.Errorf("header %q: no %s column (want layer,fwd_ms,bwd_ms[,act_bytes])", strings.Join(header, ","), need)
		}
	}
	m := &Model{}
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		line, _ := cr.FieldPos(0)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		get := func(name string) string {
			i, ok := col[name]
			if !ok || i >= len(rec) {
				return ""
			}
			return strings.TrimSpace(rec[i])
		}
		l := Layer{Name: get("layer")}
		if l.Name == "" {
			return nil, fmt.Errorf("line %d: empty layer name", line)
		}
		for _, f := range []struct {
			name string
			dst  *float64
		}{{"fwd_ms", &l.FwdMs}, {"bwd_ms", &l.BwdMs}} {
			x, err := strconv.ParseFloat(get(f.name), 64)
			if err != nil || x < 0 || math.IsInf(x, 0) || math.IsNaN(x) || x > MaxLayerMs {
				return nil, fmt.Errorf("line %d (%s): %s %q: want a number in [0, %g]", line, l.Name, f.name, get(f.name), float64(MaxLayerMs))
			}
			*f.dst = x
		}
		if s := get("act_bytes"); s != "" {
			x, err := strconv.ParseInt(s, 10, 64)
			if err != nil || x < 0 || x > MaxActBytes {
				return nil, fmt.Errorf("line %d (%s): act_bytes %q: want an integer in [0, %d]", line, l.Name, s, int64(MaxActBytes))
			}
			l.ActBytes = x
		}
		switch strings.ToLower(l.Name) {
		case EmbeddingName:
			if m.Embedding != nil {
				return nil, fmt.Errorf("line %d: a second %s row", line, EmbeddingName)
			}
			m.Embedding = &l
		case LossName:
			if m.Loss != nil {
				return nil, fmt.Errorf("line %d: a second %s row", line, LossName)
			}
			m.Loss = &l
		default:
			if len(m.Layers) >= MaxLayers {
				return nil, fmt.Errorf("line %d: more than %d layers", line, MaxLayers)
			}
			m.Layers = append(m.Layers, l)
		}
	}
	if len(m.Layers) == 0 {
		return nil, fmt.Errorf("no layers (only a header, or only embedding and loss rows)")
	}
	return m, nil
}

// Input limits of ReadCSV and Solve: they keep every sum of costs (ns)
// and of bytes within int64.
const (
	MaxLayers   = 1 << 14
	MaxLayerMs  = 1e6     // 1000 s
	MaxActBytes = 1 << 40 // 1 TiB per layer and micro-batch
)

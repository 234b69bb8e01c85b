package ingest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ppprof/ppprof/internal/frdump"
	"github.com/ppprof/ppprof/sim"
)

// BenchmarkFRPickle decodes one rank's Flight Recorder dump of 2000
// entries (frdump: PP 16 x TP 8, 4 TP collectives of each kind a compute
// op) three ways: loadFRPickle (entries straight into their fields),
// fastPickle (plain data) and the generic path (gopickle, then plain
// data); "read" is the whole reader of the dump (loadFRPickle, then the
// trace's rows). It reports entries/s.
func BenchmarkFRPickle(b *testing.B) {
	dir := b.TempDir()
	c := frdump.Config{Sim: sim.Config{Schedule: "1f1b", Stages: 16, TP: 8, MicroBatches: 32, Steps: 2, P2PLatencyUs: 20}, Layers: 4, Entries: 2000}
	if _, _, err := frdump.Write(dir, c); err != nil {
		b.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "_dump_40"))
	if err != nil {
		b.Fatal(err)
	}
	for _, m := range []struct {
		name string
		f    func([]byte) (any, error)
	}{
		{"fr", loadFRPickle},
		{"plain", loadPickle},
		{"read", func(d []byte) (any, error) { // the whole reader: decoded, then rows
			return readFlightRecorder("_dump_40", d, false, nil, nil)
		}},
		{"generic", func(d []byte) (any, error) {
			if err := checkPickle(d); err != nil {
				return nil, err
			}
			return slowPickle(d)
		}},
	} {
		b.Run(m.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := m.f(data); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(2000*float64(b.N)/b.Elapsed().Seconds(), "entries/s")
		})
	}
}

package arrowv1

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// TestReadLeavesInput: Read never writes to its input, so reading the same
// bytes again gives the same answer (arrow-go byte-swaps a big-endian
// input in place unless told not to; on a read-only mapping that is a
// crash). Big-endian data is refused with a clear error.
func TestReadLeavesInput(t *testing.T) {
	be, err := os.ReadFile("testdata/big-endian.arrows")
	if err != nil {
		t.Fatal(err)
	}
	inputs := map[string][]byte{"big-endian.arrows": be}
	for name, data := range fuzzSeeds(t) {
		inputs[name] = data
	}
	for name, data := range inputs {
		orig := bytes.Clone(data)
		_, err1 := Read(data)
		if !bytes.Equal(data, orig) {
			t.Fatalf("%s: Read changed its input", name)
		}
		_, err2 := Read(data)
		if (err1 == nil) != (err2 == nil) || (err1 != nil && err1.Error() != err2.Error()) {
			t.Fatalf("%s: two reads of the same bytes: %v, then %v", name, err1, err2)
		}
	}
	if _, err := Read(be); err == nil || !strings.Contains(err.Error(), "big-endian") {
		t.Errorf("big-endian input: %v, want an error saying big-endian", err)
	}
}

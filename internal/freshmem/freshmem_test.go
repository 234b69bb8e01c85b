package freshmem

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// TestTouch: the mapping has the size asked for, every page holds the
// byte written to it and no other byte is written; a size of 0 is an
// error.
func TestTouch(t *testing.T) {
	if runtime.GOOS != "linux" {
		if _, err := Touch(PageSize, false); err == nil {
			t.Fatal("Touch off Linux: no error")
		}
		return
	}
	for _, huge := range []bool{false, true} {
		n := 3<<20 + 5*PageSize + 17 // not a whole number of pages
		m, err := Touch(n, huge)
		if err != nil {
			t.Fatal(err)
		}
		if len(m.B) != n || m.Took <= 0 {
			t.Fatalf("huge %v: %d bytes in %v, want %d", huge, len(m.B), m.Took, n)
		}
		for i, c := range m.B {
			if want := byte(0); i%PageSize == 0 {
				want = 1
				if c != want {
					t.Fatalf("huge %v: byte %d is %d, want %d", huge, i, c, want)
				}
			} else if c != want {
				t.Fatalf("huge %v: byte %d is %d, want %d", huge, i, c, want)
			}
		}
		if err := Release(m); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Touch(0, false); err == nil {
		t.Fatal("Touch(0): no error")
	}
}

// TestReporting reads the parameters it names from a directory laid out
// as the kernel's, and nothing from one that does not exist.
func TestReporting(t *testing.T) {
	dir := t.TempDir()
	if got := reportingIn(filepath.Join(dir, "absent")); got != "" {
		t.Fatalf("no directory: %q", got)
	}
	for name, v := range map[string]string{"min_free_ms": "0\n", "page_reporting_order": "9\n", "reported_kib": "123\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := reportingIn(dir), "min_free_ms=0 page_reporting_order=9"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

package cleanup

import (
	"os"
	"path/filepath"
	"testing"
)

// TestCleanup: RemoveAll removes what is tracked (a file, a directory and
// what it holds), not what was forgotten or is not tracked; Remove
// removes and forgets.
func TestCleanup(t *testing.T) {
	dir := t.TempDir()
	file, sub, kept, other, gone := filepath.Join(dir, "f"), filepath.Join(dir, "d"), filepath.Join(dir, "k"), filepath.Join(dir, "o"), filepath.Join(dir, "g")
	for _, p := range []string{file, kept, other, gone} {
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(sub, "in"), 0o755); err != nil {
		t.Fatal(err)
	}
	Track(file)
	Track(sub)
	Track(kept)
	Track(gone)
	Forget(kept)
	Remove(gone)
	if _, err := os.Stat(gone); !os.IsNotExist(err) {
		t.Errorf("Remove left %s", gone)
	}
	if got := len(Tracked()); got != 2 {
		t.Errorf("%d paths tracked, want 2: %v", got, Tracked())
	}
	RemoveAll()
	for _, p := range []string{file, sub} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("RemoveAll left %s", p)
		}
	}
	for _, p := range []string{kept, other} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("RemoveAll removed %s, not tracked", p)
		}
	}
	if got := Tracked(); len(got) != 0 {
		t.Errorf("still tracked: %v", got)
	}
}

//go:build linux

package hugepage

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"unsafe"
)

// vmFlags returns the VmFlags of the mapping holding address a, from
// /proc/self/smaps.
func vmFlags(t *testing.T, a uintptr) []string {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skipf("no /proc/self/smaps: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	in := false
	for sc.Scan() {
		line := sc.Text()
		var lo, hi uintptr
		if n, _ := fmt.Sscanf(line, "%x-%x", &lo, &hi); n == 2 && strings.Contains(strings.Fields(line)[0], "-") {
			in = a >= lo && a < hi
			continue
		}
		if in && strings.HasPrefix(line, "VmFlags:") {
			return strings.Fields(strings.TrimPrefix(line, "VmFlags:"))
		}
	}
	t.Fatalf("no mapping holds %#x", a)
	return nil
}

// TestSliceAdvises checks that a large slice's whole huge pages are
// marked for huge pages (the mapping's "hg" flag), and that the memory
// keeps what it holds.
func TestSliceAdvises(t *testing.T) {
	if !Enabled {
		t.Skip("turned off by the environment")
	}
	if _, err := os.Stat("/sys/kernel/mm/transparent_hugepage/enabled"); err != nil {
		t.Skipf("a kernel without transparent huge pages: %v", err)
	}
	s := make([]int64, 3*Size/8) // 6 MiB: at least two whole huge pages inside
	s[0], s[len(s)-1] = 7, 9
	Slice(s)
	start := (uintptr(unsafe.Pointer(&s[0])) + Size - 1) &^ (Size - 1)
	if !slices.Contains(vmFlags(t, start), "hg") || !slices.Contains(vmFlags(t, start+Size), "hg") {
		t.Fatalf("the huge pages inside the slice are not advised: %v", vmFlags(t, start))
	}
	for i := range s {
		s[i] += int64(i)
	}
	if s[0] != 7 || s[len(s)-1] != 9+int64(len(s)-1) || s[len(s)/2] != int64(len(s)/2) {
		t.Fatal("the memory changed")
	}
}

// TestAdviseSmall checks that allocations under MinBytes and empty
// slices are left alone (no system call with a bad range).
func TestAdviseSmall(t *testing.T) {
	Slice([]byte(nil))
	b := make([]byte, MinBytes-1)
	Slice(b)
	Advise(unsafe.Pointer(&b[0]), 0)
}

// TestMake checks that Make's slices start on a huge-page boundary when
// large (every huge page they reach advised, the last one whole), hold n
// zeroed elements with no room past them, and that small ones are plain.
func TestMake(t *testing.T) {
	if !Enabled {
		t.Skip("turned off by the environment")
	}
	if _, err := os.Stat("/sys/kernel/mm/transparent_hugepage/enabled"); err != nil {
		t.Skipf("a kernel without transparent huge pages: %v", err)
	}
	for _, n := range []int{MakeMin / 8, Size/8 + 1, MinBytes / 8, 3 * Size / 8, MinBytes/8 + 5} {
		s := Make[int64](n)
		if len(s) != n || cap(s) != n {
			t.Fatalf("Make(%d): len %d cap %d", n, len(s), cap(s))
		}
		p := uintptr(unsafe.Pointer(&s[0]))
		if p%Size != 0 {
			t.Fatalf("Make(%d) starts at %#x, not on a huge page", n, p)
		}
		end := p + uintptr(n*8+Size-1)&^(Size-1) // the end of the last huge page reached
		for _, a := range []uintptr{p, end - Size, end - 1} {
			if !slices.Contains(vmFlags(t, a), "hg") {
				t.Fatalf("Make(%d): %#x not advised: %v", n, a, vmFlags(t, a))
			}
		}
		for i, v := range s {
			if v != 0 {
				t.Fatalf("Make(%d)[%d] = %d", n, i, v)
			}
		}
		s[0], s[n-1] = 1, 2
	}
	if s := Make[int64](10); len(s) != 10 || cap(s) != 10 {
		t.Fatalf("small Make: len %d cap %d", len(s), cap(s))
	}
	odd := Make[[3]byte](MinBytes)
	if len(odd) != MinBytes || cap(odd) != MinBytes {
		t.Fatalf("Make of a size that does not divide a huge page: len %d cap %d", len(odd), cap(odd))
	}
	inside := (uintptr(unsafe.Pointer(&odd[0])) + Size - 1) &^ (Size - 1)
	if !slices.Contains(vmFlags(t, inside), "hg") {
		t.Fatalf("Make of a size that does not divide a huge page: its whole huge pages not advised: %v", vmFlags(t, inside))
	}
}

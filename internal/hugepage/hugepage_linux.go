package hugepage

import "syscall"

const supported = true

// madvHugepage is MADV_HUGEPAGE.
const madvHugepage = 14

// advise is madvise(MADV_HUGEPAGE) of [start, start+n); a failure (a
// kernel without transparent huge pages) leaves the pages as they were.
func advise(start, n uintptr) {
	syscall.Syscall(syscall.SYS_MADVISE, start, n, madvHugepage)
}

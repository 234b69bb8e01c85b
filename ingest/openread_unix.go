//go:build unix

package ingest

import (
	"os"
	"syscall"
)

// openRead opens path for reading, as os.Open does, but leaves the
// descriptor out of the runtime's network poller: os.Open offers every
// file to epoll, which refuses regular files, and sets the descriptor
// non-blocking and back around the refusal (five system calls more an
// open). ppprof opens each of a job's thousands of rank files more than
// once; reading a regular file blocks either way.
func openRead(path string) (*os.File, error) {
	for {
		fd, err := syscall.Open(local(path), syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "open", Path: path, Err: err}
		}
		return os.NewFile(uintptr(fd), path), nil
	}
}

// Package readhead reads configuration files with a bound, so that a huge
// or endless file (a device, a FIFO) cannot exhaust memory before its size
// is refused.
package readhead

import (
	"io"
	"os"
)

// File returns at most max+1 bytes from the start of the file at path: a
// result longer than max means the file is larger than the caller accepts.
// Errors are os.Open's and the read's.
func File(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, max+1))
}

// Package procrss reads a Linux process's resident set (VmRSS in
// /proc/<pid>/status), for the memory-measuring commands of the bench
// module.
package procrss

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Of is the resident set of process pid in bytes, from the kB figure of
// its VmRSS line; an error if the status file cannot be read or holds no
// VmRSS (not Linux, or a kernel thread).
func Of(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmRSS")
}

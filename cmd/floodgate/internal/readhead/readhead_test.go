package readhead

import (
	"os"
	"path/filepath"
	"testing"
)

func TestFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.yaml")
	if err := os.WriteFile(path, []byte("0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	for max, want := range map[int64]string{20: "0123456789", 10: "0123456789", 4: "01234"} {
		if got, err := File(path, max); err != nil || string(got) != want {
			t.Errorf("File(max %d) = %q, %v; want %q", max, got, err, want)
		}
	}
	if _, err := File(filepath.Join(t.TempDir(), "missing"), 10); !os.IsNotExist(err) {
		t.Errorf("a missing file: %v", err)
	}
}

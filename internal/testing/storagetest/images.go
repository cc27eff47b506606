package storagetest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Images makes an 8 MiB raw disk image with recognisable non-zero 4 KiB
// blocks (block i holds byte i) and every third block a hole, converts it
// to qcow2 with qemu-img, and gives both images' bytes. It fails t when
// qemu-img fails (call RequireTool first).
func Images(t testing.TB) (raw, qcow2 []byte) {
	t.Helper()
	dir := t.TempDir()
	rawPath, qPath := filepath.Join(dir, "src.raw"), filepath.Join(dir, "src.qcow2")
	b := make([]byte, 8<<20)
	for i := 0; i < len(b); i += 4096 {
		if (i/4096)%3 != 0 { // every third block stays a hole
			copy(b[i:], bytes.Repeat([]byte{byte(i / 4096)}, 4096))
		}
	}
	if err := os.WriteFile(rawPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("qemu-img", "convert", "-f", "raw", "-O", "qcow2", rawPath, qPath).CombinedOutput()
	if err != nil {
		t.Fatalf("qemu-img convert: %v: %s", err, out)
	}
	q, err := os.ReadFile(qPath)
	if err != nil {
		t.Fatal(err)
	}
	return b, q
}

package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// initFunctions gives the definitions of init.sh's shell functions names,
// as init.sh has them (a line "name() {" to the next line "}").
func initFunctions(t *testing.T, names ...string) string {
	t.Helper()
	var b strings.Builder
	for _, n := range names {
		m := regexp.MustCompile(`(?ms)^` + n + `\(\) \{\n.*?^\}\n`).Find(initScript)
		if m == nil {
			t.Fatalf("init.sh has no function %s", n)
		}
		b.Write(m)
	}
	return b.String()
}

// TestDataDisks runs init.sh's userdata, datadisks and diskwrites, as
// init runs them at boot, with busybox sh (the guest's shell) on files
// standing for the disks: a disk whose first sector starts with
// "CONVERGE-DATA <text>" is printed, others not; each converge-write
// line of the user data writes its disk's first sector (the rest of the
// disk kept) and is confirmed; a bad directive is an error line; and the
// next boot prints the new text.
func TestDataDisks(t *testing.T) {
	sh, err := exec.LookPath("busybox")
	if err != nil {
		t.Skip("busybox not found (Debian's busybox or busybox-static)")
	}
	dir := t.TempDir()
	sysblock, devdir := filepath.Join(dir, "sys"), filepath.Join(dir, "dev")
	rest := bytes.Repeat([]byte{0xaa}, 1024) // beyond the first sector
	disks := map[string][]byte{
		"vda": append(append([]byte{0xeb, 0x3c, 0x90}, make([]byte, 509)...), rest...), // a boot sector
		"vdb": append(append([]byte("CONVERGE-DATA old text\n"), make([]byte, 512-23)...), rest...),
		"vdc": append(make([]byte, 512), rest...),
	}
	for name, body := range disks {
		if err := os.MkdirAll(filepath.Join(sysblock, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(devdir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(devdir, name), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	userData := filepath.Join(dir, "user-data")
	if err := os.WriteFile(userData, []byte("#cloud-config\nconverge-write vdb new text\nconverge-write sda no\nconverge-write vdz gone\nconverge-write vdc"), 0o644); err != nil {
		t.Fatal(err)
	}
	boot := func(script string) string {
		t.Helper()
		cmd := exec.Command(sh, "sh", "-c", "sysblock="+sysblock+" devdir="+devdir+" writes="+filepath.Join(dir, "writes")+"\n"+
			initFunctions(t, "userdata", "datadisks", "diskwrites")+script)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v:\n%s", err, out)
		}
		return string(out)
	}
	got := boot("userdata " + userData + "\ndatadisks\ndiskwrites \"$writes\"\n")
	want := "CONVERGE-GUEST-USERDATA #cloud-config\n" +
		"CONVERGE-GUEST-USERDATA converge-write vdb new text\n" +
		"CONVERGE-GUEST-USERDATA converge-write sda no\n" +
		"CONVERGE-GUEST-USERDATA converge-write vdz gone\n" +
		"CONVERGE-GUEST-USERDATA converge-write vdc\n" +
		"CONVERGE-GUEST-DATA vdb old text\n" +
		"CONVERGE-GUEST-WROTE vdb new text\n" +
		"CONVERGE-GUEST-ERROR converge-write: sda is not a virtio disk (vdX)\n" +
		"CONVERGE-GUEST-ERROR converge-write: no disk vdz\n" +
		"CONVERGE-GUEST-WROTE vdc \n"
	if got != want {
		t.Errorf("first boot printed\n%s\nwant\n%s", got, want)
	}
	b, err := os.ReadFile(filepath.Join(devdir, "vdb"))
	if err != nil {
		t.Fatal(err)
	}
	wantDisk := append(append([]byte("CONVERGE-DATA new text\n"), make([]byte, 512-23)...), rest...)
	if !bytes.Equal(b, wantDisk) {
		t.Errorf("vdb after the write: %q..., want %q... and %d bytes kept after the first sector", b[:40], wantDisk[:40], len(rest))
	}
	if got, want := boot("datadisks\n"), "CONVERGE-GUEST-DATA vdb new text\nCONVERGE-GUEST-DATA vdc \n"; got != want {
		t.Errorf("next boot printed\n%s\nwant\n%s", got, want)
	}
}

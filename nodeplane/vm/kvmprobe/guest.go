package kvmprobe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Stages is the debug console output of a probe guest that completed:
// real mode, protected mode, timer interrupts, long mode.
const Stages = "RPTL"

// exitOK is QEMU's exit status when the guest writes 0x31 to
// isa-debug-exit: (0x31 << 1) | 1.
const exitOK = 99

// stageNames name each stage for messages.
var stageNames = map[byte]string{'R': "real mode", 'P': "protected mode", 'T': "timer interrupts", 'L': "long mode"}

// GuestOptions configure RunGuest.
type GuestOptions struct {
	// QEMU is the qemu-system-x86_64 binary.
	QEMU string
	// Accel is QEMU's accelerator: kvm (the probe) or tcg (to test the
	// guest itself).
	Accel string
	// Timeout bounds the guest's run; QEMU is killed then.
	Timeout time.Duration
	// Dir is where the firmware image is written (a temporary directory
	// is made in it and removed).
	Dir string
}

// DefaultGuestOptions gives /usr/bin/qemu-system-x86_64, kvm, a 10 s
// timeout (a guest under KVM completes in milliseconds, QEMU included in
// well under a second) and the system's temporary directory.
func DefaultGuestOptions() GuestOptions {
	return GuestOptions{QEMU: "/usr/bin/qemu-system-x86_64", Accel: "kvm", Timeout: 10 * time.Second, Dir: os.TempDir()}
}

// Guest is how a probe guest run went.
type Guest struct {
	// OK is true when the guest completed every stage and QEMU exited
	// with the guest's status.
	OK bool
	// Stages is what the guest wrote to its debug console.
	Stages string
	// Elapsed is the run's wall time, QEMU's start included.
	Elapsed time.Duration
	// Problem says what went wrong when not OK.
	Problem string
}

// RunGuest runs the probe guest (ROM) in a QEMU child process with
// o.Accel and no devices but the debug console and isa-debug-exit, and
// gives how it went. It cannot hang its caller: QEMU runs in its own
// process group, which is killed (SIGKILL) at o.Timeout or when ctx ends,
// and RunGuest gives up waiting for it 5 s after that (a process stuck in
// the kernel), saying so.
func RunGuest(ctx context.Context, o GuestOptions) Guest {
	start := time.Now()
	dir, err := os.MkdirTemp(o.Dir, "kvmprobe-")
	if err != nil {
		return Guest{Problem: fmt.Sprintf("writing the probe firmware: %v", err)}
	}
	defer os.RemoveAll(dir)
	rom := filepath.Join(dir, "probe.rom")
	if err := os.WriteFile(rom, ROM(), 0o644); err != nil {
		return Guest{Problem: fmt.Sprintf("writing the probe firmware: %v", err)}
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, o.QEMU,
		"-machine", "pc,accel="+o.Accel, "-nodefaults", "-no-user-config", "-display", "none",
		"-m", "16", "-bios", rom, "-no-reboot",
		"-device", "isa-debug-exit,iobase=0xf4,iosize=0x04", "-debugcon", "stdio")
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		return Guest{Problem: fmt.Sprintf("starting %s: %v", o.QEMU, err), Elapsed: time.Since(start)}
	}
	go func() { done <- cmd.Wait() }()
	var runErr error
	select {
	case runErr = <-done:
	case <-time.After(o.Timeout + 5*time.Second):
		return Guest{Problem: fmt.Sprintf("%s (pid %d) did not exit within 5 s of SIGKILL", o.QEMU, cmd.Process.Pid), Elapsed: time.Since(start)}
	}
	g := Guest{Stages: strings.Map(keepStage, stdout.String()), Elapsed: time.Since(start)}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		g.Problem = fmt.Sprintf("the probe guest %s and hung: killed after %s", reached(g.Stages), o.Timeout)
	case errors.As(runErr, &ee) && ee.ExitCode() == exitOK && g.Stages == Stages:
		g.OK = true
	case runErr == nil || errors.As(runErr, &ee):
		g.Problem = fmt.Sprintf("QEMU exited (%v) after the probe guest %s: %s", exitText(runErr), reached(g.Stages), lastLine(stderr.String()))
	default:
		g.Problem = fmt.Sprintf("running %s: %v", o.QEMU, runErr)
	}
	return g
}

// reached describes how far a guest got from its output.
func reached(stages string) string {
	if stages == "" {
		return "wrote nothing (not even in real mode)"
	}
	last := stageNames[stages[len(stages)-1]]
	if len(stages) >= len(Stages) {
		return "completed " + last
	}
	return fmt.Sprintf("reached %s but not %s (output %q, want %q)", last, stageNames[Stages[len(stages)]], stages, Stages)
}

// keepStage drops everything but the stage letters.
func keepStage(r rune) rune {
	if r < 128 && stageNames[byte(r)] != "" {
		return r
	}
	return -1
}

func exitText(err error) string {
	if err == nil {
		return "status 0"
	}
	return err.Error()
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if l := strings.TrimSpace(lines[len(lines)-1]); l != "" {
		return l
	}
	return "no error output"
}

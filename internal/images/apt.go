package images

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// AptOptions say where and how Fetch runs apt.
type AptOptions struct {
	// Dir holds apt's private state, kept between runs (bin/images/apt):
	// sources.list, lists/ (the package indices), an empty dpkg status,
	// cache/ (apt's binary caches) and archives/ (the downloaded .debs).
	Dir string
	// Sources is the sources.list apt reads (one-line format), in place
	// of the host's.
	Sources string
	// Architecture of the packages.
	Architecture string
	// Refresh runs apt-get update even when Dir already has lists.
	Refresh bool
	// Output receives apt's progress (Get:… lines); nil discards it.
	Output io.Writer
}

// BookwormSources is Debian 12's main component from deb.debian.org
// (bookworm, bookworm-updates, bookworm-security), signed by the keys of
// the debian-archive-keyring package, as Debian's own
// /etc/apt/sources.list.d/debian.sources lists them.
const BookwormSources = `deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm main
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm-updates main
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian-security bookworm-security main
`

// DefaultAptOptions gives options keeping apt's state in dir, reading
// BookwormSources for amd64.
func DefaultAptOptions(dir string) AptOptions {
	return AptOptions{Dir: dir, Sources: BookwormSources, Architecture: "amd64"}
}

// Package is one downloaded Debian package.
type Package struct {
	// Name, Version and Architecture as apt names them.
	Name, Version, Architecture string
	// File is the .deb in AptOptions.Dir/archives.
	File string
}

// String gives name=version, as apt-get install takes it.
func (p Package) String() string { return p.Name + "=" + p.Version }

// ErrAptUnreachable wraps a failure to update the package lists or to
// download a package: the mirror could not be reached (or refused).
var ErrAptUnreachable = errors.New("apt: package lists or packages could not be downloaded")

// Fetch resolves the dependency closure of names (Depends and
// Pre-Depends, no Recommends) with apt-get against an empty dpkg status,
// so that nothing installed on the host hides a dependency, downloads the
// .debs that Dir/archives does not hold yet and gives the closure sorted
// by name. apt-get update (--error-on=any: an index that fails to
// download is an error, not a warning) runs when Dir has no lists yet,
// when Refresh is set, or once when a download fails with lists already there (a version
// superseded on the mirror); otherwise the lists of the first run are
// kept, so the closure, and the image, change only on a refresh. The
// answer is remembered in Dir (resolved-*.json) with a digest of the
// lists and options: while those do not change and the .debs are there,
// Fetch answers without running apt. Runs on one Dir are serialised with
// a lock file.
func Fetch(ctx context.Context, o AptOptions, names ...string) ([]Package, error) {
	if len(names) == 0 {
		return nil, errors.New("apt: no package names")
	}
	for _, bin := range []string{"apt-get", "dpkg-deb"} {
		if _, err := exec.LookPath(bin); err != nil {
			return nil, fmt.Errorf("apt: %s not found: the images are built from Debian packages with apt (Debian or Ubuntu host)", bin)
		}
	}
	a, err := o.prepare()
	if err != nil {
		return nil, err
	}
	unlock, err := lockFile(filepath.Join(o.Dir, "lock"))
	if err != nil {
		return nil, err
	}
	defer unlock()

	if !o.Refresh {
		if pkgs, ok := a.cached(names); ok {
			return pkgs, nil
		}
	}
	updated := false
	if o.Refresh || !hasLists(filepath.Join(a.dir, "lists")) {
		if err := a.run(ctx, o.Output, "update", "--error-on=any"); err != nil {
			return nil, fmt.Errorf("%w: apt-get update: %w", ErrAptUnreachable, err)
		}
		updated = true
	}
	for {
		pkgs, err := a.resolve(ctx, names)
		if err != nil {
			return nil, err
		}
		derr := a.run(ctx, o.Output, append([]string{"install", "--download-only", "-y"}, names...)...)
		if derr == nil {
			if err := a.check(pkgs); err != nil {
				return nil, err
			}
			return pkgs, a.remember(names, pkgs)
		}
		if updated {
			return nil, fmt.Errorf("%w: apt-get install --download-only: %w", ErrAptUnreachable, derr)
		}
		fmt.Fprintf(out(o.Output), "apt: download failed (%v); updating the package lists and trying again\n", derr)
		if err := a.run(ctx, o.Output, "update", "--error-on=any"); err != nil {
			return nil, fmt.Errorf("%w: apt-get update: %w", ErrAptUnreachable, err)
		}
		updated = true
	}
}

// out gives w, or io.Discard for nil.
func out(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// hasLists reports whether dir holds a Packages index.
func hasLists(dir string) bool {
	m, _ := filepath.Glob(filepath.Join(dir, "*_Packages*"))
	return len(m) > 0
}

// apt runs apt-get with the private configuration of one AptOptions.
type apt struct {
	dir  string
	args []string
}

// prepare creates Dir's layout (sources.list, an empty status, the
// directories) and gives the apt-get options pointing every path there.
// The host's apt.conf is still read (a proxy set there applies); its
// sources, preferences, dpkg status and cache settings are not.
func (o AptOptions) prepare() (*apt, error) {
	if o.Dir == "" || o.Sources == "" || o.Architecture == "" {
		return nil, fmt.Errorf("apt: options need Dir, Sources and Architecture (got %q, %d bytes of sources, %q)", o.Dir, len(o.Sources), o.Architecture)
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, err
	}
	for _, d := range []string{"lists/partial", "archives/partial", "cache", "empty"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "sources.list"), []byte(o.Sources), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "status"), nil, 0o644); err != nil {
		return nil, err
	}
	args := []string{"-q",
		"-o", "Dir::Etc::SourceList=" + dir + "/sources.list",
		"-o", "Dir::Etc::SourceParts=" + dir + "/empty",
		"-o", "Dir::Etc::Preferences=" + dir + "/empty/preferences",
		"-o", "Dir::Etc::PreferencesParts=" + dir + "/empty",
		"-o", "Dir::State=" + dir,
		"-o", "Dir::State::Lists=" + dir + "/lists",
		"-o", "Dir::State::status=" + dir + "/status",
		"-o", "Dir::State::extended_states=" + dir + "/extended_states",
		"-o", "Dir::Cache=" + dir + "/cache",
		"-o", "Dir::Cache::Archives=" + dir + "/archives",
		"-o", "Dir::Cache::pkgcache=" + dir + "/cache/pkgcache.bin",
		"-o", "Dir::Cache::srcpkgcache=" + dir + "/cache/srcpkgcache.bin",
		"-o", "APT::Architecture=" + o.Architecture,
		"-o", "APT::Architectures=" + o.Architecture,
		"-o", "APT::Install-Recommends=false",
		"-o", "APT::Install-Suggests=false",
		"-o", "Acquire::Languages=none",
		"-o", "APT::Get::List-Cleanup=true",
	}
	if os.Geteuid() == 0 {
		// apt drops to _apt to download, which may not write under a
		// developer's checkout; the private directories are root's.
		args = append(args, "-o", "APT::Sandbox::User=root")
	}
	return &apt{dir: dir, args: args}, nil
}

// run runs apt-get with the private options and args, its output to w;
// the error carries the last lines of that output.
func (a *apt) run(ctx context.Context, w io.Writer, args ...string) error {
	cmd := exec.CommandContext(ctx, "apt-get", append(append([]string{}, a.args...), args...)...)
	var tail tailBuffer
	progress := &progressLines{w: out(w)}
	defer progress.flush()
	cmd.Stdout = io.MultiWriter(progress, &tail)
	cmd.Stderr = io.MultiWriter(progress, &tail)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive", "LC_ALL=C")
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("apt-get %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(tail.String()))
	}
	return nil
}

// resolve asks apt-get for the closure (install -s against the empty
// status) and parses its "Inst NAME (VERSION … [ARCH])" lines.
func (a *apt) resolve(ctx context.Context, names []string) ([]Package, error) {
	var stdout bytes.Buffer
	cmd := exec.CommandContext(ctx, "apt-get", append(append(append([]string{}, a.args...), "install", "-s", "-y"), names...)...)
	cmd.Stdout = &stdout
	var stderr tailBuffer
	cmd.Stderr = &stderr
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive", "LC_ALL=C")
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("apt: resolving %s: %w: %s%s", strings.Join(names, " "), err, strings.TrimSpace(stderr.String()), lastLines(stdout.String(), 10))
	}
	pkgs, err := parseSimulation(stdout.String(), a.dir+"/archives")
	if err != nil {
		return nil, fmt.Errorf("apt: resolving %s: %w", strings.Join(names, " "), err)
	}
	return pkgs, nil
}

// parseSimulation reads the Inst lines of `apt-get install -s`.
func parseSimulation(out, archives string) ([]Package, error) {
	var pkgs []Package
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		l := sc.Text()
		if !strings.HasPrefix(l, "Inst ") {
			continue
		}
		// Inst NAME (VERSION RELEASE… [ARCH]) [trailing notes]
		f := strings.Fields(l)
		open := strings.Index(l, "(")
		closeAt := -1
		if open >= 0 {
			closeAt = strings.Index(l[open:], ")") + open
		}
		var version, arch string
		if open >= 0 && closeAt > open {
			in := l[open+1 : closeAt]
			if i, j := strings.LastIndex(in, "["), strings.LastIndex(in, "]"); i >= 0 && j > i {
				arch = in[i+1 : j]
			}
			if vf := strings.Fields(in); len(vf) > 0 {
				version = vf[0]
			}
		}
		if len(f) < 3 || version == "" || arch == "" || strings.HasPrefix(f[2], "[") {
			return nil, fmt.Errorf("unexpected line %q: want Inst NAME (VERSION ... [ARCH])", l)
		}
		name := f[1]
		pkgs = append(pkgs, Package{Name: name, Version: version, Architecture: arch,
			File: filepath.Join(archives, name+"_"+strings.ReplaceAll(version, ":", "%3a")+"_"+arch+".deb")})
	}
	if len(pkgs) == 0 {
		return nil, fmt.Errorf("apt-get install -s listed no package to install:%s", lastLines(out, 10))
	}
	sort.Slice(pkgs, func(i, j int) bool { return pkgs[i].Name < pkgs[j].Name })
	return pkgs, nil
}

// resolutionKey digests what apt's answer for names depends on: the
// names, apt's options (sources, architecture, directories) and every
// file of the lists (name, size, modification time).
func (a *apt) resolutionKey(names []string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "names %q\noptions %q\n", names, a.args)
	src, err := os.ReadFile(filepath.Join(a.dir, "sources.list"))
	if err != nil {
		return "", err
	}
	h.Write(src)
	des, err := os.ReadDir(filepath.Join(a.dir, "lists"))
	if err != nil {
		return "", err
	}
	for _, de := range des {
		fi, err := de.Info()
		if err != nil {
			return "", err
		}
		if fi.Mode().IsRegular() && de.Name() != "lock" {
			fmt.Fprintf(h, "list %s %d %d\n", de.Name(), fi.Size(), fi.ModTime().UnixNano())
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// resolution is a remembered answer of Fetch.
type resolution struct {
	Key      string    `json:"key"`
	Packages []Package `json:"packages"`
}

// resolutionFile is where Fetch remembers its answer for names.
func (a *apt) resolutionFile(names []string) string {
	sum := sha256.Sum256([]byte(strings.Join(names, " ")))
	return filepath.Join(a.dir, "resolved-"+hex.EncodeToString(sum[:8])+".json")
}

// cached gives the packages Fetch resolved and downloaded for names
// before, when the lists have not changed since and every .deb is still
// there: apt would give the same answer and download nothing.
func (a *apt) cached(names []string) ([]Package, bool) {
	key, err := a.resolutionKey(names)
	if err != nil {
		return nil, false
	}
	b, err := os.ReadFile(a.resolutionFile(names))
	if err != nil {
		return nil, false
	}
	var r resolution
	if json.Unmarshal(b, &r) != nil || r.Key != key || len(r.Packages) == 0 {
		return nil, false
	}
	if a.check(r.Packages) != nil {
		return nil, false
	}
	return r.Packages, true
}

// remember records the answer for names (cached reads it).
func (a *apt) remember(names []string, pkgs []Package) error {
	key, err := a.resolutionKey(names)
	if err != nil {
		return err
	}
	b, err := json.Marshal(resolution{Key: key, Packages: pkgs})
	if err != nil {
		return err
	}
	return os.WriteFile(a.resolutionFile(names), b, 0o644)
}

// check verifies that every resolved package's .deb is in archives.
func (a *apt) check(pkgs []Package) error {
	for _, p := range pkgs {
		if _, err := os.Stat(p.File); err != nil {
			return fmt.Errorf("apt: %s %s: downloaded, but %s is missing: %w", p.Name, p.Version, p.File, err)
		}
	}
	return nil
}

// lockFile takes an exclusive flock on path, waiting for it.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: flock: %w", path, err)
	}
	return func() { f.Close() }, nil
}

// progressLines passes on the lines of apt-get's output that tell its
// progress and problems (Get:, Hit:, Err:, Fetched, Need to get, E:, W:),
// leaving out the package lists it prints before a download.
type progressLines struct {
	w   io.Writer
	buf []byte
}

// progressPrefixes start the lines progressLines passes on.
var progressPrefixes = []string{"Get:", "Hit:", "Ign:", "Err:", "Fetched ", "Need to get ", "E:", "W:"}

func (p *progressLines) Write(b []byte) (int, error) {
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		p.line(p.buf[:i+1])
		p.buf = p.buf[i+1:]
	}
}

func (p *progressLines) line(l []byte) {
	for _, pre := range progressPrefixes {
		if bytes.HasPrefix(l, []byte(pre)) {
			p.w.Write(l)
			return
		}
	}
}

// flush passes on an unterminated last line.
func (p *progressLines) flush() {
	if len(p.buf) > 0 {
		p.line(append(p.buf, '\n'))
		p.buf = nil
	}
}

// tailBuffer keeps the last 4 KiB written to it.
type tailBuffer struct{ b []byte }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > 4096 {
		t.b = t.b[len(t.b)-4096:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return string(t.b) }

// lastLines gives the last n lines of s, each on a new line, for errors.
func lastLines(s string, n int) string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	if len(ls) == 1 && ls[0] == "" {
		return ""
	}
	return "\n" + strings.Join(ls, "\n")
}

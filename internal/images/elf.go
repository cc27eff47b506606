package images

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
)

// libraryDirs are the directories Debian's ld.so searches without an
// ld.so.cache (glibc built with slibdir /lib/x86_64-linux-gnu and libdir
// /usr/lib/x86_64-linux-gnu), in its order; with merged /usr the /lib ones
// are the /usr ones.
var libraryDirs = []string{"lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu", "lib", "usr/lib"}

// Linkage is what CheckLinked found for one ELF file.
type Linkage struct {
	// Path of the file in the image.
	Path string
	// Interpreter is its program interpreter (PT_INTERP), "" for a
	// static binary or a library.
	Interpreter string
	// Libraries maps each shared library needed, directly or through
	// another, to where it is in the image (after symlinks).
	Libraries map[string]string
}

// CheckLinked checks, for each ELF file at paths in the image t, what the
// dynamic loader would need inside the image: the program interpreter,
// every DT_NEEDED library (recursively, searched in DT_RUNPATH/DT_RPATH
// with $ORIGIN, then libraryDirs), and every symbol version it needs from
// a library (GLIBC_2.34, LIBVIRT_9.0.0: a binary linked against a newer
// library than the image holds fails here rather than at start). It gives
// what it found per path, or an error naming each missing piece and who
// needs it.
func CheckLinked(t *Tree, paths ...string) ([]Linkage, error) {
	c := &linkChecker{t: t, files: map[string]*elfInfo{}}
	var out []Linkage
	var problems []string
	for _, p := range paths {
		l, errs := c.check(strings.TrimPrefix(p, "/"))
		out = append(out, l)
		problems = append(problems, errs...)
	}
	if len(problems) > 0 {
		return out, fmt.Errorf("dynamic linking inside the image:\n  %s", strings.Join(problems, "\n  "))
	}
	return out, nil
}

// elfInfo is what the checker reads of one ELF file.
type elfInfo struct {
	interp   string
	needed   []string
	runpath  []string
	verneeds []elf.DynamicVersionNeed
	verdefs  map[string]bool
}

// linkChecker caches parsed ELF files of one tree.
type linkChecker struct {
	t     *Tree
	files map[string]*elfInfo
}

// read parses the ELF file at the resolved image path p.
func (c *linkChecker) read(p string) (*elfInfo, error) {
	if info, ok := c.files[p]; ok {
		return info, nil
	}
	r, err := c.t.Open(p)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(r)
	r.Close()
	if err != nil {
		return nil, fmt.Errorf("/%s: %w", p, err)
	}
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("/%s: not an ELF file: %w", p, err)
	}
	defer f.Close()
	info := &elfInfo{verdefs: map[string]bool{}}
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			s, err := io.ReadAll(prog.Open())
			if err != nil {
				return nil, fmt.Errorf("/%s: PT_INTERP: %w", p, err)
			}
			info.interp = strings.TrimRight(string(s), "\x00")
		}
	}
	if f.Section(".dynamic") == nil {
		c.files[p] = info // static
		return info, nil
	}
	if info.needed, err = f.DynString(elf.DT_NEEDED); err != nil {
		return nil, fmt.Errorf("/%s: DT_NEEDED: %w", p, err)
	}
	for _, tag := range []elf.DynTag{elf.DT_RUNPATH, elf.DT_RPATH} {
		rp, _ := f.DynString(tag)
		for _, s := range rp {
			for _, d := range strings.Split(s, ":") {
				d = strings.ReplaceAll(strings.ReplaceAll(d, "${ORIGIN}", "/"+path.Dir(p)), "$ORIGIN", "/"+path.Dir(p))
				info.runpath = append(info.runpath, strings.TrimPrefix(path.Clean(d), "/"))
			}
		}
	}
	if info.verneeds, err = f.DynamicVersionNeeds(); err != nil && !isNoSection(err) {
		return nil, fmt.Errorf("/%s: version needs: %w", p, err)
	}
	defs, err := f.DynamicVersions()
	if err != nil && !isNoSection(err) {
		return nil, fmt.Errorf("/%s: version definitions: %w", p, err)
	}
	for _, d := range defs {
		info.verdefs[d.Name] = true
	}
	c.files[p] = info
	return info, nil
}

// isNoSection reports debug/elf's errors for an object without dynamic
// symbols or without version tables.
func isNoSection(err error) bool {
	return errors.Is(err, elf.ErrNoSymbols) || strings.Contains(err.Error(), "missing version table")
}

// find gives where the loader finds library name for an object with
// runpath.
func (c *linkChecker) find(name string, runpath []string) (string, bool) {
	for _, d := range append(append([]string{}, runpath...), libraryDirs...) {
		if r, err := c.t.Resolve(d + "/" + name); err == nil {
			return r, true
		}
	}
	return "", false
}

// check walks p's dependencies breadth-first.
func (c *linkChecker) check(p string) (Linkage, []string) {
	l := Linkage{Path: "/" + p, Libraries: map[string]string{}}
	root, err := c.t.Resolve(p)
	if err != nil {
		return l, []string{err.Error()}
	}
	info, err := c.read(root)
	if err != nil {
		return l, []string{err.Error()}
	}
	var problems []string
	l.Interpreter = info.interp
	if info.interp != "" && !c.t.Exists(info.interp) {
		problems = append(problems, fmt.Sprintf("/%s: program interpreter %s is not in the image", p, info.interp))
	}
	type item struct{ path, via string }
	queue := []item{{root, ""}}
	seen := map[string]bool{root: true}
	for len(queue) > 0 {
		it := queue[0]
		queue = queue[1:]
		obj, err := c.read(it.path)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		who := "/" + p
		if it.via != "" {
			who += " (through " + it.via + ")"
		}
		for _, name := range obj.needed {
			at, ok := c.find(name, obj.runpath)
			if !ok {
				problems = append(problems, fmt.Sprintf("%s needs %s: not in %s", who, name, strings.Join(libraryDirs, ", ")))
				continue
			}
			l.Libraries[name] = "/" + at
			if !seen[at] {
				seen[at] = true
				queue = append(queue, item{at, name})
			}
		}
		for _, vn := range obj.verneeds {
			at, ok := c.find(vn.Name, obj.runpath)
			if !ok {
				continue // reported above
			}
			lib, err := c.read(at)
			if err != nil {
				problems = append(problems, err.Error())
				continue
			}
			for _, dep := range vn.Needs {
				if !lib.verdefs[dep.Dep] {
					problems = append(problems, fmt.Sprintf("%s needs version %s of %s, which /%s does not define (built against a newer library than the image's?)", who, dep.Dep, vn.Name, at))
				}
			}
		}
	}
	sort.Strings(problems)
	return l, problems
}

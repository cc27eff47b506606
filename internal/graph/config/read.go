package config

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// file is a config file as read: its path (the directory Load was given
// joined with its name) and its content.
type file struct {
	path string
	data []byte
}

// readFiles reads the config at path: every *.yaml, *.yml and *.json
// file directly in the directory path names, or the single file it names.
// Files are read through an os.Root of that directory, so that a symbolic
// link is followed only while it stays inside; a link that leads out of
// it, anything but a regular file, a file above MaxFileBytes and files
// above MaxConfigBytes together are refused. It gives the files sorted by
// name and one line per refused file, each naming the file; an error when
// path cannot be read at all or holds no config file.
func readFiles(path string) ([]file, []string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, nil, fmt.Errorf("config: %w", err)
	}
	dir, names := path, []string(nil)
	if !st.IsDir() {
		dir, names = filepath.Dir(path), []string{filepath.Base(path)}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("config: %w", err)
	}
	defer root.Close()
	if names == nil {
		if names, err = listNames(root); err != nil {
			return nil, nil, fmt.Errorf("config: %s: %w", path, err)
		}
		if len(names) == 0 {
			return nil, nil, fmt.Errorf("%s: no *.yaml, *.yml or *.json files", path)
		}
	}
	var (
		files []file
		lines []string
		total int64
	)
	for _, name := range names {
		p := filepath.Join(dir, name)
		if !st.IsDir() {
			p = path
		}
		data, skip, err := readFile(root, name, MaxConfigBytes-total)
		switch {
		case errors.Is(err, errTotal):
			return nil, append(lines, fmt.Sprintf("%s: the config's files exceed %d bytes (MaxConfigBytes) together; a config is a handful of manifests", p, MaxConfigBytes)), nil
		case err != nil:
			lines = append(lines, fmt.Sprintf("%s: %v", p, err))
		case !skip:
			total += int64(len(data))
			files = append(files, file{path: p, data: data})
		}
	}
	if len(files) == 0 && len(lines) == 0 {
		return nil, nil, fmt.Errorf("%s: no *.yaml, *.yml or *.json files", path)
	}
	return files, lines, nil
}

// listNames gives the names in root's directory that end in .yaml, .yml
// or .json (any case), sorted.
func listNames(root *os.Root) ([]string, error) {
	d, err := root.Open(".")
	if err != nil {
		return nil, err
	}
	defer d.Close()
	entries, err := d.ReadDir(-1)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		switch strings.ToLower(filepath.Ext(e.Name())) {
		case ".yaml", ".yml", ".json":
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names, nil
}

// errTotal is readFile's refusal of a file that would take the config
// above MaxConfigBytes.
var errTotal = errors.New("above MaxConfigBytes")

// readFile reads the file name of root, at most MaxFileBytes of it and
// errTotal when it holds more than left bytes. skip is true for a
// directory (one named like a config file is not one). The error says
// why a file is refused, without its name.
func readFile(root *os.Root, name string, left int64) (data []byte, skip bool, err error) {
	st, err := root.Stat(name)
	if err != nil {
		return nil, false, statError(root, name, err)
	}
	if st.IsDir() {
		return nil, true, nil
	}
	if !st.Mode().IsRegular() {
		return nil, false, notRegular(st.Mode())
	}
	// O_NONBLOCK: should the file have been replaced by a named pipe
	// since Stat, opening it does not wait for a writer.
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, false, statError(root, name, err)
	}
	defer f.Close()
	if st, err = f.Stat(); err != nil {
		return nil, false, err
	}
	if !st.Mode().IsRegular() {
		return nil, false, notRegular(st.Mode())
	}
	limit := min(int64(MaxFileBytes), left)
	// Stat's size is not trusted (a file may grow while it is read):
	// the read itself stops one byte past the limit.
	data, err = io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, false, err
	}
	if int64(len(data)) > limit {
		if limit < MaxFileBytes {
			return nil, false, errTotal
		}
		return nil, false, fmt.Errorf("larger than %d bytes (MaxFileBytes); a config file holds a few manifests", MaxFileBytes)
	}
	return data, false, nil
}

// statError explains why name could not be opened: for a symbolic link,
// where it leads (os.Root refuses one that leaves the directory).
func statError(root *os.Root, name string, err error) error {
	target, lerr := root.Readlink(name)
	if lerr != nil {
		return err
	}
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("symbolic link to %q leads to nothing", target)
	}
	return fmt.Errorf("symbolic link to %q is refused: a config is read only from inside its directory, and a link may not lead out of it (%v)", target, err)
}

// notRegular refuses a file of mode m, which is not a regular file.
func notRegular(m fs.FileMode) error {
	what := fmt.Sprintf("a special file (mode %v)", m)
	switch {
	case m&fs.ModeNamedPipe != 0:
		what = "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		what = "a socket"
	case m&fs.ModeCharDevice != 0:
		what = "a character device"
	case m&fs.ModeDevice != 0:
		what = "a device"
	}
	return fmt.Errorf("%s, not a regular file: a config is read from regular files only", what)
}

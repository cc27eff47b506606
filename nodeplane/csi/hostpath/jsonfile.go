package hostpath

import (
	"encoding/json"
	"os"
	"path"
)

// writeJSON replaces the file dir/name under root with v as indented JSON,
// atomically: a temporary file .name.tmp in dir, fsync, rename. dir must
// already be a directory of root; errors are the underlying ones.
func writeJSON(root *os.Root, dir, name string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := path.Join(dir, "."+name+".tmp")
	f, err := root.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Rename(tmp, path.Join(dir, name))
	}
	return err
}

package libvirt

import (
	"os"
	"path/filepath"
)

// emptyNodeXML is a libvirt test-driver node with no domains, networks or
// pools: one NUMA node, 2 cores at 2500 MHz, 4 GiB.
const emptyNodeXML = `<node>
  <cpu>
    <nodes>1</nodes>
    <sockets>1</sockets>
    <cores>2</cores>
    <threads>1</threads>
    <active>2</active>
    <mhz>2500</mhz>
    <model>x86_64</model>
  </cpu>
  <memory>4194304</memory>
</node>
`

// EmptyTestNode writes the description of an empty libvirt test-driver
// node into dir (a test's temporary directory) and gives the URI to
// connect to it, "test://<absolute path>". Every connection to that URI
// gets its own copy of the state, so tests (and the agent they run) do not
// see each other's domains, with no daemon and no root. It gives the
// error of writing the file.
func EmptyTestNode(dir string) (string, error) {
	path, err := filepath.Abs(filepath.Join(dir, "empty-node.xml"))
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(path, []byte(emptyNodeXML), 0o644); err != nil {
		return "", err
	}
	return "test://" + path, nil
}

// OpenEmptyTestNode connects to a fresh EmptyTestNode in dir; the caller
// closes the connection.
func OpenEmptyTestNode(dir string) (*Conn, error) {
	uri, err := EmptyTestNode(dir)
	if err != nil {
		return nil, err
	}
	return Connect(uri)
}

package config

// Bounds on what Load reads and decodes. A config is a handful of
// manifests; the bounds keep a hostile repository (a file of gigabytes, a
// symbolic link to /dev/zero, a mapping of a million keys) from
// exhausting the memory or the time of the controller that loads it,
// whose memory limit is 1 GiB.
const (
	// MaxFileBytes is the largest config file Load reads: 8 MiB, over
	// five times the largest object etcd stores (1.5 MiB).
	MaxFileBytes = 8 << 20
	// MaxConfigBytes bounds the files of one config together: 32 MiB.
	MaxConfigBytes = 32 << 20
	// MaxNodes bounds the YAML nodes (mappings, lists and scalars; keys
	// are not counted) of one config together: 524,288. Decoding costs memory by the node, not
	// by the byte: 8 MiB of "[1,1,1,...]" are 4 million nodes and took
	// 1.2 GiB in yaml.v3 and CUE's syntax tree alone. A config of a
	// hundred VMs holds some 20,000 nodes.
	MaxNodes = 1 << 19
	// MaxCollectionItems bounds the keys of one mapping, the items of
	// one list and the documents of one file: 4096. CUE builds a struct
	// or list in time quadratic in its size (24,000 keys in one mapping,
	// 200 KB of YAML, take seconds; 300,000 took over ten minutes), so
	// without the bound a file far below MaxFileBytes could hold a
	// reconcile for hours. A config's objects come nowhere near it:
	// KubeVirt allows a VM 256 disks.
	MaxCollectionItems = 4096
)

// nodeBound bounds from above the nodes checkSyntax counts in data (the
// values and list items, not the keys), without decoding data, which
// costs memory by the node: each but the first follows one of : - , [
// (a value, an item, a document after its ---), and a line feed, { and ?
// are counted too, so a scalar holding them counts more nodes than it
// is. Aliases are not expanded: CUE's decoder bounds that on its own
// (50,000 nodes).
func nodeBound(data []byte) int {
	n := 1
	for _, b := range data {
		switch b {
		case '\n', ',', ':', '-', '?', '[', '{':
			n++
		}
	}
	return n
}

package masquerade

import (
	"github.com/google/nftables"
)

// Chains gives the names of the chains of the table ip nat in the
// namespace at netnsPath (none when there is no such table).
func Chains(netnsPath string) ([]string, error) {
	var out []string
	err := withConn(netnsPath, func(c *nftables.Conn) error {
		chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyIPv4)
		if err != nil {
			return err
		}
		for _, ch := range chains {
			if ch.Table.Name == TableName {
				out = append(out, ch.Name)
			}
		}
		return nil
	})
	return out, err
}

// Rules gives the rules of each chain of the table ip nat in the
// namespace at netnsPath, as the kernel holds them, by chain name.
func Rules(netnsPath string) (map[string][]*nftables.Rule, error) {
	out := map[string][]*nftables.Rule{}
	err := withConn(netnsPath, func(c *nftables.Conn) error {
		chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyIPv4)
		if err != nil {
			return err
		}
		for _, ch := range chains {
			if ch.Table.Name != TableName {
				continue
			}
			rules, err := c.GetRules(ch.Table, ch)
			if err != nil {
				return err
			}
			out[ch.Name] = rules
		}
		return nil
	})
	return out, err
}

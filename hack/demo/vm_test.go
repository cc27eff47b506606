package main

import "testing"

func TestConsoleHighlight(t *testing.T) {
	for _, c := range []struct {
		line string
		want bool
	}{
		{"[    0.000000] Linux version 6.1.0-50-cloud-amd64 (debian-kernel@lists.debian.org)", true},
		{"[   29.425958] cloud-init[239]: Cloud-init v. 22.4.2 running 'init-local' at Sat, 28 Nov 2026 11:28:10 +0000. Up 29.05 seconds.", true},
		{"[   38.1] cloud-init[301]: ci-info: |  eth0  | True |         10.244.0.12          | 255.255.255.0 | global | 52:54:00:1a:2b:3c |", true},
		{"[   38.1] cloud-init[301]: ci-info: |  eth0  | True | fe80::5054:ff:fe1a:2b3c/64 |       .       |  link  | 52:54:00:1a:2b:3c |", false},
		{"[   38.1] cloud-init[301]: ci-info: |   lo   | True |          127.0.0.1           |   255.0.0.0   |  host  |         .         |", false},
		{"[   54.061970] cloud-init[377]: hello from cloud-init, committed to Git", true},
		{"hello from cloud-init, committed to Git", true},
		{"  - echo hello from cloud-init, committed to Git", false},
		{"web login: [   53.514456] cloud-init[377]: Cloud-init v. 22.4.2 running 'modules:final'", true},
		{"[  OK  ] Started systemd-udevd.service - Rule-based Manager for Device Events and Files.", false},
	} {
		if got := consoleHighlight(c.line); got != c.want {
			t.Errorf("consoleHighlight(%q) = %v, want %v", c.line, got, c.want)
		}
	}
}

#!/bin/sh
# udhcpc's event script in converge's end-to-end test guest (busybox
# udhcpc -s): on a lease, give $interface the address and the default
# route, then print one line on the console:
#   CONVERGE-GUEST-DHCP <hostname> ip=ADDR/PREFIX router=GW
# udhcpc sets interface, ip, mask (the prefix length) and router (a list;
# the first is used; the first interface leased with a router keeps
# the default route).
case "$1" in
deconfig)
	ip addr flush dev "$interface"
	ip link set "$interface" up
	;;
bound | renew)
	ip addr flush dev "$interface"
	ip addr add "$ip/$mask" dev "$interface"
	gw=
	for r in $router; do
		gw=$r
		break
	done
	# the first lease with a router gives the default route
	if [ -n "$gw" ]; then
		ip route add default via "$gw" dev "$interface" 2>/dev/null
	fi
	echo "CONVERGE-GUEST-DHCP $(hostname) ip=$ip/$mask router=$gw" >/dev/console
	;;
esac
exit 0

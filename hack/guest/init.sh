#!/bin/busybox sh
# /init of converge's end-to-end test guest: mount the pseudo file
# systems, load the virtio_net modules (/lib/modules/order), then print the
# marker on the console (console=ttyS0) every 2 s for as long as the guest
# runs, so a console attached late still sees it.
#
# Kernel command line:
#   converge.hostname=NAME   the hostname (default converge-guest)
#   converge.ip=ADDR/PREFIX  eth0 gets ADDR/PREFIX and is brought up; then
#                            "CONVERGE-GUEST-NET <hostname> mac=<MAC> ip=ADDR/PREFIX"
#   converge.ping=PEER       with converge.ip: ping PEER every second until it
#                            answers, then "CONVERGE-GUEST-PING-OK PEER" once
/bin/busybox mkdir -p /proc /sys /dev /tmp /bin /sbin /usr/bin /usr/sbin
/bin/busybox mount -t devtmpfs devtmpfs /dev
exec </dev/console >/dev/console 2>&1
/bin/busybox --install -s
mount -t proc proc /proc
mount -t sysfs sysfs /sys
name=converge-guest
addr=
peer=
for arg in $(cat /proc/cmdline); do
	case "$arg" in
	converge.hostname=*) name="${arg#converge.hostname=}" ;;
	converge.ip=*) addr="${arg#converge.ip=}" ;;
	converge.ping=*) peer="${arg#converge.ping=}" ;;
	esac
done
hostname "$name"
if [ -f /lib/modules/order ]; then
	for m in $(cat /lib/modules/order); do
		insmod "/lib/modules/$m.ko" || echo "CONVERGE-GUEST-ERROR insmod $m failed"
	done
fi
ip link set lo up
if [ -n "$addr" ]; then
	n=0
	while [ ! -e /sys/class/net/eth0 ] && [ "$n" -lt 100 ]; do
		sleep 0.1
		n=$((n + 1))
	done
	if ip addr add "$addr" dev eth0 && ip link set eth0 up; then
		echo "CONVERGE-GUEST-NET $(hostname) mac=$(cat /sys/class/net/eth0/address) ip=$addr"
		if [ -n "$peer" ]; then
			(
				until ping -c 1 -W 1 "$peer" >/dev/null 2>&1; do
					sleep 1
				done
				echo "CONVERGE-GUEST-PING-OK $peer"
			) &
		fi
	else
		echo "CONVERGE-GUEST-ERROR eth0: cannot set $addr"
	fi
fi
i=0
while true; do
	echo "CONVERGE-GUEST-OK $(hostname) $(uname -r) tick=$i"
	i=$((i + 1))
	sleep 2
done

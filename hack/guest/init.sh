#!/bin/busybox sh
# /init of converge's end-to-end test guest: mount the pseudo file
# systems, then print the marker on the console (console=ttyS0) every 2 s
# for as long as the guest runs, so a console attached late still sees it.
/bin/busybox mkdir -p /proc /sys /dev /tmp /bin /sbin /usr/bin /usr/sbin
/bin/busybox mount -t devtmpfs devtmpfs /dev
exec </dev/console >/dev/console 2>&1
/bin/busybox --install -s
mount -t proc proc /proc
mount -t sysfs sysfs /sys
name=converge-guest
for arg in $(cat /proc/cmdline); do
	case "$arg" in converge.hostname=*) name="${arg#converge.hostname=}" ;; esac
done
hostname "$name"
i=0
while true; do
	echo "CONVERGE-GUEST-OK $(hostname) $(uname -r) tick=$i"
	i=$((i + 1))
	sleep 2
done

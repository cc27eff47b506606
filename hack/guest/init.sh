#!/bin/busybox sh
# /init of converge's end-to-end test guest: mount the pseudo file
# systems, load the kernel modules (/lib/modules/order: virtio_net,
# virtio_blk, isofs and what they depend on), then print the marker on the
# console (console=ttyS0) every 2 s for as long as the guest runs, so a
# console attached late still sees it.
#
# Kernel command line:
#   converge.hostname=NAME   the hostname (default converge-guest; cloud-init's
#                            meta-data overrides it)
#   converge.ip=ADDR/PREFIX  eth0 gets ADDR/PREFIX and is brought up; then
#                            "CONVERGE-GUEST-NET <hostname> mac=<MAC> ip=ADDR/PREFIX"
#   converge.dhcp=1          every ethN asks DHCP for an address (udhcpc, in the
#                            background, until it gets one); each lease prints
#                            "CONVERGE-GUEST-DHCP <hostname> ip=ADDR/PREFIX router=GW"
#                            (/etc/udhcpc.sh)
#   converge.ping=PEER       with converge.ip or converge.dhcp: ping PEER every
#                            second until it answers, then
#                            "CONVERGE-GUEST-PING-OK PEER" once
#   converge.cloudinit=1     read cloud-init data from an ISO 9660 disk labelled
#                            cidata or CIDATA (NoCloud: /user-data, /meta-data) or config-2
#                            (ConfigDrive: /openstack/latest/user_data,
#                            meta_data.json): print "CONVERGE-GUEST-CLOUDINIT
#                            <nocloud|configdrive> <device>", then each line of
#                            the user data as "CONVERGE-GUEST-USERDATA <line>",
#                            the hostname from the meta-data's local-hostname
#                            (NoCloud) or hostname (ConfigDrive), YAML or JSON;
#                            "CONVERGE-GUEST-CLOUDINIT none" when no such disk
#                            shows within 3 s; a user-data line
#                            "converge-write <vdX> <text>" is a directive (below)
#
# Data disks: at boot, after the cloud-init data, each virtio disk whose
# first sector starts with the line "CONVERGE-DATA <text>" prints
# "CONVERGE-GUEST-DATA <vdX> <text>"; then each user-data line
# "converge-write <vdX> <text>" writes "CONVERGE-DATA <text>" and a newline
# into the first sector of /dev/<vdX> (the rest of the sector zeroed,
# fsync'd) and prints "CONVERGE-GUEST-WROTE <vdX> <text>", as a user's
# guest changes its own disk (the next boot prints the new text).
/bin/busybox mkdir -p /proc /sys /dev /tmp /bin /sbin /usr/bin /usr/sbin /mnt
/bin/busybox mount -t devtmpfs devtmpfs /dev
exec </dev/console >/dev/console 2>&1
/bin/busybox --install -s
mount -t proc proc /proc
mount -t sysfs sysfs /sys
name=converge-guest
addr=
peer=
dhcp=
cloudinit=
for arg in $(cat /proc/cmdline); do
	case "$arg" in
	converge.hostname=*) name="${arg#converge.hostname=}" ;;
	converge.ip=*) addr="${arg#converge.ip=}" ;;
	converge.ping=*) peer="${arg#converge.ping=}" ;;
	converge.dhcp=1) dhcp=1 ;;
	converge.cloudinit=1) cloudinit=1 ;;
	esac
done
hostname "$name"
if [ -f /lib/modules/order ]; then
	for m in $(cat /lib/modules/order); do
		insmod "/lib/modules/$m.ko" || echo "CONVERGE-GUEST-ERROR insmod $m failed"
	done
fi
ip link set lo up

# The block devices' directories and the file of the converge-write
# directives (TestDataDisks runs userdata, datadisks and diskwrites on
# files).
sysblock=/sys/block
devdir=/dev
writes=/tmp/diskwrites

# userdata prints each line of the file $1, the last one even without a
# newline; it keeps the converge-write directives in $writes.
userdata() {
	while IFS= read -r line || [ -n "$line" ]; do
		echo "CONVERGE-GUEST-USERDATA $line"
		case "$line" in
		"converge-write "*) echo "${line#converge-write }" >>"$writes" ;;
		esac
	done <"$1"
}

# datadisks prints "CONVERGE-GUEST-DATA <vdX> <text>" for each virtio disk
# whose first sector starts with the line "CONVERGE-DATA <text>".
datadisks() {
	local b dev line
	for b in "$sysblock"/vd*; do
		dev="$devdir/${b##*/}"
		[ -e "$dev" ] || continue
		line=$(dd if="$dev" bs=512 count=1 2>/dev/null | tr -d '\000' | head -n 1)
		case "$line" in
		"CONVERGE-DATA "*) echo "CONVERGE-GUEST-DATA ${b##*/} ${line#CONVERGE-DATA }" ;;
		esac
	done
}

# diskwrites acts on each "<vdX> <text>" line of the file $1: it writes
# "CONVERGE-DATA <text>" and a newline into the first sector of the disk,
# zeroes the rest of the sector, fsyncs, and prints "CONVERGE-GUEST-WROTE
# <vdX> <text>" (or a CONVERGE-GUEST-ERROR line).
diskwrites() {
	local dev text
	[ -f "$1" ] || return
	while read -r dev text; do
		case "$dev" in
		vd[a-z] | vd[a-z][a-z]) ;;
		*)
			echo "CONVERGE-GUEST-ERROR converge-write: $dev is not a virtio disk (vdX)"
			continue
			;;
		esac
		if [ ! -e "$devdir/$dev" ]; then
			echo "CONVERGE-GUEST-ERROR converge-write: no disk $dev"
		elif printf 'CONVERGE-DATA %s\n' "$text" | dd of="$devdir/$dev" bs=512 count=1 conv=notrunc,sync,fsync 2>/dev/null; then
			echo "CONVERGE-GUEST-WROTE $dev $text"
		else
			echo "CONVERGE-GUEST-ERROR converge-write: cannot write $dev"
		fi
	done <"$1"
}

# metavalue gives the value of key $2 in the meta-data file $1, written as
# YAML lines ("key: value") or as JSON ({"key": "value", ...}: KubeVirt
# writes its NoCloud meta-data and ConfigDrive meta_data.json so).
metavalue() {
	tr ',{}' '\n\n\n' <"$1" | sed -n -E 's/^[[:space:]]*"?'"$2"'"?[[:space:]]*:[[:space:]]*"?([^",[:space:]]*)"?.*/\1/p' | head -n 1
}

# isolabel gives the volume identifier of the ISO 9660 file system on
# $1 in lower case, or nothing when $1 holds none: the primary volume
# descriptor is sector 16 (2048-byte sectors), "CD001" at its byte 1, the
# volume identifier at its bytes 40-71 (ECMA-119 8.4).
isolabel() {
	[ "$(dd if="$1" bs=1 skip=32769 count=5 2>/dev/null)" = CD001 ] || return
	dd if="$1" bs=1 skip=32808 count=32 2>/dev/null | tr -d '\000 ' | tr A-Z a-z
}

# cloudinit finds the NoCloud or ConfigDrive disk (by its ISO 9660
# volume identifier), mounts it read only on /mnt and prints what it
# holds.
cloudinit() {
	local n=0 dev kind ud md host
	while [ "$n" -lt 30 ]; do
		for dev in /dev/vd? /dev/sd? /dev/sr?; do
			[ -b "$dev" ] || continue
			case "$(isolabel "$dev")" in
			cidata) kind=nocloud ;;
			config-2) kind=configdrive ;;
			*) continue ;;
			esac
			if ! mount -t iso9660 -o ro "$dev" /mnt; then
				echo "CONVERGE-GUEST-ERROR cloudinit: cannot mount $dev ($kind)"
				return
			fi
			echo "CONVERGE-GUEST-CLOUDINIT $kind $dev"
			if [ "$kind" = nocloud ]; then
				ud=/mnt/user-data
				md=/mnt/meta-data
				[ -f "$md" ] && host=$(metavalue "$md" local-hostname)
			else
				ud=/mnt/openstack/latest/user_data
				md=/mnt/openstack/latest/meta_data.json
				[ -f "$md" ] && host=$(metavalue "$md" hostname)
			fi
			# as cloud-init, the names as Rock Ridge or Joliet give them
			if [ -f "$ud" ]; then
				userdata "$ud"
			else
				echo "CONVERGE-GUEST-ERROR cloudinit: no ${ud#/mnt} on $dev ($kind), it holds:" $(find /mnt -type f)
			fi
			[ -n "$host" ] && hostname "$host"
			umount /mnt
			return
		done
		sleep 0.1
		n=$((n + 1))
	done
	echo "CONVERGE-GUEST-CLOUDINIT none"
}

# pinger pings $peer every second until it answers, in the background.
pinger() {
	[ -n "$peer" ] || return
	(
		until ping -c 1 -W 1 "$peer" >/dev/null 2>&1; do
			sleep 1
		done
		echo "CONVERGE-GUEST-PING-OK $peer"
	) &
}

[ -n "$cloudinit" ] && cloudinit
datadisks
diskwrites "$writes"
if [ -n "$addr" ]; then
	n=0
	while [ ! -e /sys/class/net/eth0 ] && [ "$n" -lt 100 ]; do
		sleep 0.1
		n=$((n + 1))
	done
	if ip addr add "$addr" dev eth0 && ip link set eth0 up; then
		echo "CONVERGE-GUEST-NET $(hostname) mac=$(cat /sys/class/net/eth0/address) ip=$addr"
		pinger
	else
		echo "CONVERGE-GUEST-ERROR eth0: cannot set $addr"
	fi
elif [ -n "$dhcp" ]; then
	# virtio_net's insmod made the NICs there are; wait a little for a
	# slower one
	n=0
	while [ ! -e /sys/class/net/eth0 ] && [ "$n" -lt 30 ]; do
		sleep 0.1
		n=$((n + 1))
	done
	ifaces=
	for i in /sys/class/net/eth*; do
		[ -e "$i" ] && ifaces="$ifaces ${i##*/}"
	done
	[ -n "$ifaces" ] || echo "CONVERGE-GUEST-ERROR dhcp: no ethN interface"
	for i in $ifaces; do
		ip link set "$i" up
		# -q: quit once leased; -n: give up after -t discovers, and try
		# again (the DHCP server may answer only later)
		(
			until udhcpc -i "$i" -s /etc/udhcpc.sh -q -n -t 3 -T 1 >/dev/null 2>&1; do
				sleep 1
			done
		) &
	done
	pinger
fi
# disksizes prints "CONVERGE-GUEST-DISK <vdX> <bytes>" for each virtio
# disk whose size is new since its last call (every disk at the first):
# a disk grown under the running guest (a PVC expansion) is told on the
# console within 2 s.
disksizes() {
	for b in /sys/block/vd*; do
		[ -e "$b/size" ] || continue
		echo "CONVERGE-GUEST-DISK ${b#/sys/block/} $(($(cat "$b/size") * 512))"
	done >/tmp/disksizes.new
	[ -s /tmp/disksizes ] || echo none >/tmp/disksizes # busybox grep -f: an empty file matches all
	grep -vxF -f /tmp/disksizes /tmp/disksizes.new
	mv /tmp/disksizes.new /tmp/disksizes
}
i=0
while true; do
	echo "CONVERGE-GUEST-OK $(hostname) $(uname -r) tick=$i"
	disksizes
	i=$((i + 1))
	sleep 2
done

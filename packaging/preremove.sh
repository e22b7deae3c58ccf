#!/bin/sh
# Stop the service before its binary goes away (deb: "remove"; rpm: $1 = 0).
# An upgrade (deb: "upgrade"; rpm: $1 = 1) leaves it running: the new
# package's post-install restarts it. The cache, the log and the user stay.
case "$1" in
remove | 0) ;;
*) exit 0 ;;
esac
if [ -d /run/systemd/system ]; then
	systemctl stop hepcache.service >/dev/null 2>&1 || true
	systemctl disable hepcache.service >/dev/null 2>&1 || true
fi
exit 0

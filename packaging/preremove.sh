#!/bin/sh
# Stop the service before its binary goes away. The cache and the log stay.
if [ -d /run/systemd/system ]; then
	systemctl stop hepcache.service >/dev/null 2>&1 || true
	systemctl disable hepcache.service >/dev/null 2>&1 || true
fi
exit 0

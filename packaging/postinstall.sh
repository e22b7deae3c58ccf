#!/bin/sh
# The system user and the directories hepcache writes, after install or
# upgrade (deb: "configure"; rpm: $1 = 1 install, 2 upgrade). An upgrade
# restarts a running service onto the new binary; a fresh install does not
# start it ([origin] default must be set first).
set -e
if ! getent group hepcache >/dev/null 2>&1; then
	groupadd --system hepcache
fi
if ! getent passwd hepcache >/dev/null 2>&1; then
	nologin=$(command -v nologin || echo /sbin/nologin)
	useradd --system --gid hepcache --home-dir /var/cache/hepcache --no-create-home \
		--shell "$nologin" --comment "hepcache caching proxy" hepcache
fi
install -d -o hepcache -g hepcache -m 0750 /var/cache/hepcache /var/log/hepcache
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || true
	systemctl try-restart hepcache.service >/dev/null 2>&1 || true
fi
exit 0

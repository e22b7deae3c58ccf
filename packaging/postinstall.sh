#!/bin/sh
# The system user and the directories hepcache writes, after install or
# upgrade (deb: "configure"; rpm: $1 = 1 install, 2 upgrade). An upgrade
# hands a running service over to the new binary (hepcache upgrade); a fresh
# install does not start it ([origin] default must be set first).
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
# A run as root (hepcache serve by hand) leaves root-owned files that the
# service user then cannot open: give them back.
find /var/cache/hepcache /var/log/hepcache -xdev ! -user hepcache -exec chown hepcache:hepcache {} + 2>/dev/null || true
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || true
	# A running service hands its sockets to the new binary (no connection
	# refused); if that fails, it is restarted.
	if systemctl is-active --quiet hepcache.service; then
		/usr/bin/hepcache upgrade --config /etc/hepcache/hepcache.toml >/dev/null 2>&1 ||
			systemctl try-restart hepcache.service >/dev/null 2>&1 || true
	fi
fi
exit 0

package main

import (
	"log/slog"
	"os"
	"syscall"

	"github.com/hepcache/hepcache/internal/config"
	"github.com/hepcache/hepcache/internal/server"
)

// warnForeignOwner warns when serve runs as root on directories that
// belong to another user (the service user): what it creates now would be
// root's, and the service would then fail on it with "permission denied".
func warnForeignOwner(log *slog.Logger, cfg *config.Config) {
	if os.Geteuid() != 0 {
		return
	}
	for _, d := range ownedDirs(cfg) {
		var st syscall.Stat_t
		if syscall.Stat(d, &st) != nil || st.Uid == 0 {
			continue
		}
		owner := config.UserName(int(st.Uid))
		log.Warn("running as root on a directory of another user: what is created now will be root's and "+owner+"'s service will fail on it with permission denied; stop and run as "+owner+" (systemctl start hepcache), or afterwards run the fix",
			"dir", d, "owner", owner, "fix", "chown -R "+owner+":"+config.GroupName(int(st.Gid))+" "+d)
	}
}

// ownedDirs are the directories serve writes into (server.OwnedDirs).
func ownedDirs(cfg *config.Config) []string { return server.OwnedDirs(cfg) }

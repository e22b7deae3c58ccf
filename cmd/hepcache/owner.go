package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"syscall"

	"github.com/hepcache/hepcache/internal/config"
)

// warnForeignOwner warns when serve runs as root on directories that
// belong to another user (the service user): what it creates now would be
// root's, and the service would then fail on it with "permission denied".
func warnForeignOwner(log *slog.Logger, cfg *config.Config) {
	if os.Geteuid() != 0 {
		return
	}
	dirs := append([]string{cfg.Cache.Dir}, cfg.Cache.DataDirs...)
	if al := cfg.Log.AccessLog; al != "" && al != "-" {
		dirs = append(dirs, filepath.Dir(al))
	}
	for _, d := range dirs {
		var st syscall.Stat_t
		if d == "" || syscall.Stat(d, &st) != nil || st.Uid == 0 {
			continue
		}
		log.Warn("running as root on a directory of another user: files created now will be root's and that user's service will not be able to use them; stop and run as that user (systemctl start hepcache), or afterwards: chown -R",
			"dir", d, "owner_uid", st.Uid)
	}
}

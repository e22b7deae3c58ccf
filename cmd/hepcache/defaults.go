package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// defaultConfigPath is the packaged configuration, which the admin commands
// read when no flag names a cache directory or a config file.
const defaultConfigPath = "/etc/hepcache/hepcache.toml"

// configPath returns the config file to read: the one given, else the
// packaged one if it exists.
func configPath(given string) (string, error) {
	if given != "" {
		return given, nil
	}
	if _, err := os.Stat(defaultConfigPath); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("no --cache-dir DIR or --config FILE given, and no %s", defaultConfigPath)
		}
		return "", fmt.Errorf("no --cache-dir DIR or --config FILE given: %w", err)
	}
	return defaultConfigPath, nil
}

module github.com/hepcache/hepcache

go 1.26.8

require (
	github.com/BurntSushi/toml v1.4.0
	golang.org/x/image v0.24.0
)
